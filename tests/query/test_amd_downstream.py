"""Everything downstream of ingest works on AMD traces as on NVIDIA's: every report, analyze,
diff, the Perfetto timeline and the Parquet export, on the real rocprofv3 databases (21_results.db,
28_results.db), a rocprof v1 results.db and a rocmProfileData .rpd (third-party files in
../shared/traces). Counts and sums are compared with sqlite3 over the files' own tables."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

import traceql
from traceql.query.registry import REPORTS

from ..util import NO_TRACES, TRACES, source_rows

ROCPD = [TRACES / "rocpd-mi300x-batched-gemm-rocprofv3" / f"{n}_results.db" for n in (21, 28)]
ROCPROF = TRACES / "rocprofv1-hip-programming-mi300a" / "results.db"
RPD = TRACES / "rpd-rocmprofiledata" / "matmul_result.rpd"
FILES = ROCPD + [ROCPROF, RPD]


def guid_table(path, name: str) -> str:
    [(table,)] = source_rows(path, "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE ? ESCAPE '\\'",
                             f"rocpd\\_{name}\\_%")
    return table


def gpu_ops(path) -> tuple[int, int]:
    """(GPU operations, their summed ns) of a file: kernels and copies, read with sqlite3."""
    if path in ROCPD:
        n = [source_rows(path, f'SELECT count(*), sum("end" - start) FROM "{guid_table(path, t)}"')[0]
             for t in ("kernel_dispatch", "memory_copy")]
    elif path == ROCPROF:
        n = [source_rows(path, f"SELECT count(*), sum(EndNs - BeginNs) FROM {t}")[0] for t in ("OPS", "COPY")]
    else:
        n = [source_rows(path, 'SELECT count(*), sum(o."end" - o.start) FROM rocpd_op o JOIN rocpd_string s '
                               "ON s.id = o.opType_id WHERE s.string = 'KernelExecution' OR s.string LIKE 'Copy%'")[0]]
    return sum(c for c, _ in n), sum(s or 0 for _, s in n)


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    if not all(p.exists() for p in FILES):
        pytest.skip(NO_TRACES)
    folder = tmp_path_factory.mktemp("amd_downstream")
    results = traceql.ingest(FILES, db=folder / "ws.duckdb")
    w = traceql.open(folder / "ws.duckdb")
    yield w, {r.path: r.trace_id for r in results}, folder
    w.close()


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_report_runs(ws, path):
    """Each report of the registry answers on each AMD trace; the GPU reports hold every kernel and
    copy of the file, with its summed time."""
    w, ids, _ = ws
    tid = ids[path]
    ops, ns = gpu_ops(path)
    for name in REPORTS:
        w.report(name, trace_id=tid)  # raises on any failure
    trace = w.report("gpu-trace", trace_id=tid).to_pylist()
    assert len(trace) == ops
    gpu = w.report("gpu", trace_id=tid).to_pylist()
    assert (sum(r["calls"] for r in gpu), sum(r["total_ns"] for r in gpu)) == (ops, ns)
    device = w.report("device", trace_id=tid).to_pylist()
    assert sum(r["calls"] for r in device) == ops


def test_analyze_runs(ws):
    """analyze runs every rule on each AMD trace: one findings row per rule, of that trace, over the
    trace's span."""
    w, ids, _ = ws
    for tid in ids.values():
        a = w.analyze(trace_id=tid)
        found = a.findings.to_pylist()
        [(span,)] = [tuple(r.values()) for r in w.sql("SELECT duration FROM trace WHERE trace_id = ?", [tid]).to_pylist()]
        assert sorted(r["rule"] for r in found) == sorted(a.rules)
        assert {(r["trace_id"], r["span_ns"]) for r in found} == {(tid, span)}


def test_diff_of_two_rocpd_databases(ws):
    """diff 21_results.db 28_results.db: the GPU operations total counts each side's kernels as
    sqlite3 does."""
    w, ids, folder = ws
    d = traceql.diff(ids[ROCPD[0]], ids[ROCPD[1]], db=folder / "ws.duckdb", per_iteration=False)
    rows = {(r["section"], r["key"]): r for r in d.rows.to_pylist()}
    kernels = {r["key"]: r for r in d.rows.to_pylist() if r["section"] == "kernel"}
    assert sum(r["calls_a"] or 0 for r in kernels.values()) == gpu_ops(ROCPD[0])[0]
    assert sum(r["calls_b"] or 0 for r in kernels.values()) == gpu_ops(ROCPD[1])[0]
    assert rows and d.verdict


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_timeline_and_parquet(ws, tmp_path, path):
    """The Perfetto export draws each GPU operation once; the Parquet export's kernel and memcpy
    files hold the file's operations."""
    w, ids, _ = ws
    tid = ids[path]
    ops, _ = gpu_ops(path)
    out = tmp_path / "t.json"
    w.export_perfetto(out, trace_id=tid)
    events = json.loads(out.read_text())["traceEvents"]
    assert sum(1 for e in events if e.get("ph") == "X" and e.get("cat") in ("kernel", "memcpy", "memset")) == ops
    w.export(tmp_path / "pq", trace_id=tid)
    n = sum(pq.read_table(f).num_rows for view in ("kernel", "memcpy")
            for f in (tmp_path / "pq").rglob(f"{view}.parquet"))
    assert n == ops
