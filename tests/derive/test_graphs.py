"""CUDA graphs: graph ids on kernels, whole-graph executions (graph_exec), graph lifecycle events
(graph_event), and a cudaGraphLaunch counted once in `report --by launch`.

A hand-written export (fixtures/nsys_graphs.sql; its header comment draws the timeline) with
exactly known answers, worked out by hand in the comments below."""

import sqlite3

import duckdb
import pytest

import traceql
from traceql.sources.adapters import prepare
from traceql.sources.adapters import ADAPTER_FILES, adapter_sql, raw_ddl
from traceql.core.resources import contract_docs

from ..util import REPO, make_sqlite

FIXTURE_SQL = REPO / "fixtures" / "nsys_graphs.sql"


def build(path, *edits):
    con = sqlite3.connect(path)
    con.executescript(FIXTURE_SQL.read_text())
    for statement in edits:
        con.execute(statement)
    con.commit()
    con.close()
    return path


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("graphs")
    db = tmp / "ws.duckdb"
    traceql.ingest([build(tmp / "graphs.sqlite")], db=db)
    ws = traceql.open(db)
    yield ws
    ws.close()


def rows(ws, sql, params=None):
    return ws.sql(sql, params).to_pylist()


# api_call ids are numbered in start order: 0 corr 1 (1000), 1 BeginCapture (2000), 2-4 the
# captured cudaLaunchKernel calls (2200, 2400, 2600), 5 EndCapture (2800), 6 Instantiate (3000),
# 7 cudaGraphLaunch corr 8 of process 100 (4000), 8 cudaLaunchKernel corr 8 of process 200 (4050),
# 9 cudaGraphLaunch corr 9 (6000), 10 cudaGraphLaunch corr 10 (7000), 11 corr 11 (9000),
# 12 cudaStreamSynchronize (9400).

def test_kernels_carry_the_graph_ids_of_the_export(ws):
    # node-level kernels have KERNEL.graphId (schema 3.24) and graphNodeId; the others have
    # graphId 0 and graphNodeId NULL in the export: NULL both
    assert rows(ws, "SELECT kernel_id, pid, correlation_id, short_name, graph_id, graph_node_id "
                    "FROM kernel ORDER BY kernel_id") == [
        {"kernel_id": 0, "pid": 100, "correlation_id": 1, "short_name": "k_plain", "graph_id": None, "graph_node_id": None},
        {"kernel_id": 1, "pid": 200, "correlation_id": 8, "short_name": "k_plain", "graph_id": None, "graph_node_id": None},
        {"kernel_id": 2, "pid": 100, "correlation_id": 10, "short_name": "k_node_a", "graph_id": 1, "graph_node_id": 21},
        {"kernel_id": 3, "pid": 100, "correlation_id": 10, "short_name": "k_node_a", "graph_id": 1, "graph_node_id": 22},
        {"kernel_id": 4, "pid": 100, "correlation_id": 10, "short_name": "k_node_b", "graph_id": 1, "graph_node_id": 23},
        {"kernel_id": 5, "pid": 100, "correlation_id": 11, "short_name": "k_node_a", "graph_id": None, "graph_node_id": None},
    ]
    # the node kernels' launching call is the one cudaGraphLaunch (api 10, [7000,7300]); queue
    # delays per kernel from its end: 7500-7300, 7900-7300, 8200-7300
    assert rows(ws, "SELECT op_id, api_id, api_name, queue_delay FROM launch WHERE op_id IN (2, 3, 4) ORDER BY op_id") == [
        {"op_id": 2, "api_id": 10, "api_name": "cudaGraphLaunch", "queue_delay": 200},
        {"op_id": 3, "api_id": 10, "api_name": "cudaGraphLaunch", "queue_delay": 600},
        {"op_id": 4, "api_id": 10, "api_name": "cudaGraphLaunch", "queue_delay": 900},
    ]


