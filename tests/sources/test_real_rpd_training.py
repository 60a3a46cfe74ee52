"""Cross-check traceql against rocmProfileData's compressed training-style trace, mytrace.rpd.gz of
../shared/traces/rpd-rocmprofiledata (third-party, not part of the repository): a vLLM run on one
MI300 GPU with HIP graphs (hipGraphLaunch runs 7,720 'Task' ops: the graphs' kernels).

The oracle is the workbook Raptor (rocmProfileData's analysis tool) computed from that trace,
oracle/mytrace.rpd.xlsx: its op_df sheet lists every GPU op but the host copies (id, GPU, queue,
start and end in ns from the trace's first call, kernel name, op type), its category_df sheet the
totals. The workbook is read here with zipfile and ElementTree (no spreadsheet library); the
trace's own tables with gzip and sqlite3."""

from __future__ import annotations

import gzip
import re
import shutil
import tempfile
import xml.etree.ElementTree as ET
import zipfile
from collections import Counter

import pytest

import traceql
from traceql.sources.detect import detect

from ..util import source_rows as src, trace_file

SHEET = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"


def xlsx_sheet(path, name: str) -> list[list]:
    """The rows of sheet NAME of an xlsx workbook as lists of cell values (inline strings as text,
    numbers as int or float, missing cells None)."""
    with zipfile.ZipFile(path) as z:
        book = ET.fromstring(z.read("xl/workbook.xml"))
        index = [s.get("name") for s in book.iter(SHEET + "sheet")].index(name) + 1
        root = ET.fromstring(z.read(f"xl/worksheets/sheet{index}.xml"))
    rows = []
    for r in root.iter(SHEET + "row"):
        cells = {}
        for c in r.findall(SHEET + "c"):
            col = 0
            for ch in re.match(r"[A-Z]+", c.get("r")).group():
                col = col * 26 + ord(ch) - 64
            if c.get("t") == "inlineStr":
                value = "".join(t.text or "" for t in c.iter(SHEET + "t"))
            else:
                v = c.find(SHEET + "v")
                value = None if v is None else v.text
                if value is not None and c.get("t") not in ("s", "str"):
                    value = float(value) if any(ch in value for ch in ".eE") else int(value)
            cells[col - 1] = value
        rows.append([cells.get(j) for j in range(max(cells) + 1)] if cells else [])
    return rows


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    path = trace_file("rpd-rocmprofiledata/mytrace.rpd.gz")
    folder = tmp_path_factory.mktemp("rpdgz")
    plain = folder / "mytrace.rpd"  # the oracle's own decompression, for sqlite3
    with gzip.open(path, "rb") as src, open(plain, "wb") as dst:
        shutil.copyfileobj(src, dst)
    temp = folder / "tmp"
    temp.mkdir()
    saved, tempfile.tempdir = tempfile.tempdir, str(temp)
    try:
        [res] = traceql.ingest([path], db=folder / "ws.duckdb")
    finally:
        tempfile.tempdir = saved
    w = traceql.open(folder / "ws.duckdb")
    yield path, plain, w, res.trace_id, temp
    w.close()


def op_df(path):
    rows = xlsx_sheet(path.parent / "oracle" / "mytrace.rpd.xlsx", "op_df")
    head = rows[0]
    return [dict(zip(head, r)) for r in rows[1:]]


def test_detected_compressed(trace):
    path, _, _, _, temp = trace
    det = detect(path)
    assert (det.source_format, det.layout, det.compressed, det.path) == ("rpd", "rpd/v2", True, path)
    assert list(temp.iterdir()) == []  # the decompressed copies are gone


