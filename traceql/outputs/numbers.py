"""Numbers for people: times, bytes and FLOPs in readable units (three significant digits), a time
in the --unit asked, and a whole result made readable (humanize)."""

from __future__ import annotations

import math

from traceql.outputs.cells import ID_COLUMNS, RIGHT


UNITS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}


_DECIMALS = {"ns": 0, "us": 1, "ms": 3, "s": 6}  # --unit: to 0.1 us (us), to the microsecond (ms, s)


def _sig3(value: float) -> str | None:
    """value to three significant digits without an exponent; None when it rounds to 1000."""
    text = f"{value:.3g}"
    return None if "e" in text else text


def human_ns(ns) -> str:
    """A duration in ns as a short readable string: 1.23 ms."""
    if ns is None:
        return "-"
    a = abs(ns)
    if a < 1_000:
        return f"{ns:.3g} ns" if isinstance(ns, float) else f"{ns} ns"
    for unit, scale in (("us", 1e3), ("ms", 1e6), ("s", 1e9)):
        if a < scale * 1_000 or unit == "s":
            text = _sig3(ns / scale)
            if text is not None:
                return f"{text} {unit}"
            if unit == "s":
                return f"{ns / scale:,.0f} s"
    return f"{ns} ns"  # not reached


def human_bytes(n) -> str:
    """A byte count as a short readable string with decimal prefixes: 1.05 MB."""
    if n is None:
        return "-"
    a = abs(n)
    if a < 1_000:
        return f"{n:.0f} B" if isinstance(n, float) else f"{n} B"
    for unit, scale in (("kB", 1e3), ("MB", 1e6), ("GB", 1e9), ("TB", 1e12)):
        if a < scale * 1_000 or unit == "TB":
            text = _sig3(n / scale)
            if text is not None:
                return f"{text} {unit}"
            if unit == "TB":
                return f"{n / scale:,.0f} TB"
    return f"{n} B"  # not reached


def human_flops(n) -> str:
    """A count of floating-point operations with decimal prefixes: 1.93 TFLOP, 2.38 GFLOP."""
    if n is None:
        return "-"
    a = abs(n)
    if a < 1_000:
        return f"{n:.0f} FLOP" if isinstance(n, float) else f"{n} FLOP"
    for unit, scale in (("kFLOP", 1e3), ("MFLOP", 1e6), ("GFLOP", 1e9), ("TFLOP", 1e12), ("PFLOP", 1e15)):
        if a < scale * 1_000 or unit == "PFLOP":
            text = _sig3(n / scale)
            if text is not None:
                return f"{text} {unit}"
            if unit == "PFLOP":
                return f"{n / scale:,.0f} PFLOP"
    return f"{n} FLOP"  # not reached


def short_float(value) -> str | None:
    """A ratio or rate (GB/s, TFLOP/s) to three significant digits: 8.55, 0.00229, 1,234."""
    if value is None:
        return None
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    a = abs(value)
    if a < 1e-4:
        return f"{value:.2e}"
    text = _sig3(value)
    return text if text is not None else f"{value:,.0f}"


def in_unit(ns, unit: str) -> str | None:
    """A duration in ns as a number in `unit` with thousands separators: ns exact (0.1 for
    averages), us to 0.1 us, ms and s to the microsecond ('1,841.631' ms)."""
    if ns is None:
        return None
    if unit == "ns":
        return f"{ns:,.1f}" if isinstance(ns, float) and ns != int(ns) else f"{int(ns):,}"
    return f"{ns / UNITS[unit]:,.{_DECIMALS[unit]}f}"


def humanize(table, unit: str | None = None, labels: dict | None = None):
    """For people: *_ns columns as readable durations ('1.23 ms') named without the suffix,
    or, with unit, as numbers in that unit named *_<unit>; bytes and *_bytes columns as
    '1.05 MB', flops and *_flops as '1.93 TFLOP' (csv and json keep the exact counts);
    percentages (pct, *_pct) to two decimals; other fractional numbers to three significant
    digits; counts with thousands separators; headers from labels where given, else the
    column's name in words ('cpu total', 'avg ms': no underscores in tables for people).
    table: a pyarrow Table, or a chunk of traceql.core.results rows (the same kind back)."""
    labels = labels or {}
    headers, columns = [], []  # columns: a list of texts for a column made readable, else the column
    for name, col in zip(table.column_names, table.columns):
        header = labels.get(name)
        if header is None and "_" in name and not name.endswith("_ns"):  # 'cpu total', not 'cpu_total'
            header = name.replace("_", " ")
        kind = _kind(col.type)
        number = kind != "other"
        text = None
        if name.endswith("_ns") and number:
            values = col.to_pylist()
            if unit is None:
                text, shown = [None if v is None else human_ns(v) for v in values], name[:-3]
            else:
                text, shown = [in_unit(v, unit) for v in values], f"{name[:-3]} {unit}"
            header = header or shown.replace("_", " ")
        elif (name == "bytes" or name.endswith("_bytes")) and number:
            text = [None if v is None else human_bytes(v) for v in col.to_pylist()]
        elif (name == "flops" or name.endswith("_flops")) and number:
            text = [None if v is None else human_flops(v) for v in col.to_pylist()]
        elif (name == "pct" or name.endswith("_pct")) and kind == "floating":
            text = [None if v is None else f"{v:.2f}" for v in col.to_pylist()]
        elif kind in ("floating", "fraction"):
            text = [short_float(None if v is None else float(v)) for v in col.to_pylist()]
        elif number and not ID_COLUMNS.search(name):
            text = [None if v is None else f"{v:,}" for v in col.to_pylist()]
        headers.append(header or name)
        columns.append(col if text is None else text)
    from traceql.core.results import Chunk, Column, Field, Schema

    if isinstance(table, Chunk):
        fields = Schema(Field(h, c.type) if not isinstance(c, list) else Field(h, "VARCHAR", RIGHT)
                        for h, c in zip(headers, columns))
        return Chunk.of_columns(fields, [c if not isinstance(c, list) else Column("VARCHAR", c) for c in columns])
    import pyarrow as pa

    fields = [pa.field(h, c.type) if not isinstance(c, list) else pa.field(h, pa.string(), metadata=RIGHT)
              for h, c in zip(headers, columns)]
    return pa.Table.from_arrays([c if not isinstance(c, list) else pa.array(c, pa.string()) for c in columns],
                                schema=pa.schema(fields))


def _kind(t) -> str:
    """A column type (pyarrow's, or a DuckDB type name) as humanize tells them apart: 'integer'
    (decimals of scale 0 too), 'floating', 'fraction' (decimals with a scale) or 'other'."""
    if isinstance(t, str):  # a DuckDB type (traceql.core.results)
        from traceql.core.results import NUMBER_TYPES

        if t in ("FLOAT", "DOUBLE"):
            return "floating"
        if t in NUMBER_TYPES:
            return "integer"
        if t.startswith("DECIMAL("):
            return "fraction" if not t.rstrip(")").endswith(",0") else "integer"
        return "other"
    import pyarrow as pa

    if pa.types.is_floating(t):
        return "floating"
    if pa.types.is_decimal(t):
        return "fraction" if t.scale > 0 else "integer"
    return "integer" if pa.types.is_integer(t) else "other"