def test_graph_exec_rows_with_their_launching_calls(ws):
    # GRAPH_TRACE [4500,5300] corr 8 and [6300,6900] corr 9 of process 100; queue delays
    # 4500 - 4200 and 6300 - 6100. Process 200's call with corr 8 (api 8) is not theirs.
    assert rows(ws, "SELECT * FROM graph_exec ORDER BY exec_row_id") == [
        {"trace_id": 1, "exec_row_id": 0, "device_id": 0, "context_id": 1, "stream_id": 7, "pid": 100,
         "correlation_id": 8, "ts": 4500, "dur": 800, "graph_id": 1, "graph_exec_id": 3, "api_id": 7,
         "api_name": "cudaGraphLaunch", "queue_delay": 300},
        {"trace_id": 1, "exec_row_id": 1, "device_id": 0, "context_id": 1, "stream_id": 7, "pid": 100,
         "correlation_id": 9, "ts": 6300, "dur": 600, "graph_id": 1, "graph_exec_id": 3, "api_id": 9,
         "api_name": "cudaGraphLaunch", "queue_delay": 200},
    ]
    # resolvable exactly as kernels are: same correlation id in the same process
    assert rows(ws, """
        SELECT g.exec_row_id, a.api_id, a.name, a.ts
        FROM graph_exec g JOIN api_call a USING (trace_id, pid, correlation_id) ORDER BY 1""") == [
        {"exec_row_id": 0, "api_id": 7, "name": "cudaGraphLaunch", "ts": 4000},
        {"exec_row_id": 1, "api_id": 9, "name": "cudaGraphLaunch", "ts": 6000},
    ]
    # the executable graph of the executions is the one instantiated from graph 1
    assert rows(ws, """
        SELECT DISTINCT e.graph_id, e.api_name FROM graph_exec x
        JOIN graph_event e ON e.trace_id = x.trace_id AND e.graph_exec_id = x.graph_exec_id
        WHERE e.kind = 'graph exec creation'""") == [{"graph_id": 1, "api_name": "cudaGraphInstantiate"}]


def test_graph_events_with_the_calls_they_happened_in(ws):
    got = rows(ws, "SELECT graph_event_id, pid, tid, ts, dur, kind, name, graph_id, original_graph_id, graph_exec_id, "
                   "graph_node_id, original_graph_node_id, api_id, api_name FROM graph_event ORDER BY graph_event_id")
    cols = ("graph_event_id", "ts", "kind", "name", "graph_id", "original_graph_id", "graph_exec_id",
            "graph_node_id", "original_graph_node_id", "api_id", "api_name")
    assert [tuple(r[c] for c in cols) for r in got] == [
        (0, 2050, "graph creation", "Graph Creation", 1, None, None, None, None, 1, "cudaStreamBeginCapture"),
        (1, 2250, "node creation", "Graph Node Creation", None, None, None, 11, None, 2, "cudaLaunchKernel"),
        (2, 2450, "node creation", "Graph Node Creation", None, None, None, 12, None, 3, "cudaLaunchKernel"),
        (3, 2650, "node creation", "Graph Node Creation", None, None, None, 13, None, 4, "cudaLaunchKernel"),
        (4, 3100, "graph creation", "Graph Creation", 2, None, None, None, None, 6, "cudaGraphInstantiate"),
        (5, 3150, "node creation", "Graph Node Creation", None, None, None, 21, 11, 6, "cudaGraphInstantiate"),
        (6, 3160, "node creation", "Graph Node Creation", None, None, None, 22, 12, 6, "cudaGraphInstantiate"),
        (7, 3170, "node creation", "Graph Node Creation", None, None, None, 23, 13, 6, "cudaGraphInstantiate"),
        (8, 3300, "graph exec creation", "GraphExec Creation", 1, None, 3, None, None, 6, "cudaGraphInstantiate"),
        # at 5500 the last call that started (cudaGraphLaunch corr 8, [4000,4200]) had ended: none
        (9, 5500, "graph clone", "Graph Clone", 4, 1, None, None, None, None, None),
    ]
    assert {(r["pid"], r["tid"], r["dur"]) for r in got} == {(100, 100, 0)}


