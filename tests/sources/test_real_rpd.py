"""Cross-check traceql against a real rocmProfileData (rpd_tracer) trace: matmul_result.rpd of
../shared/traces/rpd-rocmprofiledata (third-party, not part of the repository). Kernels, copies and
their launching calls are compared with sqlite3 over the file's tables, and every GPU operation with
the rpd2tracing JSON conversion that ships beside it (oracle/matmul_result.json: rocmProfileData's
own converter, microseconds truncated)."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter

import pytest

import traceql
from traceql.sources.detect import detect

from ..util import trace_file


@pytest.fixture(scope="module")
def rpd(tmp_path_factory):
    path = trace_file("rpd-rocmprofiledata/matmul_result.rpd")
    db = tmp_path_factory.mktemp("rpd") / "ws.duckdb"
    [res] = traceql.ingest([path], db=db)
    w = traceql.open(db)
    yield path, w, res.trace_id
    w.close()


def src(path, sql):
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_detected(rpd):
    path, _, _ = rpd
    assert (detect(path).source_format, detect(path).layout) == ("rpd", "rpd/v2")


def test_kernels_and_copies_equal_source(rpd):
    path, w, tid = rpd
    kernels = sorted(src(path, 'SELECT d.string, o.start, o."end" - o.start, o.gpuId, k.gridX, k.workgroupX, a.string '
                               "FROM rocpd_op o JOIN rocpd_string t ON t.id = o.opType_id "
                               "JOIN rocpd_string d ON d.id = o.description_id "
                               "JOIN rocpd_api_ops ao ON ao.op_id = o.id JOIN rocpd_api c ON c.id = ao.api_id "
                               "JOIN rocpd_string a ON a.id = c.apiName_id "
                               "LEFT JOIN rocpd_kernelapi k ON k.api_ptr_id = ao.api_id "
                               "WHERE t.string = 'KernelExecution'"))
    got = sorted(tuple(r.values()) for r in w.sql(
        "SELECT k.name, k.ts, k.dur, k.device_id, k.grid_x, k.block_x, l.api_name FROM kernel k "
        "JOIN launch l ON l.trace_id = k.trace_id AND l.op_id = k.kernel_id WHERE k.trace_id = ?", [tid]).to_pylist())
    assert len(got) == len(kernels) == 29
    assert got == kernels
    copies = sorted(src(path, 'SELECT o.start, o."end" - o.start, c.size FROM rocpd_op o '
                              "JOIN rocpd_string t ON t.id = o.opType_id JOIN rocpd_api_ops ao ON ao.op_id = o.id "
                              "JOIN rocpd_copyapi c ON c.api_ptr_id = ao.api_id WHERE t.string LIKE 'Copy%'"))
    got = sorted(tuple(r.values()) for r in w.sql(
        "SELECT ts, dur, bytes FROM memcpy WHERE trace_id = ?", [tid]).to_pylist())
    assert got == copies and len(got) == 55


def test_gpu_ops_equal_rpd2tracing_json(rpd):
    """Every kernel and copy is a GPU event of the converter's JSON (name, start and duration in
    truncated microseconds); the one JSON GPU event left over is the FillBuffer op traceql does not
    read (counted in ingest_stats)."""
    path, w, tid = rpd
    doc = json.loads((path.parent / "oracle" / "matmul_result.json").read_text())
    gpu = Counter((e["name"], int(e["ts"]), int(e["dur"])) for e in (doc["traceEvents"] if isinstance(doc, dict) else doc)
                  if isinstance(e, dict) and e.get("ph") == "X" and e.get("pid") == "2")
    ours = Counter(tuple(r.values()) for r in w.sql(
        "SELECT CASE WHEN g.op_kind = 'kernel' THEN g.name ELSE "
        "  CASE m.copy_kind WHEN 'Host-to-Device' THEN 'CopyHostToDevice' ELSE 'CopyDeviceToHost' END END, "
        "g.ts // 1000, g.dur // 1000 FROM gpu_op g LEFT JOIN memcpy m ON m.trace_id = g.trace_id AND m.memcpy_id = g.op_id "
        "WHERE g.trace_id = ?", [tid]).to_pylist())
    assert sum(ours.values()) == 84
    left = gpu - ours
    assert not (ours - gpu)
    assert [name for name, _, _ in left.elements()] == ["FillBuffer"]
    stats = dict(tuple(r.values()) for r in w.sql(
        "SELECT key, value FROM ingest_stats WHERE trace_id = ? AND key LIKE 'rpd.%'", [tid]).to_pylist())
    monitor = src(path, "SELECT count(*) FROM rocpd_monitor")[0][0]
    assert stats == {"rpd.ops_not_read.FillBuffer": 1, "rpd.monitor_not_read": monitor} and monitor == 15
