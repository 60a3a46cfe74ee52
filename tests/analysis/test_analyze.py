"""traceql analyze on a hand-written export with exactly known answers (fixtures/nsys_analyze.sql):
every rule's findings, the new contract tables (sync_event, osrt_call, profiler_overhead,
gpu_metric), launch.category and the temporal breakdown, each checked against a computation
over the source file with Python's sqlite3; the CLI (formats, --fail-on, --list, errors); and
the plans of every rule's joins (no nested loops, no interval joins)."""

from __future__ import annotations

import json
import re
import sqlite3
import statistics

import pytest

import traceql
from traceql.analysis import analyze as analyze_mod

from ..query.test_join_plans import _bad_joins, _operators
from ..intervals import length, union
from ..util import REPO
from ..util import source_rows as source

GAP_CAUSES = {  # gap start -> (cause, the call the launching thread was in, its NVTX path), as the fixture says
    5000: ("host", None, "step 1 > fwd"),
    12000: ("sync", "cudaDeviceSynchronize", "step 1"),
    15000: ("launch", "cudaLaunchKernel", "step 1"),
    20000: ("host", None, "step 1"),
    22000: ("gpu_wait", None, "step 2"),
    24000: ("host", None, "step 2"),
    26000: ("sync", "cudaMemcpyAsync", "step 2"),
    27800: ("sync", "cudaMemset", "step 2"),
    29900: ("sync", "cudaMemcpy", "step 2"),
    35950: ("host", None, "step 3"),
    46000: ("host", None, "step 4"),
    48000: ("profiler", None, "step 4"),
}


