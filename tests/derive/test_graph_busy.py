"""CUDA graphs are GPU work: busy time, the temporal breakdown, gpu_gaps, low_utilization and the
summary see them, each checked against a computation over the source file.

- A generated nsys export in graph mode (fixtures/gen_nsys.py, cuda_graphs=True: the forward
  layers run as a graph traced whole, one CUPTI_ACTIVITY_KIND_GRAPH_TRACE row per launch and no
  kernel rows for its nodes): busy = the union of graph executions, kernels, copies and memsets;
  compute = the union of graph executions and kernels; no gap or low-utilization chunk inside an
  execution.
- The hand-written export fixtures/nsys_graphs.sql (graph-level and node-level launches).
- A generated Kineto trace with graph replays (fixtures/gen_kineto.py, graphs=True): Kineto traces
  graph nodes one by one, so the nodes are the kernels; the gap between two nodes of one replay is
  the graph's own (cause 'graph', no cost)."""

from __future__ import annotations

import sqlite3

import pytest

import traceql
from fixtures.gen_kineto import generate as generate_kineto
from fixtures.gen_nsys import generate

from ..intervals import length, union
from .test_graphs import FIXTURE_SQL
from ..sources.test_kineto import events, load, ns
from ..util import source_rows as source


def intervals(src):
    """{device: {'graph': [...], 'kernel': [...], 'memory': [...]}} from the export itself."""
    out = {}
    tables = {t for (t,) in source(src, "SELECT name FROM sqlite_master WHERE type = 'table'")}
    for kind, sql in (("kernel", "SELECT deviceId, start, end FROM CUPTI_ACTIVITY_KIND_KERNEL"),
                      ("memory", "SELECT deviceId, start, end FROM CUPTI_ACTIVITY_KIND_MEMCPY "
                                 "UNION ALL SELECT deviceId, start, end FROM CUPTI_ACTIVITY_KIND_MEMSET"),
                      ("graph", "SELECT deviceId, start, end FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE")):
        if not all(t in tables for t in sql.split() if t.startswith("CUPTI_")):
            continue
        for dev, s, e in source(src, sql):
            out.setdefault(dev, {"graph": [], "kernel": [], "memory": []})[kind].append((s, e))
    return out


def gaps_of(busy, min_gap):
    return [(a[1], b[0] - a[1]) for a, b in zip(busy, busy[1:]) if b[0] - a[1] >= min_gap]


def low_chunks(busy, chunks, max_pct):
    """(chunk, busy_ns, chunk_ns) of the chunks below max_pct, as nsys's gpu_time_util cuts them."""
    first, last = busy[0][0], busy[-1][1]
    out = []
    for c in range(chunks):
        lo, hi = first + (last - first) * c // chunks, first + (last - first) * (c + 1) // chunks
        b = length(busy, lo, hi)
        if hi > lo and 100.0 * b / (hi - lo) < max_pct:
            out.append((c, b, hi - lo))
    return out


