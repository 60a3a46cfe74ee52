"""The renderer alone (traceql.render, traceql.results): tables that fit any width with every
number whole, names shortened only where they must be, streaming output, and the machine
formats' numbers."""

from __future__ import annotations

import csv
import io
import json
import tracemalloc
from decimal import Decimal

import pyarrow as pa
import pytest

from traceql.outputs.cells import shorten_distinct, shorten_middle, text_width
from traceql.outputs.numbers import human_bytes, human_flops, human_ns, humanize, in_unit, short_float
from traceql.outputs.render import render
from traceql.outputs.tables import Layout
from traceql.core.results import tidy, tidy_reader, unique_names

LONG_NAMES = [
    "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl<at::native::AddFunctor<float>>"
    "(at::TensorIteratorBase&, at::native::AddFunctor<float> const&)::{lambda(int)#1}>(int, at::native::"
    "gpu_kernel_impl<at::native::AddFunctor<float>>)",
    "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl<at::native::MulFunctor<float>>"
    "(at::TensorIteratorBase&, at::native::MulFunctor<float> const&)::{lambda(int)#1}>(int, at::native::"
    "gpu_kernel_impl<at::native::MulFunctor<float>>)",
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_16x4_nn_align4>(cutlass_80_tensorop_s1688gemm_128x"
    "128_16x4_nn_align4::Params)",
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_16x4_nn_align4>(cutlass_80_tensorop_s1688gemm_64x"
    "64_16x4_nn_align4::Params)",
    "ampere_sgemm_128x64_nn",
]


def kernel_table(n_extra: int = 0) -> pa.Table:
    names = LONG_NAMES + [f"kernel_{i}" for i in range(n_extra)]
    n = len(names)
    return pa.table({
        "name": names,
        "calls": [521_000 + i for i in range(n)],
        "total_ns": [1_233_456_789 - i * 1000 for i in range(n)],
        "pct": [54.3212 - i for i in range(n)],
        "avg_ns": [2_360_000.5 + i for i in range(n)],
        "min_ns": [2_300_000 + i for i in range(n)],
        "max_ns": [2_500_000 + i for i in range(n)],
        "stddev_ns": [12_300.0 + i for i in range(n)],
    })


LABELS = {"pct": "Time(%) of all kernels"}


def table_text(table, width, **kw) -> str:
    buf = io.StringIO()
    render(table, "table", buf, width=width, transform=lambda c: humanize(c, labels=LABELS), **kw)
    return buf.getvalue()


@pytest.mark.parametrize("width", [40, 60, 80, 100, 120, 160, 200, 300])
def test_every_number_whole_and_every_line_fits(width):
    table = kernel_table()
    text = table_text(table, width)
    lines = text.splitlines()
    assert all(text_width(line) <= width for line in lines), [line for line in lines if text_width(line) > width]
    human = humanize(table, labels=LABELS)
    for name in human.column_names[1:]:
        for cell in human.column(name).to_pylist():
            assert cell in text, (width, name, cell)
    for name in LONG_NAMES:  # present, whole or shortened in the middle: its start is there
        assert name[:min(len(name), 12)] in text
    assert any(line.startswith("5 rows") for line in lines[-2:])


def test_similar_names_stay_apart_when_shortened():
    text = table_text(kernel_table(), 120)
    rows = [line for line in text.splitlines() if "cutlass" in line]
    assert len(rows) == 2 and rows[0].split("  ")[-1] != rows[1].split("  ")[-1]
    assert "128x128" in rows[0] or "28x128" in rows[0]
    assert any("AddFunctor" in line for line in text.splitlines())
    assert any("MulFunctor" in line for line in text.splitlines())


def test_common_prefix_is_the_characters_compared_one_by_one():
    """cells._common_prefix (a binary search over slices) against a character loop, on names
    that share no, some, all or a whole other name's characters, wide characters included."""
    import random

    from traceql.outputs.cells import _common_prefix

    def by_hand(a, b):
        n = 0
        while n < min(len(a), len(b)) and a[n] == b[n]:
            n += 1
        return n

    rng = random.Random(7)
    pairs = [("", ""), ("a", ""), ("abc", "abc"), ("abc", "abd"), ("void k<128>", "void k<128, 2>")]
    for _ in range(3000):
        a = "".join(rng.choice("ab\u00e9\u5bbd") for _ in range(rng.randint(0, 40)))
        pairs.append((a, a[:rng.randint(0, len(a))] + "".join(rng.choice("ab") for _ in range(rng.randint(0, 3)))))
    for a, b in pairs:
        assert _common_prefix(a, b) == _common_prefix(b, a) == by_hand(a, b), (a, b)


def test_layouts_at_each_width():
    cells = [[str(c) for c in col.to_pylist()] for col in humanize(kernel_table(), labels=LABELS).columns]
    heads = humanize(kernel_table(), labels=LABELS).column_names
    rights = [False] + [True] * 7
    wide = Layout(heads, rights, cells, None)
    assert wide.mode == "line" and not wide.shortened and wide.flex == [0]
    assert wide.header()[0].endswith("name") and "Time(%) of all kernels" in wide.header()[0]
    inline = Layout(heads, rights, cells, 200)  # room for 80 columns of name: on the line, shortened
    assert inline.mode == "line" and inline.shortened
    for width in (80, 120):  # less room than 80 and than 3 in 4 names need: the name above the numbers
        stacked = Layout(heads, rights, cells, width)
        assert stacked.mode == "stacked" and len(stacked.bands) == 1 and stacked.flex == [0]
    short = Layout(heads, rights, [[c[:20] for c in cells[0]]] + cells[1:], 80)
    assert short.mode == "line" and not short.shortened  # names of 20 characters stay on the line
    banded = Layout(heads, rights, cells, 40)
    assert banded.mode == "stacked" and len(banded.bands) > 1


def test_wide_prints_names_whole_and_numbers_first():
    text = table_text(kernel_table(), None)
    for name in LONG_NAMES:
        assert name in text
    header = text.splitlines()[0]
    assert header.split()[0] == "calls" and header.split()[-1] == "name"
    assert "shortened" not in text


def test_short_text_stays_in_place_and_control_characters_show():
    table = pa.table({"kind": ["Host-to-Device", "a\nb\tc"], "calls": [1, 2]})
    text = table_text(table, 80)
    assert text.splitlines()[0].split() == ["kind", "calls"]
    assert "a\\nb\\tc" in text and text.count("\n") == 5


def test_empty_result_prints_its_header():
    table = pa.table({"name": pa.array([], pa.string()), "total_ns": pa.array([], pa.int64())})
    assert table_text(table, 80).splitlines() == ["name  total", "----  -----", "0 rows"]


def test_wide_characters_count_two_columns():
    assert text_width("核函数") == 6 and text_width("e\u0301") == 1
    table = pa.table({"name": ["核函数" * 20, "x" * 60], "n": [1, 2]})
    for line in table_text(table, 50).splitlines():
        assert text_width(line) <= 50


def test_shortening_helpers():
    assert shorten_middle("start_" + "x" * 40 + "_end", 15) == "start_x…xxx_end"
    names = ["prefix_" * 8 + "alpha_" + "suffix_" * 8, "prefix_" * 8 + "beta_" + "suffix_" * 8]
    short = shorten_distinct(names, 40)
    assert short[0] != short[1] and all(text_width(s) <= 40 for s in short)
    assert "alpha" in short[0] and "beta" in short[1]
    assert shorten_distinct(["same " * 20, "same " * 20], 30)[0] == shorten_middle("same " * 20, 30)


def test_streams_rows_with_bounded_memory():
    """A 100,000-row result as a RecordBatchReader: printed chunk by chunk, never held whole.
    Its peak of Python memory is 0.84 MB at any number of rows; the reader read whole first and
    printed as one chunk peaks at 13 MB (130 bytes a row), the same rows held as Python objects at
    29 MB. (1 M rows, then 200,000, proved the same in 10x and 2x the time, most of it
    tracemalloc's.)"""
    rows, batch = 100_000, 10_000

    def batches():
        for start in range(0, rows, batch):
            yield pa.record_batch({"kernel_id": pa.array(range(start, start + batch), pa.int64()),
                                   "name": pa.array([f"k{i % 7}" for i in range(batch)], pa.string())})

    reader = pa.RecordBatchReader.from_batches(batches().__next__().schema, batches())

    class Counter(io.TextIOBase):
        lines = 0

        def write(self, s):
            self.lines += s.count("\n")
            return len(s)

    out = Counter()
    tracemalloc.start()
    render(reader, "table", out, width=80)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert out.lines == rows + 3  # header, rule, rows, footer
    assert peak < 5e6, peak  # Python objects of one chunk at a time (2,000 rows), not of 100,000 rows


def test_numbers_for_people():
    assert [human_ns(v) for v in (830, 1500, 999_700, 1_841_630_798, 12_345_678_900_000)] == \
        ["830 ns", "1.5 us", "1 ms", "1.84 s", "12,346 s"]
    assert human_bytes(21_000_000) == "21 MB" and human_bytes(999_999) == "1 MB"
    assert [short_float(v) for v in (8.54618, 0.00228659, 1234.5, 0.0)] == ["8.55", "0.00229", "1,234", "0"]
    assert in_unit(1_841_630_798, "ms") == "1,841.631" and in_unit(1_841_630_798, "s") == "1.841631"
    assert in_unit(1_500, "us") == "1.5" and in_unit(1_841_630_798, "ns") == "1,841,630,798"
    t = humanize(pa.table({"gb_per_s": [8.54618], "calls": [12345], "trace_id": [12345], "avg_ns": [1_234_567.0]}),
                 unit="ms")
    # headers in words (issue 35): no snake_case in tables for people
    assert t.to_pylist() == [{"gb per s": "8.55", "calls": "12,345", "trace id": 12345, "avg ms": "1.235"}]
    t = humanize(pa.table({"flops": [1_929_646_350_336], "bytes": [36_834_117_288], "tflops": [623.4]}))
    assert t.to_pylist() == [{"flops": "1.93 TFLOP", "bytes": "36.8 GB", "tflops": "623"}]
    assert [human_flops(v) for v in (0, 999, 2_381_322_112, 5.5e17)] == ["0 FLOP", "999 FLOP", "2.38 GFLOP",
                                                                         "550 PFLOP"]


# ------------------------------------------------------------------------------ machine formats

def test_repeated_names_are_kept_in_every_format():
    assert unique_names(["dur", "dur", "dur_1", "x", "dur"]) == ["dur", "dur_2", "dur_1", "x", "dur_3"]
    raw = pa.Table.from_arrays([pa.array([1]), pa.array([2])], names=["dur", "dur"])
    table = tidy(raw)
    assert table.column_names == ["dur", "dur_1"] and table.to_pylist() == [{"dur": 1, "dur_1": 2}]
    outputs = {}
    for fmt in ("csv", "tsv", "json", "markdown", "table"):
        buf = io.StringIO()
        render(table, fmt, buf, width=80)
        outputs[fmt] = buf.getvalue()
    assert outputs["csv"] == "dur,dur_1\n1,2\n"
    assert json.loads(outputs["json"]) == [{"dur": 1, "dur_1": 2}]
    assert outputs["markdown"].splitlines()[0] == "| dur | dur_1 |"
    assert outputs["table"].splitlines()[0].split() == ["dur", "dur_1"]
    reader = tidy_reader(pa.RecordBatchReader.from_batches(raw.schema, raw.to_batches()))
    assert reader.read_all().column_names == ["dur", "dur_1"]


def test_integer_sums_are_int64_and_json_integers():
    big = pa.table({"s": pa.array([Decimal(1733804486), None], pa.decimal128(38, 0))})
    assert tidy(big).schema.field("s").type == pa.int64()
    beyond = pa.table({"s": pa.array([Decimal(2 ** 70)], pa.decimal128(38, 0))})
    assert tidy(beyond).schema.field("s").type == pa.decimal128(38, 0)  # kept exact
    buf = io.StringIO()
    render(beyond, "json", buf)
    assert json.loads(buf.getvalue()) == [{"s": 2 ** 70}] and '"s": 1180591620717411303424' in buf.getvalue()
    buf = io.StringIO()
    render(tidy(big), "json", buf)
    assert json.loads(buf.getvalue()) == [{"s": 1733804486}, {"s": None}]
    buf = io.StringIO()
    render(tidy(big), "csv", buf)
    assert list(csv.reader(io.StringIO(buf.getvalue()))) == [["s"], ["1733804486"], [""]]


def test_json_streams_the_same_text_as_one_document():
    table = pa.table({"a": [1, 2], "b": ["x", None]})
    buf = io.StringIO()
    render(table, "json", buf)
    assert buf.getvalue() == json.dumps(table.to_pylist(), indent=1) + "\n"
    buf = io.StringIO()
    render(table.slice(0, 0), "json", buf)
    assert buf.getvalue() == "[]\n"


# Every plain type (traceql.core.results.PLAIN_TYPES), NULLs, a repeated name, an integer sum beyond
# 64 bits, a control character and a wide character, more rows than a chunk (2,000) and a long name
PLAIN_SQL = """
SELECT (i % 100 - 50)::TINYINT AS t8, ((i % 30) * 1000)::SMALLINT AS s16, i * 100000 AS i32, i::BIGINT * 10000000000 AS i64,
       CASE WHEN i = 3 THEN 170141183460469231731687303715884105727::HUGEINT ELSE i::HUGEINT END AS h,
       (i % 200)::UTINYINT AS u8, i::USMALLINT AS u16, i::UINTEGER AS u32, i::UBIGINT * 1000 AS u64,
       (i / 3)::FLOAT AS f, i / 7 AS d, (i / 4)::DECIMAL(12, 3) AS dec, i % 2 = 0 AS b,
       CASE WHEN i % 5 = 0 THEN NULL WHEN i = 7 THEN 'tab\there' WHEN i = 8 THEN '名前' ELSE 'kernel_' || i END AS i32,
       CASE WHEN i = 2 THEN repeat('void at::native::elementwise_kernel<128>', 4) END AS name
FROM range(2100) r(i)
"""


@pytest.mark.parametrize("fmt", ["table", "csv", "tsv", "json", "markdown"])
@pytest.mark.parametrize("width", [None, 80])
def test_plain_rows_print_as_arrow(fmt, width):
    """`traceql sql` prints a result of plain types from DuckDB's Python rows (no pyarrow): the
    same bytes as from the Arrow result, in every format, chunk boundaries and widths included."""
    import duckdb

    from traceql.core.results import Rows

    con = duckdb.connect()
    result = con.execute(PLAIN_SQL)
    assert Rows.plain(result)
    via_rows, via_arrow = io.StringIO(), io.StringIO()
    render(Rows(result), fmt, via_rows, width=width)
    render(tidy(con.execute(PLAIN_SQL).to_arrow_table()), fmt, via_arrow, width=width)
    assert via_rows.getvalue() == via_arrow.getvalue()
    assert via_rows.getvalue().count("\n") >= 2100
    for sql in ("SELECT [1] AS l", "SELECT DATE '2020-01-01' AS d", "SELECT 'a'::ENUM('a') AS e",
                "SELECT {'x': 1} AS s", "SELECT INTERVAL 1 DAY AS i", "SELECT 1::UHUGEINT AS u"):
        assert not Rows.plain(con.execute(sql)), sql