def test_launch_report_counts_a_graph_launch_once(ws):
    got = {r["name"]: r for r in ws.report("launch").to_pylist()}
    assert list(got) == ["void k_node_a(float*)", "void k_node_b(float*)", "void k_plain(float*)"]
    # k_node_a: two nodes of the cudaGraphLaunch [7000,7300] and one ordinary launch [9000,9050].
    # The graph launch counts once: api_total 300 + 50 = 350 over 2 calls (not 300 + 300 + 50 = 650
    # over 3). Per execution: queue delays 200, 600, 50; kernels 300, 200, 200; launch to end
    # 7800-7000, 8100-7000, 9300-9000 = 800, 1100, 300.
    assert got["void k_node_a(float*)"] == {
        "name": "void k_node_a(float*)", "calls": 3, "launched": 3, "api_calls": 2, "api_total_ns": 350,
        "api_avg_ns": 175.0, "queued": 3, "queue_avg_ns": 283.3, "queue_med_ns": 200.0, "queue_min_ns": 50,
        "queue_max_ns": 600, "kernel_total_ns": 700, "kernel_pct": pytest.approx(100 * 700 / 1450),
        "kernel_avg_ns": 233.3, "total_avg_ns": 733.3, "api_names": "cudaGraphLaunch, cudaLaunchKernel"}
    # k_node_b: the third node of the same launch; that call counts in this row too (once)
    b = got["void k_node_b(float*)"]
    assert (b["calls"], b["api_calls"], b["api_total_ns"], b["api_avg_ns"], b["queue_avg_ns"], b["total_avg_ns"]) \
        == (1, 1, 300, 300.0, 900.0, 1600.0)
    # k_plain: two ordinary launches in two processes, 100 and 10 ns; queue 1200-1100 and 4100-4060
    p = got["void k_plain(float*)"]
    assert (p["calls"], p["launched"], p["api_calls"], p["api_total_ns"], p["api_avg_ns"], p["queue_avg_ns"]) \
        == (2, 2, 2, 110, 55.0, 70.0)
    # --where narrows the executions, and the calls with them
    [only] = ws.report("launch", where="graph_node_id IS NOT NULL AND short_name = 'k_node_a'").to_pylist()
    assert (only["calls"], only["api_calls"], only["api_total_ns"]) == (2, 1, 300)
    # per trace: the same rows
    per = ws.report("launch", per_trace=True).to_pylist()
    assert [(r["trace_id"], r["api_calls"], r["api_total_ns"]) for r in per] == [(1, 2, 350), (1, 1, 300), (1, 2, 110)]


def test_api_report_counts_each_call_once(ws):
    got = {r["name"]: (r["calls"], r["total_ns"]) for r in ws.report("api").to_pylist()}
    # three cudaGraphLaunch calls: 200 + 100 + 300, whatever they ran
    assert got["cudaGraphLaunch"] == (3, 600)
    # 1 + 3 captured + 1 + process 200's: 100 + 3 * 100 + 50 + 10
    assert got["cudaLaunchKernel"] == (6, 460)
    assert got["cudaGraphInstantiate"] == (1, 400)


def test_gpu_report_and_summary_show_whole_graph_executions(ws):
    got = ws.report("gpu").to_pylist()
    # kernels 700 + 400 + 350 = 1450, graph executions 800 + 600 = 1400: pct of 2850
    assert [(r["name"], r["category"], r["calls"], r["total_ns"], r["min_ns"], r["max_ns"]) for r in got] == [
        ("[CUDA graph 1]", "graph", 2, 1400, 600, 800),
        ("void k_node_a(float*)", "kernel", 3, 700, 200, 300),
        ("void k_node_b(float*)", "kernel", 1, 400, 400, 400),
        ("void k_plain(float*)", "kernel", 2, 350, 50, 300),
    ]
    assert got[0]["pct"] == pytest.approx(100 * 1400 / 2850)
    assert got[0]["avg_ns"] == 700.0 and got[0]["med_ns"] == 700.0
    # the rows stored at ingest and a recomputation agree
    assert ws.report("gpu", recompute=True).to_pylist() == got
    # --where filters graph executions like the other operations (gpu_op's columns)
    assert [(r["name"], r["calls"]) for r in ws.report("gpu", where="op_kind = 'graph' AND ts > 5000").to_pylist()] \
        == [("[CUDA graph 1]", 1)]
    summary = ws.summary().rows.to_pylist()
    assert ("GPU activities", "[CUDA graph 1]", 2, 1400) in [
        (r["section"], r["name"], r["calls"], r["total_ns"]) for r in summary]
    # the kernel report stays kernels only
    assert "[CUDA graph 1]" not in {r["name"] for r in ws.report("kernel").to_pylist()}