def test_ops_equal_raptor_op_df(trace):
    """Every op of Raptor's op_df (all GPU ops but the host copies) is one traceql kernel or
    device-to-device copy: GPU, queue, start and end from the trace's first call, name, and op type
    (a 'Task' is a kernel that hipGraphLaunch ran); the host copies are the memcpy rows left."""
    path, plain, w, tid, _ = trace
    df = op_df(path)
    expected = Counter((r["gpuId"], r["queueId"], r["Start_ns"], r["End_ns"],
                        r["Kernel"] if r["opType"] in ("KernelExecution", "Task") else "", r["opType"]) for r in df)
    assert len(df) == 9752 and Counter(r["opType"] for r in df) == {
        "Task": 7720, "KernelExecution": 1228, "CopyDeviceToDevice": 804}
    got = Counter(tuple(r.values()) for r in w.sql(
        "SELECT k.device_id, k.context_id, k.ts - t.start_ts, k.ts + k.dur - t.start_ts, k.name, "
        "  CASE l.api_name WHEN 'hipGraphLaunch' THEN 'Task' ELSE 'KernelExecution' END "
        "FROM kernel k JOIN trace t USING (trace_id) "
        "LEFT JOIN launch l ON l.trace_id = k.trace_id AND l.op_id = k.kernel_id WHERE k.trace_id = ? "
        "UNION ALL "
        "SELECT m.device_id, m.context_id, m.ts - t.start_ts, m.ts + m.dur - t.start_ts, '', "
        "  'Copy' || replace(replace(m.copy_kind, '-', ''), 'to', 'To') "
        "FROM memcpy m JOIN trace t USING (trace_id) "
        "WHERE m.trace_id = ? AND m.copy_kind NOT IN ('Host-to-Device', 'Device-to-Host')",
        [tid, tid]).to_pylist())
    assert got == expected
    host = src(plain, "SELECT s.string, count(*) FROM rocpd_op o JOIN rocpd_string s ON s.id = o.opType_id "
                      "WHERE s.string IN ('CopyHostToDevice', 'CopyDeviceToHost') GROUP BY 1 ORDER BY 1")
    assert host == [("CopyDeviceToHost", 22), ("CopyHostToDevice", 350)]
    got = w.sql("SELECT copy_kind, count(*) FROM memcpy WHERE trace_id = ? "
                "AND copy_kind IN ('Host-to-Device', 'Device-to-Host') GROUP BY 1 ORDER BY 1", [tid]).to_pylist()
    assert [tuple(r.values()) for r in got] == [("Device-to-Host", 22), ("Host-to-Device", 350)]


def test_report_by_kernel_equals_op_df_totals(trace):
    """report --by kernel: calls and total ns of every kernel name equal op_df's, and the kernel and
    copy totals equal Raptor's category_df (which leaves out the first two ops: the kernel sequences
    it groups by start at the third)."""
    path, _, w, tid, _ = trace
    df = op_df(path)
    calls, total = Counter(), Counter()
    for r in df:
        if r["opType"] in ("KernelExecution", "Task"):
            calls[r["Kernel"]] += 1
            total[r["Kernel"]] += r["Duration_ns"]
    rep = w.report("kernel", trace_id=tid).to_pylist()
    assert {r["name"]: (r["calls"], r["total_ns"]) for r in rep} == {k: (calls[k], total[k]) for k in calls}
    assert sum(r["calls"] for r in rep) == 8948
    categories = xlsx_sheet(path.parent / "oracle" / "mytrace.rpd.xlsx", "category_df")[1:]
    work = [c for c in categories if c[0] != "_GPU_Idle"]
    ops = w.sql("SELECT count(*) AS n, sum(g.dur) AS ns FROM gpu_op g LEFT JOIN memcpy m "
                "ON m.trace_id = g.trace_id AND m.memcpy_id = g.op_id WHERE g.trace_id = ? "
                "AND coalesce(m.copy_kind, '') NOT IN ('Host-to-Device', 'Device-to-Host')", [tid]).to_pylist()[0]
    first_two = sorted(df, key=lambda r: r["Start_ns"])[:2]
    assert sum(c[2] for c in work) == ops["n"] - 2 == 9750
    assert sum(c[3] for c in work) == pytest.approx((ops["ns"] - sum(r["Duration_ns"] for r in first_two)) / 1e6,
                                                    abs=1e-6)


def test_every_op_has_its_call(trace):
    """Each kernel and copy with the HIP call that enqueued it (rocpd_api_ops, read with sqlite3):
    hipGraphLaunch for the graphs' kernels and copies."""
    _, plain, w, tid, _ = trace
    expected = Counter(src(plain, "SELECT o.start, a.string FROM rocpd_op o JOIN rocpd_api_ops ao ON ao.op_id = o.id "
                                  "JOIN rocpd_api c ON c.id = ao.api_id JOIN rocpd_string a ON a.id = c.apiName_id"))
    got = Counter(tuple(r.values()) for r in w.sql(
        "SELECT g.ts, l.api_name FROM gpu_op g JOIN launch l ON l.trace_id = g.trace_id AND l.op_id = g.op_id "
        "WHERE g.trace_id = ?", [tid]).to_pylist())
    assert got == expected and sum(got.values()) == 10124
    assert Counter(name for _, name in got.elements())["hipGraphLaunch"] == 8360