@pytest.fixture(scope="module")
def graph_mode(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("graph_mode")
    src = tmp / "graphs.sqlite"
    expected = generate(src, kernels=120, seed=5, cuda_graphs=True)
    traceql.ingest([src], db=tmp / "ws.duckdb")
    ws = traceql.open(tmp / "ws.duckdb")
    yield src, ws, expected
    ws.close()


def test_generated_graph_mode_export_has_graph_executions_and_no_node_kernels(graph_mode):
    src, ws, expected = graph_mode
    raw = source(src, "SELECT count(*), sum(end - start) FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE")[0]
    assert raw == (expected["graph_execs"], expected["graph_exec_dur_sum"]) and raw[0] >= 20
    got = ws.sql("SELECT count(*) AS n, sum(dur) AS ns, count(api_id) AS calls FROM graph_exec").to_pylist()
    assert got == [{"n": raw[0], "ns": raw[1], "calls": raw[0]}]
    assert ws.sql("SELECT count(*) AS n FROM kernel").to_pylist() == [{"n": 120}]


def test_busy_and_breakdown_are_unions_with_the_graph_executions(graph_mode):
    src, ws, _ = graph_mode
    per = intervals(src)
    got = {r["device_id"]: r for r in ws.sql("SELECT * FROM device_busy").to_pylist()}
    assert set(got) == set(per) == {0, 1}
    for dev, iv in per.items():
        busy = union(iv["graph"] + iv["kernel"] + iv["memory"])
        compute = union(iv["graph"] + iv["kernel"])
        row = got[dev]
        assert row["busy_ns"] == length(busy)
        assert row["compute_ns"] == length(compute)
        assert row["memory_exposed_ns"] == length(busy) - length(compute)
        assert (row["comm_ns"], row["comm_exposed_ns"]) == (0, 0)
        assert row["ops"] == len(iv["graph"]) + len(iv["kernel"]) + len(iv["memory"])
        # the graphs are most of the busy time: without them busy would be far lower
        assert length(union(iv["kernel"] + iv["memory"])) < 0.6 * length(busy)
    # summary's GPU lines and report --by breakdown show the same numbers, span the denominator
    span = ws.sql("SELECT duration FROM trace").to_pylist()[0]["duration"]
    for g in ws.summary().gpus.to_pylist():
        assert g["busy_ns"] == got[g["device_id"]]["busy_ns"]
        assert g["busy_pct"] == pytest.approx(100.0 * g["busy_ns"] / span)
        assert g["compute_ns"] == got[g["device_id"]]["compute_ns"]
    for b in ws.report("breakdown").to_pylist():
        assert b["compute_ns"] == got[b["device_id"]]["compute_ns"]
        assert b["idle_ns"] == span - got[b["device_id"]]["busy_ns"]


def test_no_gap_inside_a_graph_execution(graph_mode):
    src, ws, _ = graph_mode
    per = intervals(src)
    expected = sorted((dev, ts, gap) for dev, iv in per.items()
                      for ts, gap in gaps_of(union(iv["graph"] + iv["kernel"] + iv["memory"]), 10_000))
    got = ws.analyze(["gpu_gaps"], min_gap_ns=10_000).evidence["gpu_gaps"].to_pylist()
    assert sorted((r["device_id"], r["ts"], r["gap_ns"]) for r in got) == expected
    for r in got:
        assert not any(s < r["ts"] + r["gap_ns"] and r["ts"] < e for s, e in per[r["device_id"]]["graph"]), r
    # the gaps around graph executions name them, and the call that launched the next one
    every = ws.analyze(["gpu_gaps"], min_gap_ns=1).evidence["gpu_gaps"].to_pylist()
    after_graph = [r for r in every if r["after"] == "[CUDA graph 1]"]
    assert after_graph and {r["next_call"] for r in after_graph} == {"cudaGraphLaunch"}
    assert any(r["before"] == "[CUDA graph 1]" for r in every)
    assert all(r["pid"] in (4242, 4343) and r["tid"] in (4242, 4343) for r in after_graph)


def test_no_low_utilization_chunk_inside_a_graph_execution(graph_mode):
    src, ws, _ = graph_mode
    per = intervals(src)
    got = ws.analyze(["low_utilization"], chunks=200).evidence["low_utilization"].to_pylist()
    expected = sorted((dev, c, b, n) for dev, iv in per.items()
                      for c, b, n in low_chunks(union(iv["graph"] + iv["kernel"] + iv["memory"]), 200, 50))
    assert sorted((r["device_id"], r["chunk"], r["busy_ns"], r["chunk_ns"]) for r in got) == expected
    # counted without the graph executions, many chunks would be idle
    assert sum(len(low_chunks(union(iv["kernel"] + iv["memory"]), 200, 50)) for iv in per.values()) > 100


def test_hand_written_graph_fixture_busy_time(tmp_path):
    src = tmp_path / "graphs.sqlite"
    con = sqlite3.connect(src)
    con.executescript(FIXTURE_SQL.read_text())
    con.close()
    traceql.ingest([src], db=tmp_path / "ws.duckdb")
    with traceql.open(tmp_path / "ws.duckdb") as ws:
        [row] = ws.sql("SELECT ops, busy_ns, compute_ns, memory_exposed_ns FROM device_busy").to_pylist()
        # kernels 300 + 50 + 300 + 200 + 400 + 200 and the executions [4500,5300), [6300,6900)
        assert row == {"ops": 6 + 2, "busy_ns": 1450 + 800 + 600, "compute_ns": 2850, "memory_exposed_ns": 0}
        iv = intervals(src)[0]
        assert row["busy_ns"] == length(union(iv["graph"] + iv["kernel"]))
        # report --by device and --by stream: the executions' time, and busy time with them
        [dev] = ws.report("device").to_pylist()
        assert (dev["calls"], dev["kernel_ns"], dev["graph_ns"], dev["total_ns"], dev["busy_ns"]) \
            == (8, 1450, 1400, 2850, 2850)
        s7 = [r for r in ws.report("stream").to_pylist() if r["stream_id"] == 7]
        assert [(r["graphs"], r["graph_ns"], r["kernels"], r["busy_ns"]) for r in s7] == [(2, 1400, 5, 1400 + 1400)]
        gaps = ws.analyze(["gpu_gaps"], min_gap_ns=1).evidence["gpu_gaps"].to_pylist()
        assert sorted((r["ts"], r["gap_ns"]) for r in gaps) == gaps_of(union(iv["graph"] + iv["kernel"]), 1)
        by_ts = {r["ts"]: r for r in gaps}
        # [4150,4500): the first execution, launched by cudaGraphLaunch [4000,4200) of process 100
        assert (by_ts[4150]["after"], by_ts[4150]["next_call"], by_ts[4150]["cause"]) \
            == ("[CUDA graph 1]", "cudaGraphLaunch", "launch")
        assert (by_ts[5300]["before"], by_ts[6900]["before"]) == ("[CUDA graph 1]", "[CUDA graph 1]")
        # between the node kernels of the node-level launch (corr 10): inside one replay
        assert {ts: by_ts[ts]["cause"] for ts in (7800, 8100)} == {7800: "graph", 8100: "graph"}
        assert by_ts[7800]["recoverable_ns"] == by_ts[8100]["recoverable_ns"] == 0


@pytest.fixture(scope="module")
def replays(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("replays")
    src = tmp / "replays.json"
    expected = generate_kineto(src, kernels=150, seed=4, graphs=True)
    traceql.ingest([src], db=tmp / "ws.duckdb")
    ws = traceql.open(tmp / "ws.duckdb")
    yield load(src), ws, expected
    ws.close()


def gpu_events(doc):
    return [e for kind in ("kernel", "memcpy", "memset") for e in events(doc, kind)]


def test_kineto_graph_replays_count_by_their_nodes(replays):
    doc, ws, expected = replays
    launches = {e["args"]["correlation"] for e in events(doc, "api") if e["name"] == "cudaGraphLaunch"}
    nodes = [e for e in events(doc, "kernel") if e["args"]["correlation"] in launches]
    assert len(launches) == expected["graph_replays"] >= 4 and len(nodes) == 2 * len(launches)
    ops = [(ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in gpu_events(doc)]
    [row] = ws.sql("SELECT ops, busy_ns, compute_ns FROM device_busy").to_pylist()
    busy = union(ops)
    kernels = union([(ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in events(doc, "kernel")])
    assert row == {"ops": len(ops), "busy_ns": length(busy), "compute_ns": length(kernels)}
    # the replays' nodes are kernels of `report --by kernel`, with the graph launch as their call
    got = {r["name"]: r["calls"] for r in ws.report("kernel").to_pylist()}
    assert got["void graph_scale_kernel<float>(float*, float, int)"] == len(launches)
    assert ws.sql("SELECT count(*) AS n FROM launch WHERE api_name = 'cudaGraphLaunch'").to_pylist() == [
        {"n": len(nodes)}]


def test_kineto_gap_inside_a_replay_is_the_graphs_own(replays):
    doc, ws, _ = replays
    launches = {e["args"]["correlation"] for e in events(doc, "api") if e["name"] == "cudaGraphLaunch"}
    ops = sorted((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), e["args"]["correlation"]) for e in gpu_events(doc))
    first = ops[0][0]
    busy = union([(s, e) for s, e, _ in ops])
    ends = {e: c for s, e, c in ops}  # which operation ended each busy stretch
    starts = {s: c for s, e, c in ops}
    inside = {(a - first, b - a) for a, b in gaps_of_pairs(busy) if ends[a] == starts[b] and ends[a] in launches}
    assert len(inside) == len(launches)  # one per replay, GRAPH_IDLE_NS long
    every = ws.analyze(["gpu_gaps"], min_gap_ns=1).evidence["gpu_gaps"].to_pylist()
    start = ws.sql("SELECT min(ts) AS t FROM gpu_op").to_pylist()[0]["t"]
    assert sorted((r["ts"] - start, r["gap_ns"]) for r in every) == sorted(
        (a - first, b - a) for a, b in gaps_of_pairs(busy))
    graph = {(r["ts"] - start, r["gap_ns"]) for r in every if r["cause"] == "graph"}
    assert graph == inside and {g for _, g in graph} == {1_500_000}
    assert all(r["recoverable_ns"] == 0 for r in every if r["cause"] == "graph")
    # at the default threshold (1 ms) the replays' inner gaps are the only gaps, and cost nothing
    default = ws.analyze(["gpu_gaps"])
    assert {r["cause"] for r in default.evidence["gpu_gaps"].to_pylist()} == {"graph"}
    assert default.findings.to_pylist()[0]["recoverable_ns"] == 0
    assert default.failed(["gpu_gaps"]) == []


def gaps_of_pairs(busy):
    """(end of a busy stretch, start of the next) for every hole in the union."""
    return [(a[1], b[0]) for a, b in zip(busy, busy[1:])]


def test_upgrade_from_contract_2_recomputes_busy_time_with_the_graphs(tmp_path):
    """A contract-2 workspace left graph executions out of device_busy: refused until `upgrade`,
    which computes it again (here from the source file, still in place)."""
    import duckdb

    src = tmp_path / "graphs.sqlite"
    con = sqlite3.connect(src)
    con.executescript(FIXTURE_SQL.read_text())
    con.close()
    db = tmp_path / "ws.duckdb"
    traceql.ingest([src], db=db)
    with traceql.open(db) as ws:  # device_busy is built on first use (traceql.derivation): build it now
        ws.ensure()
    con = duckdb.connect(str(db))
    con.execute("UPDATE device_busy SET ops = 6, busy_ns = 1450, compute_ns = 1450")  # contract 2's figures
    assert con.execute("SELECT count(*) FROM device_busy").fetchone()[0] == 1
    con.execute("UPDATE workspace_version SET contract_version = 2")
    con.close()
    with pytest.raises(traceql.StaleWorkspaceError, match="changed in 3: CUDA graphs traced whole"):
        traceql.open(db)
    assert traceql.upgrade(db)[0] == 2
    with traceql.open(db) as ws:
        assert ws.sql("SELECT ops, busy_ns, compute_ns FROM device_busy").to_pylist() == [
            {"ops": 8, "busy_ns": 2850, "compute_ns": 2850}]
