"""Printing results: rich tables for people; csv, tsv, json and markdown for machines."""

from __future__ import annotations

import json
import sys

import pyarrow as pa

FORMATS = ("table", "csv", "tsv", "json", "markdown")


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def render(table: pa.Table, fmt: str = "table", out=None) -> None:
    out = out or sys.stdout
    if fmt == "table":
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text

        width = None if getattr(out, "isatty", lambda: False)() else 200
        console = Console(file=out, highlight=False, soft_wrap=False, width=width)
        grid = Table(show_header=True, header_style="bold", show_lines=False)
        for field in table.schema:
            is_num = pa.types.is_integer(field.type) or pa.types.is_floating(field.type) \
                or pa.types.is_decimal(field.type)
            is_text = pa.types.is_string(field.type) or pa.types.is_large_string(field.type)
            short = is_num or (is_text and max((len(_cell(v)) for v in table.column(field.name).to_pylist()),
                                               default=0) <= 12)
            grid.add_column(Text(field.name), justify="right" if is_num else "left",
                            no_wrap=short, overflow="ellipsis" if short else "fold",
                            min_width=min(len(field.name), 12) if short else 16)
        for row in table.to_pylist():
            # Text(), not str: kernel names like 'f<[with T = float]>' are not rich markup
            grid.add_row(*(Text(_cell(v)) for v in row.values()))
        console.print(grid)
        console.print(Text(f"{table.num_rows} row{'s' if table.num_rows != 1 else ''}", style="dim"))
    elif fmt in ("csv", "tsv"):
        import csv

        writer = csv.writer(out, delimiter="," if fmt == "csv" else "\t", lineterminator="\n")
        writer.writerow(table.column_names)
        for batch in table.to_batches():
            for row in zip(*(col.to_pylist() for col in batch.columns)):
                writer.writerow(["" if v is None else v for v in row])
    elif fmt == "json":
        out.write(json.dumps(table.to_pylist(), default=str, indent=1) + "\n")
    elif fmt == "markdown":
        names = table.column_names
        out.write("| " + " | ".join(names) + " |\n")
        out.write("|" + "|".join("---" for _ in names) + "|\n")
        for row in table.to_pylist():
            out.write("| " + " | ".join(_cell(v).replace("|", "\\|") for v in row.values()) + " |\n")
    else:
        raise ValueError(f"unknown format {fmt}")


def human_ns(ns) -> str:
    """A duration in ns as a short readable string: 1.23 ms."""
    if ns is None:
        return "-"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if abs(ns) >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns} ns"


def humanize(table: pa.Table) -> pa.Table:
    """For people: *_ns columns as readable durations ('1.23 ms'), named without the suffix."""
    columns, names = [], []
    for name, col in zip(table.column_names, table.columns):
        if name.endswith("_ns"):
            columns.append(pa.array([None if v is None else human_ns(v) for v in col.to_pylist()], pa.string()))
            names.append(name[:-3])
        else:
            columns.append(col)
            names.append(name)
    return pa.Table.from_arrays(columns, names=names)