def test_what_is_not_read_is_counted(trace):
    """ingest_stats: the reader (sqlite3 on a decompressed copy) and the rows not read, counted as
    sqlite3 counts them."""
    _, plain, w, tid, _ = trace
    stats = {r["key"]: r for r in w.sql("SELECT key, value, detail FROM ingest_stats WHERE trace_id = ?",
                                        [tid]).to_pylist()}
    assert "decompressed copy of a gzip file" in stats["source.reader"]["detail"]
    for key, table in (("rpd.autograd_not_read", "ext_autogradapi"), ("rpd.monitor_not_read", "rocpd_monitor")):
        assert stats[key]["value"] == src(plain, f"SELECT count(*) FROM {table}")[0][0] > 0


def test_bad_gzip_is_one_line_error(tmp_path):
    """A truncated .rpd.gz: one line naming the file, nothing left in the workspace folder."""
    path = trace_file("rpd-rocmprofiledata/mytrace.rpd.gz")
    cut = tmp_path / "cut.rpd.gz"
    cut.write_bytes(path.read_bytes()[:600_000])
    with pytest.raises(traceql.InputError, match=r"cut\.rpd\.gz: damaged gzip data"):
        traceql.ingest([cut], db=tmp_path / "ws.duckdb")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cut.rpd.gz"]


def test_roctx_ranges_are_nvtx_ranges(trace):
    """rpd's 'UserMarker' rows (roctx ranges: vLLM's own and PyTorch's aten ops) are nvtx_range rows,
    not API calls: name, thread, start and length as sqlite3 reads them; report --by range counts
    each name's instances, and the kernels of 'execute_model' are those whose launching call lies
    inside one of its ranges (computed here from rocpd_api_ops)."""
    _, plain, w, tid, _ = trace
    marks = src(plain, "SELECT m.string, a.pid, a.tid, a.start, a.\"end\" - a.start FROM rocpd_api a "
                       "JOIN rocpd_string n ON n.id = a.apiName_id JOIN rocpd_string m ON m.id = a.args_id "
                       "WHERE n.string = 'UserMarker'")
    got = w.sql("SELECT name, pid, tid, ts, dur FROM nvtx_range WHERE trace_id = ?", [tid]).to_pylist()
    assert Counter(tuple(r.values()) for r in got) == Counter(marks) and len(marks) == 11884
    calls = Counter(n for n, in src(plain, "SELECT s.string FROM rocpd_api a JOIN rocpd_string s ON s.id = a.apiName_id "
                                         "WHERE s.string <> 'UserMarker'"))
    kinds = Counter()
    for name, n in calls.items():
        kinds["hip" if name.startswith(("hip", "__hip")) else "hsa" if name.startswith("hsa_") else "rpd"] += n
    got = w.sql("SELECT api_kind, count(*) AS n FROM api_call WHERE trace_id = ? GROUP BY 1", [tid]).to_pylist()
    assert {r["api_kind"]: r["n"] for r in got} == kinds and kinds["rpd"] == 22  # hcc_activity_callback, ApiTable::writeRows, ...
    rep = {r["name"]: r for r in w.report("range", trace_id=tid).to_pylist()}
    assert {k: r["instances"] for k, r in rep.items()} == Counter(name for name, *_ in marks)
    spans = sorted((s, s + d) for name, _, _, s, d in marks if name == "execute_model")
    launches = src(plain, "SELECT c.start FROM rocpd_op o JOIN rocpd_string t ON t.id = o.opType_id "
                          "JOIN rocpd_api_ops ao ON ao.op_id = o.id JOIN rocpd_api c ON c.id = ao.api_id "
                          "WHERE t.string IN ('KernelExecution', 'Task')")
    inside = sum(any(s <= ts <= e for s, e in spans) for ts, in launches)
    assert rep["execute_model"]["kernels"] == inside == 8838
