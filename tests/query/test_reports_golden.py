"""The report library on a generated fixture: golden outputs for every report and output
format family (UPDATE_GOLDEN=1 rewrites them), facts the generator knows, and the shared
options (--where, --sort, --limit, -c, --per-trace, --unit) through the library API."""

from __future__ import annotations

import io
import json

import pyarrow.parquet as pq
import pytest

import traceql
from fixtures.gen_nsys import generate
from traceql.query import library
from traceql.cli.output import emit
from traceql.core.errors import UsageError
from traceql.outputs.summary_text import render_summary
from traceql.query.reports import REPORTS, report_columns, report_query

from ..project.test_fixtures_ingest import check_golden


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("reports_golden")
    expected = generate(tmp / "small.sqlite", layout="3", kernels=40, seed=0)
    traceql.ingest([tmp / "small.sqlite"], db=tmp / "ws.duckdb")
    ws = traceql.open(tmp / "ws.duckdb")
    yield ws, expected, tmp
    ws.close()


def emitted(table, fmt, tmp, unit=None, labels=None) -> str:
    """What `traceql report --format FMT -o FILE` writes."""
    out = tmp / f"out.{fmt}"
    emit(table, fmt, out, unit=unit, labels=labels)
    return out.read_text()


def summary_text(ws, tmp, fmt, **kw) -> str:
    buf = io.StringIO()
    render_summary(ws.summary(), fmt, buf, **kw)
    # the fixture's path is a temporary directory: name it by its file name only
    return buf.getvalue().replace(str(tmp / "small.sqlite"), "small.sqlite")


# ------------------------------------------------------------------------------ goldens

@pytest.mark.parametrize("by", list(REPORTS))
def test_golden_csv_every_report(small, by):
    ws, _, tmp = small
    check_golden(f"report_{by}.csv", emitted(ws.report(by), "csv", tmp))


@pytest.mark.parametrize("name, by, params, fmt", [
    ("kernel_dims_per_trace", "kernel", {"with_dims": True, "per_trace": True}, "csv"),
    ("kernel", "kernel", {}, "table"),
    ("kernel_us", "kernel", {"unit": "us"}, "table"),
    ("kernel", "kernel", {}, "json"),
    ("kernel", "kernel", {}, "markdown"),
    ("kernel", "kernel", {}, "tsv"),
    ("memcpy", "memcpy", {}, "table"),
    ("memcpy", "memcpy", {}, "json"),
    ("api", "api", {}, "markdown"),
    ("device", "device", {}, "table"),
    ("launch_ms", "launch", {"unit": "ms"}, "markdown"),
    ("stream", "stream", {}, "json"),
    ("thread", "thread", {}, "table"),
    ("range", "range", {}, "table"),
])
def test_golden_formats(small, name, by, params, fmt):
    ws, _, tmp = small
    unit = params.pop("unit", None)
    table = ws.report(by, **params)
    ext = {"table": "txt", "markdown": "md"}.get(fmt, fmt)
    check_golden(f"report_{name}.{ext}", emitted(table, fmt, tmp, unit=unit, labels=report_query(by).labels))


@pytest.mark.parametrize("fmt, kw, ext", [
    ("table", {}, "txt"), ("table", {"unit": "us"}, "us.txt"), ("csv", {}, "csv"), ("json", {}, "json"),
    ("markdown", {}, "md"),
])
def test_golden_summary(small, fmt, kw, ext):
    ws, _, tmp = small
    check_golden(f"summary.{ext}", summary_text(ws, tmp, fmt, **kw))


# ---------------------------------------------------------------- facts from the generator

