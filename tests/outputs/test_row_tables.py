"""Reports read as Python rows (run_report(rows=True), a traceql.core.results.RowTable, what the
CLI prints so that it starts without pyarrow) print exactly as the same reports read as Arrow
tables: every report, with the options that keep the Python rows and those that fall back to
Arrow, in every text format, on real traces with PyTorch ops and several traces; the summary
too."""

from __future__ import annotations

import io

import pyarrow as pa
import pytest

import traceql
from traceql.core.results import RowTable
from traceql.outputs.numbers import humanize
from traceql.outputs.render import render
from traceql.outputs.summary_text import render_summary
from traceql.query.registry import REPORTS
from traceql.query.reports import report_query

from ..util import ingested

TRACES = ("dlprof-pytorch-emit-nvtx-nsys2022.1/nsys_profile.sqlite",  # PyTorch ops: op, kernel-op, layer
          "kineto-hta-alexnet-a100/benchmark_result_2869224_1695835535_trace.json.gz",  # Kineto
          "rocpd-mi300x-batched-gemm-rocprofv3/21_results.db")

# (options, whether the rows stay Python rows): a sort, a range or a per-trace limit need Arrow,
# and so does a column of another type than numbers, text and booleans (source's ENUM)
OPTIONS = [({"limit": 40}, True), ({"trace_id": 1, "limit": 40}, True), ({"per_trace": True, "limit": None}, True),
           ({"columns": "all", "limit": 2}, True), ({"recompute": True, "limit": 5}, True),
           ({"per_trace": True, "limit": 2}, False), ({"sort": "calls", "limit": 3}, False)]
# (every one with a limit but one: gpu-trace and api-trace have a row per event, and 40 rows show
# what thousands would)


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    with traceql.open(ingested(tmp_path_factory, *TRACES, derived=True)) as ws:
        yield ws


def _printed(table, by: str, fmt: str, unit=None) -> str:
    out = io.StringIO()
    transform = None
    if fmt == "table" or unit is not None:
        labels = report_query(by).labels if fmt == "table" else None
        transform = lambda chunk: humanize(chunk, unit=unit, labels=labels)  # noqa: E731
    render(table, fmt, out, width=100, transform=transform)
    return out.getvalue()


@pytest.mark.parametrize("by", list(REPORTS))
def test_a_report_read_as_rows_prints_as_the_arrow_table(ws, by):
    for options, python_rows in OPTIONS:
        if by in ("gpu-trace", "api-trace") and options.get("limit", 0) is None:
            continue
        if "calls" in options.get("sort", "") and "calls" not in report_query(by).columns:
            continue
        try:
            arrow = ws.report(by, **options)
        except traceql.UsageError:  # an option the report does not take: the same either way
            with pytest.raises(traceql.UsageError):
                ws.report(by, rows=True, **options)
            continue
        rows = ws.report(by, rows=True, **options)
        assert isinstance(arrow, pa.Table)
        plain = all(pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)
                    or pa.types.is_string(t) or pa.types.is_boolean(t) for t in arrow.schema.types)
        assert isinstance(rows, RowTable if python_rows and plain else pa.Table), options
        assert rows.num_rows == arrow.num_rows and rows.column_names == arrow.column_names, options
        for fmt, unit in (("table", None), ("table", "ms"), ("csv", None), ("json", None), ("markdown", "us")):
            assert _printed(rows, by, fmt, unit) == _printed(arrow, by, fmt, unit), (options, fmt, unit)


def test_the_common_reports_are_read_as_rows(ws):
    # the comparison above compares Python rows with Arrow for these at least
    for by in ("kernel", "api", "gpu", "range", "op", "kernel-op", "layer", "stream", "thread"):
        table = ws.report(by, rows=True)
        assert isinstance(table, RowTable) and table.num_rows > 0, by


@pytest.mark.parametrize("options", [{}, {"per_trace": True}, {"limit": 3}, {"per_trace": True, "limit": 2},
                                     {"trace_id": 2, "recompute": True}])
def test_the_summary_read_as_rows_prints_as_from_arrow(ws, options):
    arrow, rows = ws.summary(**options), ws.summary(rows=True, **options)
    python_rows = not (options.get("per_trace") and "limit" in options)
    for part in ("traces", "gpus", "rows"):
        assert isinstance(getattr(arrow, part), pa.Table)
        assert isinstance(getattr(rows, part), RowTable if python_rows else pa.Table), part
        assert getattr(rows, part).to_pylist() == getattr(arrow, part).to_pylist(), part
    assert arrow.rows.num_rows > 0
    for fmt, unit in (("table", None), ("table", "ms"), ("csv", None), ("json", None), ("markdown", "us")):
        printed = []
        for result in (arrow, rows):
            out = io.StringIO()
            render_summary(result, fmt, out, unit=unit, width=100)
            printed.append(out.getvalue())
        assert printed[0] == printed[1], (fmt, unit)
