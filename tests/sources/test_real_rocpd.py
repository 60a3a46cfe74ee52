"""Cross-check traceql against independent computations on the real rocprofv3 (rocpd) databases.

The two rocpd databases of ../shared/traces/rocpd-mi300x-batched-gemm-rocprofv3 (third-party files,
not part of the repository) are ingested once. Kernel counts, times, names, sizes and their HIP
launches are compared with figures computed here with Python's sqlite3 straight from the file's
guid-suffixed TABLES (never rocprofv3's views), and `report --by kernel` with the vendor's own
top_kernels view as dumped in oracle/ (a CSV written by rocprofv3's SQL, not traceql's).
"""

from __future__ import annotations

import csv
import sqlite3
from pathlib import Path

import pytest

import traceql
from traceql.sources.detect import detect

from ..util import NO_TRACES, TRACES

FOLDER = TRACES / "rocpd-mi300x-batched-gemm-rocprofv3"
FILES = sorted(FOLDER.glob("*_results.db")) if FOLDER.is_dir() else []
PARAMS = ([pytest.param(p, id=p.name) for p in FILES]
          or [pytest.param(None, id="no-traces", marks=pytest.mark.skip(reason=NO_TRACES))])


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    if not FILES:
        pytest.skip(NO_TRACES)
    db = tmp_path_factory.mktemp("rocpd") / "ws.duckdb"
    results = traceql.ingest(FILES, db=db)
    w = traceql.open(db)
    yield w, {r.path.name: r.trace_id for r in results}
    w.close()


class Source:
    """The file read with sqlite3: table names resolved to their rocpd_<name>_<guid> form."""

    def __init__(self, path: Path):
        self.con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        [(guid,)] = self.con.execute(
            "SELECT substr(name, length('rocpd_string_') + 1) FROM sqlite_master "
            "WHERE type = 'table' AND name LIKE 'rocpd_string_%'").fetchall()
        self.guid = guid

    def t(self, name: str) -> str:
        return f"rocpd_{name}_{self.guid}"

    def all(self, sql: str):
        return self.con.execute(sql).fetchall()


def test_detects_rocpd_tables():
    if not FILES:
        pytest.skip(NO_TRACES)
    for path in FILES:
        det = detect(path)
        assert (det.source_format, det.layout, det.schema_version) == ("rocpd", "rocpd/v3", "3")
        # staged under the plain name, read from the guid-suffixed table (not rocprofv3's view)
        assert det.source_names["rocpd_kernel_dispatch"].startswith("rocpd_kernel_dispatch_")
        assert det.source_names["rocpd_kernel_dispatch"] != "rocpd_kernel_dispatch"


@pytest.mark.parametrize("path", PARAMS)
def test_kernels_equal_source_tables(ws, path):
    w, ids = ws
    src = Source(path)
    expected = sorted(src.all(
        f"SELECT s.display_name, k.start, k.\"end\" - k.start, k.grid_size_x, k.grid_size_y, k.grid_size_z, "
        f"k.workgroup_size_x, k.workgroup_size_y, k.workgroup_size_z, k.group_segment_size, "
        f"k.private_segment_size, s.arch_vgpr_count, a.type_index, p.pid "
        f"FROM {src.t('kernel_dispatch')} k JOIN {src.t('info_kernel_symbol')} s ON s.id = k.kernel_id "
        f"JOIN {src.t('info_agent')} a ON a.id = k.agent_id JOIN {src.t('info_thread')} t ON t.id = k.tid "
        f"JOIN {src.t('info_process')} p ON p.id = t.pid"))
    got = sorted(tuple(r.values()) for r in w.sql(
        "SELECT name, ts, dur, grid_x, grid_y, grid_z, block_x, block_y, block_z, static_shared_memory, "
        "local_memory_per_thread, registers_per_thread, device_id, pid FROM kernel WHERE trace_id = ?",
        [ids[path.name]]).to_pylist())
    assert len(got) == len(expected) > 100
    assert got == expected