def test_reports_agree_with_the_generator(small):
    ws, exp, _ = small
    kernels = {r["name"]: r for r in ws.report("kernel").to_pylist()}
    assert {n: r["calls"] for n, r in kernels.items()} == exp["kernel_count_by_name"]
    assert {n: r["total_ns"] for n, r in kernels.items()} == exp["kernel_dur_by_name"]
    api = {r["name"]: r["calls"] for r in ws.report("api").to_pylist()}
    assert api == {n.rsplit("_v", 1)[0]: c for n, c in exp["api_count_by_name"].items()}
    memcpy = {r["kind"]: r for r in ws.report("memcpy").to_pylist()}
    assert memcpy["Host-to-Device"]["calls"] == exp["memcpy_htod"]
    assert memcpy["Device-to-Host"]["calls"] == exp["memcpy_dtoh"]
    assert sum(r["total_bytes"] for r in memcpy.values()) == exp["memcpy_bytes_sum"]
    assert sum(r["total_ns"] for r in memcpy.values()) == exp["memcpy_dur_sum"]
    [memset] = ws.report("memset").to_pylist()
    assert (memset["calls"], memset["total_ns"], memset["total_bytes"]) == \
        (exp["memset"], exp["memset_dur_sum"], exp["memset_bytes_sum"])
    gpu = ws.report("gpu")
    assert sum(gpu.column("total_ns").to_pylist()) == \
        exp["kernel_dur_sum"] + exp["memcpy_dur_sum"] + exp["memset_dur_sum"]
    devices = ws.report("device").to_pylist()
    assert [d["device_id"] for d in devices] == [0, 1]
    assert all(0 < d["busy_ns"] <= d["total_ns"] and d["busy_ns"] <= d["span_ns"] for d in devices)
    streams = ws.report("stream")
    assert streams.num_rows == exp["devices"] * exp["streams_per_process"]
    assert sum(streams.column("kernels").to_pylist()) == exp["kernels"]
    threads = {(r["pid"], r["tid"]): r for r in ws.report("thread").to_pylist()}
    for pid, p in exp["per_process"].items():
        main, loader = threads[(int(pid), p["main_tid"])], threads[(int(pid), p["loader_tid"])]
        assert main["calls"] + loader["calls"] == p["api_calls"]
        assert main["gpu_ops"] + loader["gpu_ops"] == p["kernels"] + p["memcpy"] + p["memset"]
    launch = ws.report("launch").to_pylist()
    assert sum(r["launched"] for r in launch) == exp["kernels"]
    assert {r["name"]: r["kernel_total_ns"] for r in launch} == exp["kernel_dur_by_name"]


def test_every_report_documents_exactly_its_columns(small):
    ws, _, _ = small
    for by, report in REPORTS.items():
        query = report.query
        q = library.get(query)
        assert q.input, f"{by}: no '-- input:' line"
        raw = ws.sql(q.sql, library.bind(q, {"trace_id": None, "per_trace": True, **REPORTS[by][1]}))
        # range_pct is added after the query, by report --range (traceql/rangefilter.py)
        assert raw.column_names == [c for c, col in q.columns.items() if col.when != "range"], by
        assert q.sql.count("/* where */ TRUE") == 1, by
        for name in ("pct", "kernel_pct", "busy_pct"):
            if name in q.columns:
                assert "percentage of" in q.columns[name].doc and name in q.labels, (by, name)


def test_stddev_is_the_sample_deviation_and_zero_for_one(small):
    ws, _, _ = small
    durs = [r["dur"] for r in ws.sql("SELECT dur FROM kernel WHERE name LIKE 'void gemm_kernel<float, 128>%'")
            .to_pylist()]
    mean = sum(durs) / len(durs)
    sample = (sum((d - mean) ** 2 for d in durs) / (len(durs) - 1)) ** 0.5
    [row] = ws.report("kernel", where="name LIKE 'void gemm_kernel<float, 128>%'").to_pylist()
    assert row["stddev_ns"] == round(sample, 1)
    assert row["med_ns"] == sorted(durs)[2:4][0] / 2 + sorted(durs)[2:4][1] / 2
    [one] = ws.report("kernel", where="name LIKE 'scale%'", sort="min_ns:asc", limit=1,
                      columns=["calls"]).to_pylist()
    assert one == {"calls": 4}
    single = ws.report("memcpy", where="memcpy_id = (0 + 0) OR ts < 0").to_pylist()
    assert single == []


# ------------------------------------------------------------------- the shared options

def test_where_filters_the_input_and_percentages_follow(small):
    ws, exp, _ = small
    gemm = ws.report("kernel", where="name LIKE '%gemm%' AND dur > 0")
    assert set(gemm.column("name").to_pylist()) == {n for n in exp["kernel_names"] if "gemm" in n}
    assert abs(sum(gemm.column("pct").to_pylist()) - 100) < 1e-9
    # a value that looks like SQL is only a value
    assert ws.report("kernel", where="name = 'x'' OR 1=1 OR name = ''y'").num_rows == 0
    dev1 = ws.report("device", where="device_id = 1").to_pylist()
    assert [d["device_id"] for d in dev1] == [1]
    ranges = ws.report("range", where="depth = 0").to_pylist()
    assert {r["name"] for r in ranges} == {"train_step", "epoch"}


