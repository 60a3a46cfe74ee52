"""Printing results: rich tables for people; csv, tsv, json and markdown for machines."""

from __future__ import annotations

import json
import sys

import pyarrow as pa

FORMATS = ("table", "csv", "tsv", "json", "markdown")
UNITS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
_DECIMALS = {"ns": 0, "us": 3, "ms": 6, "s": 9}  # enough to show every ns
_RIGHT = {b"align": b"right"}  # field metadata: a text column of numbers, right-justified in tables


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
                or pa.types.is_decimal(field.type) or (field.metadata or {}).get(b"align") == b"right"
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
    return f"{ns:.3g} ns" if isinstance(ns, float) else f"{ns} ns"


def human_bytes(n) -> str:
    """A byte count as a short readable string with decimal prefixes: 1.05 MB."""
    if n is None:
        return "-"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B" if isinstance(n, float) else f"{n} B"


def in_unit(ns, unit: str) -> str | None:
    """A duration in ns as a number in unit, with every ns shown ('1.234567' ms)."""
    if ns is None:
        return None
    if unit == "ns":
        return f"{ns:.1f}" if isinstance(ns, float) and ns != int(ns) else f"{int(ns)}"
    return f"{ns / UNITS[unit]:.{_DECIMALS[unit]}f}"


def humanize(table: pa.Table, unit: str | None = None, labels: dict | None = None) -> pa.Table:
    """For people: *_ns columns as readable durations ('1.23 ms') named without the suffix,
    or, with unit, as numbers in that unit named *_<unit>; *_bytes columns as '1.05 MB';
    percentages (pct, *_pct) to two decimals; headers from labels where given."""
    labels = labels or {}
    fields, columns = [], []
    for name, col in zip(table.column_names, table.columns):
        values = col.to_pylist()
        header = labels.get(name)
        if name.endswith("_ns"):
            if unit is None:
                col, shown = pa.array([None if v is None else human_ns(v) for v in values], pa.string()), name[:-3]
            else:
                col, shown = pa.array([in_unit(v, unit) for v in values], pa.string()), f"{name[:-3]}_{unit}"
            fields.append(pa.field(header or shown, pa.string(), metadata=_RIGHT))
        elif name.endswith("_bytes"):
            col = pa.array([None if v is None else human_bytes(v) for v in values], pa.string())
            fields.append(pa.field(header or name, pa.string(), metadata=_RIGHT))
        elif (name == "pct" or name.endswith("_pct")) and pa.types.is_floating(col.type):
            col = pa.array([None if v is None else f"{v:.2f}" for v in values], pa.string())
            fields.append(pa.field(header or name, pa.string(), metadata=_RIGHT))
        else:
            fields.append(pa.field(header or name, col.type))
        columns.append(col)
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


# ------------------------------------------------------------------------------ summary

def nvprof_time(ns, unit: str | None = None) -> str:
    """nvprof's way of printing a time: five significant digits and the unit ('9.6305ms',
    '3.4560us', '830ns'); with unit, a plain number in that unit."""
    if ns is None:
        return "-"
    if unit is not None:
        return in_unit(ns, unit)
    for name, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if abs(ns) >= scale:
            return f"{ns / scale:#.5g}{name}"
    return f"{round(ns)}ns"


def render_summary(summary, fmt: str = "table", out=None, unit: str | None = None) -> None:
    """`traceql summary`: nvprof's layout for people (table), the rows for machines."""
    out = out or sys.stdout
    if fmt in ("csv", "tsv"):
        render(summary.rows, fmt, out)
        return
    if fmt == "json":
        doc = {"traces": summary.traces.to_pylist(), "gpus": summary.gpus.to_pylist(),
               "rows": summary.rows.to_pylist()}
        out.write(json.dumps(doc, default=str, indent=1) + "\n")
        return
    traces = summary.traces.to_pylist()
    gpus = summary.gpus.to_pylist()
    rows = summary.rows.to_pylist()
    groups = [[t] for t in traces] if summary.per_trace else [traces]
    for i, group in enumerate(groups):
        if i:
            out.write("\n")
        ids = {t["trace_id"] for t in group}
        for t in group:
            _trace_header(t, [g for g in gpus if g["trace_id"] == t["trace_id"]], out, fmt, unit)
        if not summary.per_trace and len(group) > 1:
            out.write(f"\nSections below: the {len(group)} traces together (--per-trace splits them)\n")
        mine = [r for r in rows if not summary.per_trace or r["trace_id"] in ids]
        for section, what in (
                ("GPU activities", "all GPU activities (kernels, copies, memsets, graph executions)"),
                ("API calls", "all CUDA API calls")):
            part = [r for r in mine if r["section"] == section]
            out.write(f"\n{section} (Time(%) = share of the summed time of {what}, not of wall time):\n")
            if fmt == "markdown":
                _markdown_section(part, out, unit)
            else:
                _text_section(part, out, unit)


def _trace_header(t, gpus, out, fmt, unit) -> None:
    version = " ".join(v for v in (t["source_format"], t["exporter_version"]) if v)
    bullet = "- " if fmt == "markdown" else "  "
    out.write(f"trace {t['trace_id']}: {t['path']} ({version})\n")
    span = nvprof_time(t["span_ns"], unit) + (f" {unit}" if unit else "")
    out.write(f"{bullet}span: {span} from the first to the last event of any kind\n")
    if not gpus:
        out.write(f"{bullet}GPUs: none recorded\n")
    for g in gpus:
        busy = nvprof_time(g["busy_ns"], unit) + (f" {unit}" if unit else "")
        pct = "-" if g["busy_pct"] is None else f"{g['busy_pct']:.2f}%"
        out.write(f"{bullet}GPU {g['device_id']} {g['device'] or '(name not recorded)'}: busy {busy} = {pct} "
                  f"of the span (time with at least one kernel, copy or memset running; {g['ops']:,} operations)\n")


def _section_cells(rows, unit):
    time_head = "Time" if unit is None else f"Time({unit})"
    heads = ["Time(%)", time_head, "Calls", "Avg", "Min", "Max", "Name"]
    if unit is not None:
        heads[3:6] = [f"{h}({unit})" for h in heads[3:6]]
    cells = [[("-" if r["pct"] is None else f"{r['pct']:.2f}%"), nvprof_time(r["total_ns"], unit), f"{r['calls']}",
              nvprof_time(r["avg_ns"], unit), nvprof_time(r["min_ns"], unit), nvprof_time(r["max_ns"], unit),
              r["name"] if r["name"] is not None else "(unnamed)"] for r in rows]
    return heads, cells


def _text_section(rows, out, unit) -> None:
    heads, cells = _section_cells(rows, unit)
    if not cells:
        out.write("  (none)\n")
        return
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(heads[:-1])]
    line = lambda values: "  ".join(v.rjust(w) for v, w in zip(values, widths))  # noqa: E731
    out.write(line(heads[:-1]) + "  " + heads[-1] + "\n")
    for c in cells:
        out.write(line(c[:-1]) + "  " + c[-1] + "\n")


def _markdown_section(rows, out, unit) -> None:
    heads, cells = _section_cells(rows, unit)
    out.write("\n| " + " | ".join(heads) + " |\n")
    out.write("|" + "|".join("---:" for _ in heads[:-1]) + "|---|\n")
    for c in cells:
        out.write("| " + " | ".join(v.replace("|", "\\|") for v in c) + " |\n")