@pytest.mark.parametrize("path", PARAMS)
def test_report_by_kernel_equals_vendor_top_kernels(ws, path):
    """traceql's kernel report row for row against rocprofv3's top_kernels (oracle CSV: total and
    average in microseconds, percentage of the summed kernel time)."""
    w, ids = ws
    with open(FOLDER / "oracle" / f"{path.stem}.view_top_kernels.csv", newline="") as fh:
        vendor = list(csv.DictReader(fh))
    rep = w.report("kernel", trace_id=ids[path.name]).to_pylist()
    assert [r["name"] for r in rep] == [v["name"] for v in vendor]
    for r, v in zip(rep, vendor):
        assert r["calls"] == int(v["total_calls"])
        assert r["total_ns"] == round(float(v["total_duration"]) * 1000)
        assert r["pct"] == pytest.approx(float(v["percentage"]), abs=0.01)


@pytest.mark.parametrize("path", PARAMS)
def test_every_kernel_has_its_hip_launch(ws, path):
    """Each kernel's launching HIP call: the region whose event shares the dispatch event's stack_id
    (computed here with sqlite3), named and timed as the file records it."""
    w, ids = ws
    src = Source(path)
    expected = sorted(src.all(
        f"SELECT k.start, n.string, r.start FROM {src.t('kernel_dispatch')} k "
        f"JOIN {src.t('event')} ke ON ke.id = k.event_id "
        f"JOIN {src.t('event')} re ON re.stack_id = ke.stack_id AND re.id <> ke.id "
        f"JOIN {src.t('region')} r ON r.event_id = re.id JOIN {src.t('string')} n ON n.id = r.name_id"))
    n_kernels = src.all(f"SELECT count(*) FROM {src.t('kernel_dispatch')}")[0][0]
    assert len(expected) == n_kernels
    got = sorted(tuple(r.values()) for r in w.sql(
        "SELECT k.ts, l.api_name, l.api_ts FROM launch l "
        "JOIN kernel k ON k.trace_id = l.trace_id AND k.kernel_id = l.op_id AND l.op_kind = 'kernel' "
        "WHERE l.trace_id = ?",
        [ids[path.name]]).to_pylist())
    assert got == expected
    assert {name for _, name, _ in got} <= {"hipLaunchKernel", "hipMemset"}


@pytest.mark.parametrize("path", PARAMS)
def test_api_calls_threads_devices(ws, path):
    w, ids = ws
    tid = ids[path.name]
    src = Source(path)
    hip = src.all(
        f"SELECT count(*), sum(r.\"end\" - r.start) FROM {src.t('region')} r JOIN {src.t('event')} e ON e.id = r.event_id "
        f"JOIN {src.t('string')} c ON c.id = e.category_id WHERE c.string LIKE 'HIP%'")[0]
    assert tuple(w.sql("SELECT count(*), sum(dur) FROM api_call WHERE trace_id = ?", [tid]).to_pylist()[0].values()) \
        == hip
    threads = sorted(src.all(f"SELECT p.pid, t.tid FROM {src.t('info_thread')} t "
                             f"JOIN {src.t('info_process')} p ON p.id = t.pid"))
    assert sorted(tuple(r.values()) for r in w.sql(
        "SELECT pid, tid FROM thread WHERE trace_id = ?", [tid]).to_pylist()) == threads
    gpus = src.all(f"SELECT type_index, product_name FROM {src.t('info_agent')} WHERE type = 'GPU' ORDER BY 1")
    dev = w.sql("SELECT device_id, name, sm_count, total_memory FROM device WHERE trace_id = ? ORDER BY 1",
                [tid]).to_pylist()
    assert [(d["device_id"], d["name"]) for d in dev] == gpus
    assert {d["sm_count"] for d in dev} == {304}                 # MI300X: 304 compute units
    assert {d["total_memory"] for d in dev} == {206141652992}    # 192 GiB HBM3 as HSA reports it