def test_ingest_stats_count_graph_executions(ws):
    got = {r["key"]: (r["value"], r["severity"]) for r in rows(ws, "SELECT key, value, severity FROM ingest_stats")}
    assert got["graph_exec.executions"] == (2, "info")
    assert got["graph_exec.gpu_ns"] == (1400, "info")
    assert "kernel.graph_id_unknown" not in got  # every node kernel has its graphId
    assert "launch.ops_without_launch" not in got


def test_node_kernels_without_graph_id_keep_it_null(tmp_path):
    """Before schema 3.24 KERNEL has graphNodeId only: CUDA_GRAPH_NODE_EVENTS names no graph
    (and CUDA_GRAPH_EVENTS no node), so graph_id stays NULL and the kernels are counted."""
    src = build(tmp_path / "old.sqlite", "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET graphId = NULL",
                "UPDATE META_DATA_EXPORT SET value = '3.16.1' WHERE name = 'EXPORT_SCHEMA_VERSION'")
    traceql.ingest([src], db=tmp_path / "ws.duckdb")
    with traceql.open(tmp_path / "ws.duckdb") as w:
        assert rows(w, "SELECT count(*) AS n, count(graph_node_id) AS nodes, count(graph_id) AS graphs FROM kernel") \
            == [{"n": 6, "nodes": 3, "graphs": 0}]
        assert rows(w, "SELECT value FROM ingest_stats WHERE key = 'kernel.graph_id_unknown'") == [{"value": 3}]


def test_schema_2_graph_events_have_the_node_layout(tmp_path):
    """2.9.1: CUDA_GRAPH_EVENTS has graphNodeId and originalGraphNodeId (no graph ids) and there is
    no CUDA_GRAPH_NODE_EVENTS: its rows are node events."""
    g = (1 << 48) | (100 << 24) | 100
    src = make_sqlite(tmp_path / "v2.sqlite", [
        "CREATE TABLE EXPORT_META_DATA (name TEXT NOT NULL, value TEXT)",
        "INSERT INTO EXPORT_META_DATA VALUES ('EXPORT_SCHEMA_VERSION', '2.9.1')",
        "CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL)",
        "INSERT INTO StringIds VALUES (1, 'cudaGraphAddKernelNode_v10000'), (2, 'Graph Node Creation')",
        "CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL, "
        "eventClass INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, "
        "returnValue INTEGER NOT NULL, callchainId INTEGER)",
        f"INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (100, 200, 0, {g}, 1, 1, 0, NULL)",
        "CREATE TABLE CUDA_GRAPH_EVENTS (start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL, "
        "globalTid INTEGER, nameId INTEGER NOT NULL, graphNodeId INTEGER NOT NULL, originalGraphNodeId INTEGER)",
        f"INSERT INTO CUDA_GRAPH_EVENTS VALUES (150, 150, 77, {g}, 2, 5, NULL), (300, 300, 77, {g}, 2, 6, 5)",
    ])
    [res] = traceql.ingest([src], db=tmp_path / "ws.duckdb")
    assert res.detected.layout == "nsys/v2"
    with traceql.open(tmp_path / "ws.duckdb") as w:
        assert rows(w, "SELECT ts, kind, graph_id, graph_node_id, original_graph_node_id, api_name "
                       "FROM graph_event ORDER BY ts") == [
            {"ts": 150, "kind": "node creation", "graph_id": None, "graph_node_id": 5, "original_graph_node_id": None,
             "api_name": "cudaGraphAddKernelNode"},
            {"ts": 300, "kind": "node creation", "graph_id": None, "graph_node_id": 6, "original_graph_node_id": 5,
             "api_name": None},
        ]
        assert rows(w, "SELECT count(*) AS n FROM graph_exec") == [{"n": 0}]