@pytest.mark.parametrize("where, message", [
    ("1=1; DROP TABLE kernel", "--where: ';' is not allowed"),
    ("(SELECT 1)", "--where: subqueries are not allowed"),
    ("name IN (SELECT name FROM api_call)", "--where: subqueries are not allowed"),
    ("EXISTS (SELECT 1)", "--where: subqueries are not allowed"),
    ("DROP TABLE kernel", "--where: a DROP statement is not allowed"),
    ("dur > 1 -- comment", "--where: comments are not allowed"),
    ("dur > 1 /* x */", "--where: comments are not allowed"),
    ("dur > $1", "--where: placeholders"),
    ("dur > ?", "--where: placeholders"),
    ("k.dur > 1", "--where: k.dur: name columns without a table"),
    ("nope > 1", "--where: no column 'nope' in kernel; columns: trace_id, kernel_id"),
    ("getvariable('x') IS NULL", "--where: function getvariable() is not allowed"),
    ("count(*) > 1", "--where: function count() is not allowed"),
    ("sum(dur) OVER () > 1", "--where: WINDOW is not allowed"),
    ("*", "--where: '*' is not allowed"),
    ("", "--where: empty expression"),
    ("dur >", "--where: cannot parse"),
    ("name + 1 > 0", "--where 'name + 1 > 0': SQL: "),
    ("name + 1", "--where name + 1: not a condition; give a boolean expression over the columns of kernel"),
    ("1", "--where 1: not a condition"),
])
def test_hostile_or_broken_where_is_refused(small, where, message):
    ws, _, _ = small
    with pytest.raises(UsageError) as err:
        ws.report("kernel", where=where)
    assert str(err.value).startswith(message), str(err.value)
    assert "\n" not in str(err.value)


def test_sort_limit_columns_per_trace(small):
    ws, _, _ = small
    t = ws.report("kernel", sort="calls:asc", limit=3, columns="name,calls")
    assert t.column_names == ["name", "calls"] and t.column("calls").to_pylist() == [4, 4, 4]
    assert ws.report("kernel", sort="name").column("name").to_pylist() == \
        sorted(ws.report("kernel").column("name").to_pylist())
    assert ws.report("kernel", sort="avg_ns").column("avg_ns").to_pylist() == \
        sorted(ws.report("kernel").column("avg_ns").to_pylist(), reverse=True)
    per = ws.report("kernel", per_trace=True, limit=2)
    assert per.column_names[0] == "trace_id" and per.num_rows == 2
    assert "trace_id" not in ws.report("kernel").column_names
    assert report_columns("kernel", with_dims=True)[:3] == ["name", "grid", "block"]
    for kw, message in [({"sort": "bogus"}, "--sort bogus: no column 'bogus' in this report; columns: name, calls"),
                        ({"sort": "calls:up"}, "--sort calls:up: the direction after ':' is 'asc' or 'desc'"),
                        ({"columns": "name,nope"}, "-c name,nope: no column 'nope' in this report")]:
        with pytest.raises(UsageError, match="^" + message.replace("(", r"\(")):
            ws.report("kernel", **kw)
    with pytest.raises(UsageError, match="^--trace 9: no such trace"):
        ws.report("kernel", trace_id=9)
    with pytest.raises(UsageError, match="^--by nope: no such report"):
        ws.report("nope")


@pytest.mark.parametrize("by", ["kernel", "api"])
def test_grouping_shapes_agree(small, by):
    # kernel.sql and api.sql group by name alone unless --per-trace or --with-dims asks for
    # more keys: each shape must count every call once, and parameters left unset (NULL, as
    # `traceql query kernel` binds them) mean the default shape
    ws, _, _ = small
    default = ws.report(by)
    assert ws.query(by).select(default.column_names).equals(default)
    shapes = [{"per_trace": True}] + ([{"with_dims": True}, {"with_dims": True, "per_trace": True}]
                                      if by == "kernel" else [])
    for params in shapes:
        other = ws.report(by, **params)
        assert sum(other.column("calls").to_pylist()) == sum(default.column("calls").to_pylist()), params
        assert sum(other.column("total_ns").to_pylist()) == sum(default.column("total_ns").to_pylist()), params


