"""Synchronizations on real AMD traces: sync_event rows and analyze's sync_calls rule.

AMD's tracers record no synchronization activity of their own (CUPTI's): each synchronizing HIP
call (hipDeviceSynchronize, hipStreamSynchronize, hipEventSynchronize, ...) is one sync_event,
timed as the call (schemas/include/hip_sync_event.sql). Expected rows are read here with
Python's sqlite3 straight from the files (rocpd's guid-suffixed tables, rocprof v1's HIP table);
the files are third-party, in ../shared/traces, never copied into the repository.
"""

from __future__ import annotations

import sqlite3

import pytest

import traceql

from ..util import NO_TRACES, TRACES, cli

ROCPD = [TRACES / "rocpd-mi300x-batched-gemm-rocprofv3" / f"{n}_results.db" for n in (21, 28)]
ROCPROF = TRACES / "rocprofv1-hip-programming-mi300a" / "results.db"
FILES = ROCPD + [ROCPROF]
SYNC = ("hipDeviceSynchronize", "hipCtxSynchronize", "hipStreamSynchronize", "hipEventSynchronize")
KIND = {"hipDeviceSynchronize": "device", "hipCtxSynchronize": "device", "hipStreamSynchronize": "stream",
        "hipEventSynchronize": "event"}


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    if not all(p.exists() for p in FILES):
        pytest.skip(NO_TRACES)
    db = tmp_path_factory.mktemp("amd_sync") / "ws.duckdb"
    results = traceql.ingest(FILES, db=db)
    w = traceql.open(db)
    yield w, {r.path: r.trace_id for r in results}, db
    w.close()


def rocpd_calls(path) -> list[tuple]:
    """(name, ts, dur) of the synchronizing HIP calls of a rocpd database, with sqlite3."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    [(guid,)] = con.execute("SELECT substr(name, length('rocpd_string_') + 1) FROM sqlite_master "
                            "WHERE type = 'table' AND name LIKE 'rocpd_string_%'").fetchall()
    marks = ", ".join("?" * len(SYNC))
    return sorted(con.execute(
        f'SELECT s.string, r.start, r."end" - r.start FROM rocpd_region_{guid} r '
        f"JOIN rocpd_string_{guid} s ON s.id = r.name_id WHERE s.string IN ({marks})", SYNC).fetchall())


def rocprof_calls(path) -> list[tuple]:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    marks = ", ".join("?" * len(SYNC))
    return sorted(con.execute(f"SELECT Name, BeginNs, EndNs - BeginNs FROM HIP WHERE Name IN ({marks})",
                              SYNC).fetchall())


def expected(path) -> list[tuple]:
    return rocprof_calls(path) if path == ROCPROF else rocpd_calls(path)


@pytest.mark.parametrize("index", range(len(FILES)), ids=[f"{p.parent.name}/{p.name}" for p in FILES])
def test_sync_events_are_the_hip_sync_calls(ws, index):
    """One sync_event per synchronizing HIP call, with the call's name, time, kind and api_id."""
    w, ids, db = ws
    path = FILES[index]
    want = expected(path)
    assert want, "each of these files holds synchronizing HIP calls"
    got = sorted(tuple(r.values()) for r in w.sql(
        "SELECT s.api_name, s.ts, s.dur FROM sync_event s JOIN api_call a "
        "ON a.trace_id = s.trace_id AND a.api_id = s.api_id AND a.ts = s.ts AND a.name = s.api_name "
        "WHERE s.trace_id = ? AND s.kind IN ('device', 'stream', 'event')", [ids[path]]).to_pylist())
    assert got == want
    kinds = w.sql("SELECT api_name, kind FROM sync_event WHERE trace_id = ?", [ids[path]]).to_pylist()
    assert all(KIND[r["api_name"]] == r["kind"] for r in kinds)


def test_sync_calls_rule_sees_them(ws):
    """analyze's sync_calls: every synchronizing call, waiting its whole duration, on the GPU the
    process used (the calls name none)."""
    w, ids, db = ws
    rows = w.analyze(["sync_calls"], min_wait_ns=0).evidence["sync_calls"].to_pylist()
    for path in FILES:
        mine = [r for r in rows if r["trace_id"] == ids[path] and r["kind"] != "copy"]
        assert sorted((r["call"], r["ts"], r["wait_ns"]) for r in mine) == expected(path)
        gpus = {r["device_id"] for r in w.sql("SELECT DISTINCT device_id FROM gpu_op WHERE trace_id = ?",
                                              [ids[path]]).to_pylist()}
        assert {r["device_id"] for r in mine} <= gpus and None not in {r["device_id"] for r in mine}
    # rocprof v1's synchronous hipMemcpy to the host is a host read: the call waited for the GPU
    reads = [r for r in rows if r["trace_id"] == ids[ROCPROF] and r["kind"] == "copy"]
    assert [r["call"] for r in reads] == ["hipMemcpy"]


def test_summary_says_hip_api_calls(ws, tmp_path):
    """The summary's API section names HIP calls on AMD traces, at 80 columns, end to end; a
    workspace mixing AMD and NVIDIA traces says 'API calls'."""
    from traceql.sources.vendor import api_words

    w, ids, db = ws
    run = cli("--db", db, "summary", "--trace", str(ids[ROCPROF]), env={"COLUMNS": "80"})
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert "API calls (Time(%) = share of the summed time of all HIP API calls, not of wall" in lines
    assert "CUDA API" not in run.stdout and max(len(ln) for ln in lines) <= 80
    assert "hipDeviceSynchronize" in run.stdout
    assert api_words(["HIP", "HIP"]) == "HIP API calls"
    assert api_words(["CUDA", "CUDA"]) == "CUDA API calls"
    assert api_words(["HIP", "CUDA"]) == "API calls"
