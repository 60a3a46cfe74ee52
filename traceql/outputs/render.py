"""Printing results in a --format: aligned text tables for people (tables.py, with cells.py and
numbers.py); csv, tsv, json and markdown for machines. `traceql summary`'s layout is summary_text.py.

Tables for people (format 'table') follow the spirit of `nsys stats`: numbers are printed
whole, right-aligned, never cut; text longer than LONG characters (kernel names, NVTX paths)
goes last on the line and gets the room that is left, shortened in the middle ('…') when it
must be, keeping similar names apart. When that room holds fewer than 3 in 4 of the names
whole and is narrower than INLINE_ENOUGH, each name gets a line of its own above its
numbers, and numbers that do not fit one line are split into bands of lines. The width is
the `width` argument, else $COLUMNS, else the terminal's when printing to one; into a pipe
or a file, or with `wide`, lines are as long as the data (for `less -S`) and nothing is
shortened.

Rows are formatted CHUNK at a time, the layout measured on the first chunk, so a result of
millions of rows (a pyarrow.RecordBatchReader) prints with bounded memory. Nothing here
interprets markup: a kernel name such as `f<[with T = float]>` prints as it is.
"""

from __future__ import annotations

import sys

from traceql.core.text import clean_text
from traceql.outputs.cells import cell
from traceql.outputs.tables import chunks, schema_of, terminal_width, write_table

# pyarrow (and json) are imported by the functions that need them: the commands that print no table
# (help, schema, reports, queries) start without pyarrow, a table needs no json.

FORMATS = ("table", "csv", "tsv", "json", "markdown")


def json_value(value):
    """What json cannot write by itself: exact integers for integral decimals (sums
    beyond 64 bits), floats for other decimals, text for times and the rest."""
    from decimal import Decimal

    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


def render(data, fmt: str = "table", out=None, *, width: int | None = None, wide: bool = False,
           transform=None) -> None:
    """Print a pyarrow Table or RecordBatchReader in format fmt. Tables for people are fitted
    to `width` (default: terminal_width(out, wide)); transform (e.g. humanize) is applied to
    each chunk of rows of table and markdown output."""
    try:
        _render(data, fmt, out or sys.stdout, width, wide, transform)
    except OverflowError:  # Arrow to Python: a date past year 9999, an interval of 2**31 days, ...
        from traceql.core.errors import UsageError

        raise UsageError("a value of the result is out of the range traceql can print (a date or timestamp "
                         "outside years 1-9999, an interval beyond 999,999,999 days): CAST it to VARCHAR, or "
                         "write --format parquet -o FILE") from None


def _render(data, fmt, out, width, wide, transform) -> None:
    if fmt == "table":
        if width is None:
            width = terminal_width(out, wide)
        write_table(data, out, None if wide else width, transform)
    elif fmt in ("csv", "tsv"):
        import csv

        writer = csv.writer(out, delimiter="," if fmt == "csv" else "\t", lineterminator="\n")
        writer.writerow(schema_of(data).names)
        for batch in chunks(data):
            for row in zip(*(col.to_pylist() for col in batch.columns)):
                writer.writerow(["" if v is None else v for v in row])
    elif fmt == "json":
        import json

        first = True
        for batch in chunks(data):
            names = batch.column_names
            for row in zip(*(col.to_pylist() for col in batch.columns)):
                text = json.dumps(dict(zip(names, row)), default=json_value, indent=1)
                out.write(("[\n" if first else ",\n") + " " + text.replace("\n", "\n "))
                first = False
        out.write("[]\n" if first else "\n]\n")
    elif fmt == "markdown":
        names = schema_of(data).names if transform is None else transform(schema_of(data).empty_table()).column_names
        out.write("| " + " | ".join(clean_text(n).replace("|", "\\|") for n in names) + " |\n")
        out.write("|" + "|".join("---" for _ in names) + "|\n")
        for batch in chunks(data):
            if transform is not None:
                batch = transform(batch)
            for row in zip(*(col.to_pylist() for col in batch.columns)):
                out.write("| " + " | ".join(clean_text(cell(v)).replace("|", "\\|") for v in row) + " |\n")
    else:
        raise ValueError(f"unknown format {fmt}")