@pytest.fixture(scope="module")
def fixture(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("analyze")
    src = tmp / "analyze.sqlite"
    con = sqlite3.connect(src)
    con.executescript((REPO / "fixtures" / "nsys_analyze.sql").read_text())
    con.close()
    traceql.ingest([src], db=tmp / "ws.duckdb")
    ws = traceql.open(tmp / "ws.duckdb")
    yield src, ws, tmp / "ws.duckdb"
    ws.close()


def gpu_intervals(src, where="1"):
    return source(src, f"""SELECT start, end FROM (
        SELECT start, end, 'kernel' AS kind, shortName FROM CUPTI_ACTIVITY_KIND_KERNEL
        UNION ALL SELECT start, end, 'memcpy', NULL FROM CUPTI_ACTIVITY_KIND_MEMCPY
        UNION ALL SELECT start, end, 'memset', NULL FROM CUPTI_ACTIVITY_KIND_MEMSET) WHERE {where}
        ORDER BY start, end""")


def rows(ws, rule, **params):
    return ws.analyze([rule], **params).evidence[rule].to_pylist()


def test_gaps_are_the_holes_in_the_union_of_gpu_work_with_their_causes(fixture):
    src, ws, _ = fixture
    busy = union(gpu_intervals(src))
    expected = {a[1]: b[0] - a[1] for a, b in zip(busy, busy[1:]) if b[0] - a[1] >= 1000}
    got = rows(ws, "gpu_gaps", min_gap_ns=1000)
    assert {r["ts"]: r["gap_ns"] for r in got} == expected
    assert {r["ts"]: (r["cause"], r["cpu_call"], r["range_path"]) for r in got} == GAP_CAUSES
    by_ts = {r["ts"]: r for r in got}
    assert by_ts[5000]["os_call"] == "read" and by_ts[5000]["launch_delay_ns"] == 8500 - 5000
    assert by_ts[15000]["launch_delay_ns"] == -200 and by_ts[15000]["thread"] == "main"
    assert by_ts[48000]["recoverable_ns"] == 0  # profiler overhead [48500, 49000) inside it
    assert all(r["recoverable_ns"] == r["gap_ns"] for r in got if r["cause"] != "profiler")
    assert [r["recoverable_ns"] for r in got] == sorted((r["recoverable_ns"] for r in got), reverse=True)
    assert by_ts[12000]["before"] == "void k(float*)" and by_ts[26000]["before"] == "[CUDA memcpy Host-to-Device]"
    # every gap, down to the 300 ns between the launch-bound 'tiny' kernels
    everything = rows(ws, "gpu_gaps", min_gap_ns=1)
    assert len(everything) == len(busy) - 1
    assert sum(r["cause"] == "launch" and r["gap_ns"] == 300 for r in everything) == 11
    # per stream: stream 8's gap between K6 and K7, with stream 7 idle too
    per_stream = rows(ws, "gpu_gaps", min_gap_ns=1000, per_stream=True)
    s8 = [(r["ts"], r["gap_ns"]) for r in per_stream if r["stream_id"] == 8]
    assert s8 == [(22000, 1000)]


def test_sync_event_and_sync_calls(fixture):
    src, ws, _ = fixture
    events = ws.sql("SELECT kind, api_name, tid, ts, dur, stream_id, event_id FROM sync_event ORDER BY ts").to_pylist()
    raw = source(src, "SELECT start, end - start, streamId, eventId FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION ORDER BY start")
    assert [(e["ts"], e["dur"]) for e in events] == [(s, d) for s, d, _, _ in raw]
    assert [(e["kind"], e["api_name"], e["tid"]) for e in events] == [
        ("device", "cudaDeviceSynchronize", 100), ("stream_wait", "cudaStreamWaitEvent", 100)]
    assert (events[0]["stream_id"], events[0]["event_id"]) == (None, None)  # 0xFFFFFFFF: not applicable
    assert (events[1]["stream_id"], events[1]["event_id"]) == (8, 3)
    # the stream wait does not block the host; M2's cudaMemcpy [29000,30000) of [29200,29900) is a
    # host read that waited 200 ns for the queue, then the GPU idled from 29900 to 31450 (gap H)
    call, read = rows(ws, "sync_calls")
    assert (call["call"], call["kind"], call["wait_ns"]) == ("cudaDeviceSynchronize", "device", raw[0][1])
    assert call["gpu_idle_ns"] == call["recoverable_ns"] == 14200 - 12000  # the GPU ran dry at 12000
    assert call["range_path"] == "step 1" and call["thread"] == "main" and call["op"] is None
    assert (read["call"], read["kind"], read["wait_ns"], read["gpu_idle_ns"]) == ("cudaMemcpy", "copy", 200, 1550)
    assert read["range_path"] == "step 2" and read["stream_id"] == 7


def test_copies_and_memsets_that_block_the_host(fixture):
    src, ws, _ = fixture
    calls = dict(((s, e), e - s) for s, e in source(src, "SELECT start, end FROM CUPTI_ACTIVITY_KIND_RUNTIME"))
    [page] = rows(ws, "pageable_memcpy")
    assert (page["copy_kind"], page["src_kind"], page["bytes"]) == ("Host-to-Device", "Pageable", 1048576)
    # what pinned memory saves is the copy's own time, not the whole call; no pinned copy of that
    # direction to measure the bandwidth with
    assert page["call_ns"] == calls[(24500, 26500)] and page["copy_ns"] == page["recoverable_ns"] == 1000
    assert page["pinned_ns"] is None
    [sync] = rows(ws, "sync_memcpy")
    assert (sync["call"], sync["copy_kind"], sync["call_ns"]) == ("cudaMemcpy", "Device-to-Host", calls[(29000, 30000)])
    [mset] = rows(ws, "sync_memset")
    assert (mset["call"], mset["mem_kind"], mset["call_ns"], mset["memset_ns"]) == ("cudaMemset", "Pinned", 1000, 600)
    assert {page["range_path"], sync["range_path"], mset["range_path"]} == {"step 2"}
    # thresholds: a call shorter than min_call_ns is no finding
    assert rows(ws, "pageable_memcpy", min_call_ns=2001) == []


def test_small_kernels(fixture):
    src, ws, _ = fixture
    short = source(src, """SELECT s.value, k.end - k.start, r.end - r.start FROM CUPTI_ACTIVITY_KIND_KERNEL k
                           JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId
                           JOIN StringIds s ON s.id = k.demangledName
                           WHERE k.end - k.start < r.end - r.start AND k.end - k.start <= 10000""")
    names = [n for n, _, _ in short]
    assert {n: names.count(n) for n in names} == {"void tiny(float*)": 12, "void k(float*)": 1}  # K5: once
    tiny = [(k, launch) for n, k, launch in short if n == "void tiny(float*)"]
    [row] = rows(ws, "small_kernels")
    assert row["kernels"] == len(tiny) == 12 and row["name"] == "void tiny(float*)"
    med_k, med_l = statistics.median(k for k, _ in tiny), statistics.median(l for _, l in tiny)
    assert (row["med_kernel_ns"], row["med_launch_ns"]) == (med_k, med_l) == (100, 300)
    # each is preceded by at least 300 ns of GPU idle time (1550 before the first): capped at 300 - 100
    assert row["recoverable_ns"] == 12 * (med_l - med_k)
    assert (row["kernel_ns"], row["launch_ns"]) == (sum(k for k, _ in tiny), sum(l for _, l in tiny))
    assert row["range_path"] == "step 3"
    assert rows(ws, "small_kernels", min_kernels=13) == []


def test_exposed_communication_and_the_breakdown(fixture):
    src, ws, _ = fixture
    cat = {r["op_id"]: r["category"] for r in ws.sql("SELECT op_id, category FROM launch").to_pylist()}
    assert sorted(set(cat.values())) == ["communication", "compute", "memory"]
    assert list(cat.values()).count("communication") == 1 and list(cat.values()).count("memory") == 3
    comm = source(src, "SELECT k.start, k.end FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName "
                       "WHERE s.value LIKE 'nccl%'")
    compute = union(source(src, "SELECT k.start, k.end FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s "
                                "ON s.id = k.shortName WHERE s.value NOT LIKE 'nccl%'"))
    [(cs, ce)] = comm
    overlapped = length(compute, cs, ce)
    [row] = rows(ws, "exposed_comm")
    assert (row["comm_ns"], row["overlapped_ns"], row["exposed_ns"]) == (ce - cs, overlapped, ce - cs - overlapped)
    assert (row["comm_ns"], row["exposed_ns"]) == (3000, 2000)
    assert row["name"].startswith("ncclDevKernel_AllReduce") and row["range_path"] == "step 4"
    # the temporal breakdown: compute wins over communication, kernels over copies
    span = ws.sql("SELECT duration FROM trace").to_pylist()[0]["duration"]
    kernels = union(source(src, "SELECT start, end FROM CUPTI_ACTIVITY_KIND_KERNEL"))
    everything = union(gpu_intervals(src))
    [b] = ws.report("breakdown").to_pylist()
    assert b["span_ns"] == span == 51000 - 1000
    assert b["compute_ns"] == length(compute)
    assert b["comm_ns"] == length(kernels) - length(compute) == 2000
    assert b["memory_ns"] == length(everything) - length(kernels)
    assert b["idle_ns"] == span - length(everything)
    assert b["compute_ns"] + b["comm_ns"] + b["memory_ns"] + b["idle_ns"] == span
    assert b["comm_total_ns"] == 3000 and b["comm_hidden_pct"] == pytest.approx(100 * 1000 / 3000)
    [busy] = ws.sql("SELECT * FROM device_busy").to_pylist()
    assert busy["busy_ns"] == length(everything) and busy["comm_ns"] == 3000 and busy["comm_exposed_ns"] == 2000
    [gpu] = ws.summary().gpus.to_pylist()
    assert (gpu["compute_ns"], gpu["comm_ns"], gpu["memory_ns"], gpu["idle_ns"]) == (
        b["compute_ns"], b["comm_ns"], b["memory_ns"], b["idle_ns"])


def test_exposed_memcpy(fixture):
    """Each copy's part that no kernel on its GPU overlapped, from the source: copy intervals less
    the union of the GPU's kernels."""
    src, ws, _ = fixture
    kernels = union(source(src, "SELECT start, end FROM CUPTI_ACTIVITY_KIND_KERNEL"))
    copies = source(src, "SELECT start, end, bytes FROM CUPTI_ACTIVITY_KIND_MEMCPY ORDER BY start")
    expected = sorted(((e - s - length(kernels, s, e), e - s, b) for s, e, b in copies), reverse=True)
    found = [(r["exposed_ns"], r["copy_ns"], r["bytes"]) for r in rows(ws, "exposed_memcpy")]
    assert found == [x for x in expected if x[0] >= 1] and len(found) == 2
    assert [r["copy_kind"] for r in rows(ws, "exposed_memcpy")] == ["Host-to-Device", "Device-to-Host"]
    [m1] = rows(ws, "exposed_memcpy", min_exposed_ns=1000)  # M1: 1 MB in 1000 ns, nothing beside it
    assert (m1["exposed_ns"], m1["recoverable_ns"], m1["overlap_pct"], m1["gb_per_s"]) == (1000, 1000, 0.0, 1048576 / 1000)
    assert m1["range_path"] == "step 2"


def test_low_utilization_chunks(fixture):
    src, ws, _ = fixture
    busy = union(gpu_intervals(src))
    first, last = busy[0][0], busy[-1][1]
    n = 10
    metrics = source(src, "SELECT timestamp, value FROM GPU_METRICS WHERE metricId = 3")
    expected = {}
    for i in range(n):
        lo, hi = first + (last - first) * i // n, first + (last - first) * (i + 1) // n
        covered = length(busy, lo, hi)
        if 100.0 * covered / (hi - lo) < 50:
            samples = [v for t, v in metrics if lo <= t < hi and t < last]
            expected[i] = (lo, hi - lo, covered, statistics.mean(samples) if samples else None)
    got = rows(ws, "low_utilization", chunks=n)
    assert {r["chunk"]: (r["ts"], r["chunk_ns"], r["busy_ns"]) for r in got} == {k: v[:3] for k, v in expected.items()}
    assert {r["chunk"]: r["sm_active_pct"] for r in got} == pytest.approx({k: v[3] for k, v in expected.items()})
    assert len(got) == 6
    assert all(r["recoverable_ns"] == r["chunk_ns"] - r["busy_ns"] and r["thread"] == "main" for r in got)
    ranges = source(src, "SELECT start, end, text FROM NVTX_EVENTS")  # fwd lies inside step 1
    for r in got:
        mid = (2 * r["ts"] + r["chunk_ns"]) // 2
        inside = [t for s0, e0, t in ranges if s0 <= mid < e0]
        assert r["range_path"] == ("step 1 > fwd" if "fwd" in inside else inside[0]), r
    assert rows(ws, "low_utilization", chunks=n, max_util_pct=1) == [r for r in got if r["busy_ns"] == 0]


def test_iterations(fixture):
    src, ws, _ = fixture
    steps = source(src, "SELECT start, end - start FROM NVTX_EVENTS WHERE text LIKE 'step %' ORDER BY start")
    got = sorted(rows(ws, "iterations"), key=lambda r: r["iteration"])
    med = statistics.median(d for _, d in steps)
    assert [(r["ts"], r["dur_ns"]) for r in got] == steps
    assert {r["source"] for r in got} == {"nvtx"} and {r["family"] for r in got} == {"step #"}
    assert [r["recoverable_ns"] for r in got] == [max(0, d - med) for _, d in steps] == [10000, 0, 0, 0]
    assert got[0]["stddev_ns"] == round(statistics.stdev(d for _, d in steps))
    assert got[0]["median_ns"] == med and got[0]["iterations"] == 4
    # too many required: the rule abstains, saying why
    [row] = rows(ws, "iterations", min_iterations=5)
    assert row["recoverable_ns"] is None and row["note"].startswith("no clear iteration pattern")
    # a name given: those ranges, whatever their pattern
    assert [r["range_path"] for r in sorted(rows(ws, "iterations", name="fwd", min_iterations=1),
                                             key=lambda r: r["ts"])] == ["step 1 > fwd"]


def test_host_tables_match_the_source(fixture):
    src, ws, _ = fixture
    assert ws.sql("SELECT pid, tid, ts, dur, name, return_value FROM osrt_call").to_pylist() == [
        {"pid": 100, "tid": 100, "ts": 4500, "dur": 3500, "name": "read", "return_value": 4096}]
    assert ws.sql("SELECT pid, tid, ts, dur, name FROM profiler_overhead").to_pylist() == [
        {"pid": 100, "tid": 100, "ts": 48500, "dur": 500, "name": "CUPTI Buffer flush"}]
    samples = ws.sql("SELECT device_id, ts, metric, value FROM gpu_metric ORDER BY metric, ts").to_pylist()
    raw = source(src, "SELECT m.timestamp, n.metricName, m.value FROM GPU_METRICS m JOIN TARGET_INFO_GPU_METRICS n "
                      "USING (metricId) ORDER BY n.metricName, m.timestamp")
    assert [(s["ts"], s["metric"], s["value"]) for s in samples] == raw
    assert {s["device_id"] for s in samples} == {0}  # typeId 65536 & 0xFF


def test_analysis_summary_ranks_findings(fixture):
    _, ws, _ = fixture
    result = ws.analyze(min_gap_ns=1000, chunks=10)
    table = result.findings.to_pylist()
    ranked = [r for r in table if r["role"] == "finding"]
    assert [r["recoverable_ns"] for r in ranked] == sorted((r["recoverable_ns"] for r in ranked), reverse=True)
    gaps = next(r for r in table if r["rule"] == "gpu_gaps")
    assert gaps["findings"] == 12 and gaps["recoverable_ns"] == sum(
        g for ts, g in [(t, r["gap_ns"]) for t, r in ((r["ts"], r) for r in result.evidence["gpu_gaps"].to_pylist())]
        if ts != 48000)
    assert gaps["summary"] == "12 gaps, recoverable 25 us"
    assert gaps["breakdown"] == ("host: 5 gaps, 13.1 us; sync: 4 gaps, 6.35 us; launch: 1 gap, 4.6 us; "
                                 "gpu_wait: 1 gap, 1 us; profiler: 1 gap, 0 ns")
    assert gaps["thresholds"] == "min_gap_ns=1 us, per_stream=false"
    assert gaps["recoverable_pct"] == pytest.approx(100 * gaps["recoverable_ns"] / 50000)
    assert next(r for r in table if r["rule"] == "iterations")["role"] == "context"
    assert result.failed(["any"]) == sorted(result.failed(["any"]), key=list(result.rules).index)
    assert "sync_memset" in result.failed(["sync_memset"])


def run(*args, env=None, check=True):
    from ..util import cli

    proc = cli(*args, env=env)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_cli(fixture, tmp_path):
    _, _, db = fixture
    out = run("analyze", "--db", str(db), "--param", "min_gap_ns=1000", env={"COLUMNS": "80"})
    lines = out.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), max(lines, key=len)
    # the path follows (on the next line when 80 columns cannot hold it: a worker's tmp path is longer)
    assert lines[0].startswith("trace 1 (span 50 us):") and re.search(r"\n\d\. gpu_gaps: 12 gaps, recoverable 25 us", out.stdout)
    assert "iterations: 4 iterations" in out.stdout
    md = run("analyze", "--db", str(db), "--format", "markdown", "--rule", "gpu_gaps", "--limit", "2",
             "--param", "min_gap_ns=1000").stdout.splitlines()
    assert md[0] == f"## trace 1 (span 50 us): {fixture[0]}"
    assert "### 1. `gpu_gaps`: 12 gaps, recoverable 25 us (50.00% of the trace span)" in md
    head = md.index("| at | gap | cause | range path |")
    assert md[head + 2] == "| 35 us | 5.55 us | host | step 3 |"
    assert "10 more: `traceql analyze --rule gpu_gaps --format csv`" in md
    quiet = run("analyze", "--db", str(db), "--rule", "gpu_gaps").stdout  # default 1 ms: none of these
    assert "No findings: gpu_gaps (min_gap_ns=1 ms, per_stream=false)" in quiet
    csv = run("analyze", "--db", str(db), "--rule", "sync_memset", "--format", "csv").stdout.splitlines()
    assert csv[0].startswith("trace_id,mem_kind,bytes,call,ts") and len(csv) == 2
    doc = json.loads(run("analyze", "--db", str(db), "--format", "json").stdout)
    assert set(doc) == {"findings", "evidence"} and set(doc["evidence"]) == set(analyze_mod.rules())
    failed = run("analyze", "--db", str(db), "--rule", "sync_memset", "--fail-on", "sync_memset", check=False)
    assert failed.returncode == analyze_mod.FINDINGS_EXIT and "findings for sync_memset" in failed.stderr
    ok = run("analyze", "--db", str(db), "--rule", "sync_memset", "--fail-on", "sync_memset",
             "--param", "min_call_ns=1000000", check=False)
    assert ok.returncode == 0
    listed = run("analyze", "--list").stdout
    assert "--param min_gap_ns=...  " in listed and "[default: 1000000]" in listed
    bad = run("analyze", "--db", str(db), "--rule", "gpu_gap", check=False)
    assert bad.returncode == 2 and "did you mean gpu_gaps?" in bad.stderr
    bad = run("analyze", "--db", str(db), "--param", "min_gaps_ns=1", check=False)
    assert bad.returncode == 2 and "no rule run has this parameter" in bad.stderr
    bad = run("analyze", "--db", str(db), "--param", "per_stream=maybe", check=False)
    assert bad.returncode == 2 and "expected true or false" in bad.stderr


def test_every_rule_joins_in_linear_or_n_log_n_time(fixture):
    """EXPLAIN each rule as analyze runs it: hash joins on equality keys and ASOF joins only."""
    _, ws, _ = fixture
    for r in analyze_mod.rules().values():  # build what the rules read first: building the derived
        ws.ensure(r.query.sql)               # tables reopens the connection, which forgets a SET
    ws.execute("SET asof_loop_join_threshold = 0")
    problems = []
    try:
        for name, r in analyze_mod.rules().items():
            from traceql.query import library

            bound = library.bind(r.query, {})
            plan = ws.execute("EXPLAIN (FORMAT json) " + r.query.sql, bound).fetchall()
            ops = [op for _, p in plan for tree in json.loads(p) for op in _operators(tree)]
            assert any(n == "ASOF_JOIN" for n, _ in ops) or name in (
                "pageable_memcpy", "sync_memcpy", "sync_memset", "small_kernels", "iterations", "tensor_cores",
                "memory_peak"), name
            problems += [f"{name}: {b}" for b in _bad_joins(ops)]
    finally:
        ws.execute("RESET asof_loop_join_threshold")
    assert not problems, "\n".join(problems)
