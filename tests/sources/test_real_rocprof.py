"""Cross-check traceql against rocprof (v1) results.db files and rocprof's own summaries.

The results.db of ../shared/traces/rocprofv1-* (third-party files, not part of the repository) are
ingested once. Kernel, copy and HIP call rows are compared with sqlite3 over the file's tables,
and traceql's kernel, copy and API reports with the stats CSVs rocprof itself wrote beside the
database (oracle/results.stats.csv, copy_stats.csv, hip_stats.csv: rocprof's numbers, not traceql's).
"""

from __future__ import annotations

import csv
import sqlite3
from pathlib import Path

import pytest

import traceql
from traceql.sources.detect import detect

from ..util import NO_TRACES, TRACES

FILES = sorted(TRACES.glob("rocprofv1-*/results.db")) if TRACES.is_dir() else []
PARAMS = ([pytest.param(p, id=p.parent.name) for p in FILES]
          or [pytest.param(None, id="no-traces", marks=pytest.mark.skip(reason=NO_TRACES))])
COPY_KINDS = {"CopyHostToDevice": "Host-to-Device", "CopyDeviceToHost": "Device-to-Host"}


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    if not FILES:
        pytest.skip(NO_TRACES)
    db = tmp_path_factory.mktemp("rocprof") / "ws.duckdb"
    results = traceql.ingest(FILES, db=db)
    w = traceql.open(db)
    yield w, {r.path.parent.name: r.trace_id for r in results}
    w.close()


def vendor(path: Path, name: str) -> list[dict]:
    with open(path.parent / "oracle" / f"results.{name}.csv", newline="") as fh:
        return list(csv.DictReader(fh))


def src(path: Path, sql: str):
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


@pytest.mark.parametrize("path", PARAMS)
def test_detected(path):
    det = detect(path)
    assert (det.source_format, det.layout) == ("rocprof", "rocprof/v1")


@pytest.mark.parametrize("path", PARAMS)
def test_reports_equal_rocprof_stats(ws, path):
    w, ids = ws
    tid = ids[path.parent.name]
    kern = w.report("kernel", trace_id=tid).to_pylist()
    assert [(r["name"], r["calls"], r["total_ns"]) for r in kern] == \
        [(v["Name"], int(v["Calls"]), int(v["TotalDurationNs"])) for v in vendor(path, "stats")]
    copies = w.report("memcpy", trace_id=tid).to_pylist()
    assert [(r["kind"], r["calls"], r["total_ns"]) for r in copies] == \
        [(COPY_KINDS[v["Name"]], int(v["Calls"]), int(v["TotalDurationNs"])) for v in vendor(path, "copy_stats")]
    for r, v in zip(copies, vendor(path, "copy_stats")):
        assert r["pct"] == pytest.approx(float(v["Percentage"]), abs=0.01)
    api = w.report("api", trace_id=tid).to_pylist()
    assert [(r["name"], r["calls"], r["total_ns"]) for r in api] == \
        [(v["Name"], int(v["Calls"]), int(v["TotalDurationNs"])) for v in vendor(path, "hip_stats")]


@pytest.mark.parametrize("path", PARAMS)
def test_every_op_has_its_hip_call(ws, path):
    """Each kernel and copy with the HIP call of the same Index (rocprof's correlation id)."""
    w, ids = ws
    expected = sorted(src(path, 'SELECT o.BeginNs, h.Name, h.BeginNs FROM (SELECT BeginNs, "Index" FROM OPS '
                                'UNION ALL SELECT BeginNs, "Index" FROM COPY) o JOIN HIP h ON h."Index" = o."Index"'))
    n_ops = src(path, "SELECT (SELECT count(*) FROM OPS) + (SELECT count(*) FROM COPY)")[0][0]
    assert len(expected) == n_ops
    got = sorted(tuple(r.values()) for r in w.sql(
        "SELECT g.ts, l.api_name, l.api_ts FROM launch l JOIN gpu_op g ON g.trace_id = l.trace_id "
        "AND g.op_id = l.op_id WHERE l.trace_id = ?", [ids[path.parent.name]]).to_pylist())
    assert got == expected
    assert {name for _, name, _ in got} == {"hipLaunchKernel", "hipMemcpy"}


@pytest.mark.parametrize("path", PARAMS)
def test_the_json_beside_is_refused_naming_the_database(path, tmp_path):
    """rocprof v1 writes the same run as Chrome-trace JSON too (results.json). It was read as a
    PyTorch profiler trace with no events (every table empty, and a note asking whether CUDA
    activities were recorded); it is now refused, before anything is written, naming the
    results.db beside it. Gzipped and away from its database it is refused too."""
    import gzip
    import json

    from ..util import cli

    src = path.with_name("results.json")
    events = json.loads(src.read_text())["traceEvents"]
    assert sum(1 for e in events if e.get("ph") == "X") >= 15  # copies and HIP calls, none of them read before
    db = tmp_path / "ws.duckdb"
    proc = cli("--db", str(db), "ingest", str(src))
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.strip() == (f"traceql: error: {src}: a rocprof v1 trace in Chrome-trace JSON (results.json "
                                   f"of rocprof --hip-trace/--hsa-trace), which traceql does not read: its results.db "
                                   f"({path}) holds the same records: ingest that")
    assert not db.exists()
    alone = tmp_path / "trace.json.gz"
    alone.write_bytes(gzip.compress(src.read_bytes()))
    with pytest.raises(traceql.InputError, match="ingest the results.db rocprof writes beside it"):
        detect(alone)
    # a PyTorch profiler trace with a process named COPY is no rocprof trace (one mark is not enough)
    kineto = tmp_path / "kineto.json"
    kineto.write_text(json.dumps({"traceEvents": [
        {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "COPY"}},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 2, "args": {"device": 0}}]}))
    assert detect(kineto).source_format == "kineto"