def test_parquet_output(small):
    ws, _, tmp = small
    emit(ws.report("api"), "parquet", tmp / "api.parquet")
    back = pq.read_table(tmp / "api.parquet")
    assert back.column_names == ["name", "calls", "total_ns", "pct", "avg_ns", "med_ns", "min_ns", "max_ns",
                                 "stddev_ns", "kind"]
    assert back.equals(ws.report("api"))


def test_summary_rows_and_json(small):
    ws, exp, tmp = small
    s = ws.summary()
    assert s.rows.column_names == ["section", "name", "calls", "total_ns", "pct", "avg_ns", "med_ns", "min_ns",
                                   "max_ns", "stddev_ns"]
    sections = {}
    for r in s.rows.to_pylist():
        sections.setdefault(r["section"], []).append(r)
    assert list(sections) == ["GPU activities", "API calls"]
    for rows in sections.values():
        assert abs(sum(r["pct"] for r in rows) - 100) < 1e-9
    assert sum(r["calls"] for r in sections["GPU activities"]) == exp["kernels"] + exp["memcpy"] + exp["memset"]
    doc = json.loads(summary_text(ws, tmp, "json"))
    assert [g["device_id"] for g in doc["gpus"]] == [0, 1] and doc["traces"][0]["span_ns"] > 0
    per = ws.summary(per_trace=True, limit=1)
    assert per.rows.column_names[:2] == ["trace_id", "section"] and per.rows.num_rows == 2


def test_device_busy_is_the_union_of_each_gpus_operations(small):
    # stored at ingest (schemas/derive/device_busy.sql); computed here from the operations alone
    ws, exp, _ = small
    per_device: dict = {}
    for r in ws.sql("SELECT device_id, ts, dur FROM gpu_op").to_pylist():
        per_device.setdefault(r["device_id"], []).append((r["ts"], r["ts"] + r["dur"]))
    expected = []
    for dev, intervals in sorted(per_device.items()):
        busy, end = 0, None
        for s, e in sorted(intervals):
            if end is None or s >= end:
                busy, end = busy + e - s, e
            elif e > end:
                busy, end = busy + e - end, e
        expected.append({"trace_id": 1, "device_id": dev, "ops": len(intervals), "busy_ns": busy})
    assert ws.sql("SELECT trace_id, device_id, ops, busy_ns FROM device_busy ORDER BY device_id").to_pylist() == expected
    # the temporal breakdown: the generator writes no communication kernels, so compute is the
    # union of the kernels, and copies and memsets outside it are exposed memory time
    kernels: dict = {}
    for r in ws.sql("SELECT device_id, ts, dur FROM kernel").to_pylist():
        kernels.setdefault(r["device_id"], []).append((r["ts"], r["ts"] + r["dur"]))
    for row, exp_row in zip(ws.sql("SELECT * FROM device_busy ORDER BY device_id").to_pylist(), expected):
        union, end = 0, None
        for s, e in sorted(kernels[row["device_id"]]):
            union, end = (union + e - s, e) if end is None or s >= end else (union + max(0, e - end), max(e, end))
        assert (row["compute_ns"], row["comm_ns"], row["comm_exposed_ns"]) == (union, 0, 0)
        assert row["memory_exposed_ns"] == exp_row["busy_ns"] - union > 0
    assert sum(r["ops"] for r in expected) == exp["kernels"] + exp["memcpy"] + exp["memset"]
    assert all(0 < r["busy_ns"] < sum(e - s for s, e in per_device[r["device_id"]]) for r in expected)


def test_report_options_follow_the_same_rules_in_python(small):
    """Which report takes which option is the query layer's rule (registry.OPTIONS), so the Python
    API refuses what the CLI refuses, with the same words; the allowed options still work."""
    ws, _, _ = small
    with pytest.raises(UsageError, match=r"^--with-dims applies to --by kernel only$"):
        ws.report("range", with_dims=True)
    with pytest.raises(UsageError, match=r"^--level applies to --by op only$"):
        ws.report("kernel", level="leaf")
    with pytest.raises(UsageError, match=r"^--group name: --by source groups by frame or stack$"):
        ws.report("source", group_by="name")
    assert ws.report("kernel", with_dims=True).num_rows >= ws.report("kernel").num_rows > 0
    assert ws.report("range", spread=None).column_names == ws.report("range").column_names