def test_nvprof_graph_ids_on_kernels_copies_and_memsets(tmp_path):
    """nvprof Version 16 records graphNodeId and graphId on kernels, copies and memsets (0 outside
    graphs); MEMCPY2 (peer-to-peer) has none."""
    src = tmp_path / "nvprof.sql"
    con = sqlite3.connect(src)
    con.executescript((REPO / "fixtures" / "nvprof_small.sql").read_text())
    con.execute("UPDATE Version SET version = 16")
    for table in ("CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL", "CUPTI_ACTIVITY_KIND_KERNEL",
                  "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
        con.execute(f"ALTER TABLE {table} ADD COLUMN graphNodeId INT NOT NULL DEFAULT 0")
        con.execute(f"ALTER TABLE {table} ADD COLUMN graphId INT NOT NULL DEFAULT 0")
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET graphNodeId = 41, graphId = 4")
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET graphNodeId = 42, graphId = 4")
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_MEMSET SET graphNodeId = 43, graphId = 4")
    con.commit()
    con.close()
    traceql.ingest([src], db=tmp_path / "ws.duckdb")
    with traceql.open(tmp_path / "ws.duckdb") as w:
        kernels = rows(w, "SELECT graph_id, graph_node_id, count(*) AS n FROM kernel GROUP BY ALL ORDER BY ALL")
        assert kernels[0] == {"graph_id": 4, "graph_node_id": 41, "n": 1}
        assert all(k["graph_id"] is None and k["graph_node_id"] is None for k in kernels[1:])
        assert rows(w, "SELECT copy_kind, graph_id, graph_node_id FROM memcpy ORDER BY ts") == [
            {"copy_kind": "Host-to-Device", "graph_id": 4, "graph_node_id": 42},
            {"copy_kind": "Peer-to-Peer", "graph_id": None, "graph_node_id": None},
        ]
        assert rows(w, "SELECT graph_id, graph_node_id FROM memset") == [{"graph_id": 4, "graph_node_id": 43}]


@pytest.mark.parametrize("layout", ("nsys/legacy", "nsys/v2", "nsys/v3", "nvprof/v12"))
def test_every_layout_produces_the_graph_columns(layout):
    con = duckdb.connect()
    con.execute("ATTACH ':memory:' AS raw")
    con.execute("USE raw")
    con.execute(raw_ddl(layout))
    con.execute("USE memory")
    prepare(con, layout)
    for name in ADAPTER_FILES:
        con.execute(adapter_sql(layout, name))
    derived = {"graph_exec": {"trace_id", "exec_row_id", "api_id", "api_name", "queue_delay"},
               "graph_event": {"trace_id", "graph_event_id", "api_id", "api_name"}}
    for table, added in derived.items():
        got = {r[0] for r in con.execute(f"DESCRIBE src_{table}").fetchall()} - {"src_row"}
        assert got == {c.name for c in contract_docs()[table].columns} - added, (layout, table)


def test_upgrading_a_workspace_made_before_graph_tables_fills_them(tmp_path):
    """A workspace of contract 1 had no graph tables: it is refused until `upgrade`, which reads
    the source again and fills them (tests/store/test_upgrade.py builds real contract-1 workspaces)."""
    db = tmp_path / "ws.duckdb"
    traceql.ingest([build(tmp_path / "graphs.sqlite")], db=db)
    con = duckdb.connect(str(db))
    for table in ("graph_exec", "graph_event", "workspace_version"):
        con.execute(f"DROP TABLE {table}")
    con.close()
    with pytest.raises(traceql.StaleWorkspaceError):
        traceql.open(db)
    traceql.upgrade(db)
    with traceql.open(db) as w:
        assert rows(w, "SELECT count(*) AS n FROM graph_exec") == [{"n": 2}]
        assert "[CUDA graph 1]" in {r["name"] for r in w.report("gpu", recompute=True).to_pylist()}


def test_graph_statements_join_linearly(tmp_path, monkeypatch):
    """The graph derivations are hash and ASOF joins (tests/query/test_join_plans.py's check, on this
    fixture, which has rows in every graph table)."""
    from importlib import import_module

    from ..query.test_join_plans import PlanRecorder, _bad_joins

    monkeypatch.setenv("TRACEQL_TIMING", "1")
    monkeypatch.setattr(import_module("traceql.store.transaction"), "_TimedConnection", PlanRecorder)
    monkeypatch.setattr(PlanRecorder, "seen", [])
    traceql.ingest([build(tmp_path / "graphs.sqlite")], db=tmp_path / "ws.duckdb")
    graph = [(text, ops) for text, ops in PlanRecorder.seen if text.startswith("INSERT INTO graph_")]
    assert [text.split()[2] for text, _ in graph] == ["graph_exec", "graph_event"]
    for text, ops in graph:
        assert not _bad_joins(ops), text
        assert "ASOF_JOIN" in [name for name, _ in ops], text
