"""`traceql summary` for people: nvprof's layout (each trace's span and GPUs, then GPU activities and
API calls with Time(%), Time, Calls, Avg, Min, Max, Name), as a table or markdown; the rows for
machines."""

from __future__ import annotations

import json
import sys

from traceql.core.text import clean_text
from traceql.sources.vendor import api_words
from traceql.outputs.cells import shorten_middle, text_width
from traceql.outputs.numbers import human_ns, in_unit
from traceql.outputs.render import json_value, render
from traceql.outputs.tables import Layout, fill, terminal_width


def summary_time(ns, unit: str | None = None) -> str:
    """A time in `traceql summary`: as the reports print it ('4.01 ms', '17 us': three
    significant digits, never more than the source's resolution suggests); with unit, a plain
    number in that unit."""
    if ns is None:
        return "-"
    if unit is not None:
        return in_unit(ns, unit)
    return human_ns(ns)


def render_summary(summary, fmt: str = "table", out=None, unit: str | None = None, *, width: int | None = None,
                   wide: bool = False) -> None:
    """`traceql summary`: nvprof's layout for people (table), the rows for machines."""
    out = out or sys.stdout
    if fmt in ("csv", "tsv"):
        render(summary.rows, fmt, out)
        return
    if fmt == "json":
        doc = {"traces": summary.traces.to_pylist(), "gpus": summary.gpus.to_pylist(),
               "rows": summary.rows.to_pylist()}
        out.write(json.dumps(doc, default=json_value, indent=1) + "\n")
        return
    if fmt == "table" and width is None:
        width = terminal_width(out, wide)
    if wide or fmt != "table":
        width = None
    traces = summary.traces.to_pylist()
    gpus = summary.gpus.to_pylist()
    rows = summary.rows.to_pylist()
    groups = [[t] for t in traces] if summary.per_trace else [traces]
    for i, group in enumerate(groups):
        if i:
            out.write("\n")
        ids = {t["trace_id"] for t in group}
        for t in group:
            _trace_header(t, [g for g in gpus if g["trace_id"] == t["trace_id"]], out, fmt, unit, width)
        if not summary.per_trace and len(group) > 1:
            out.write(f"\nSections below: the {len(group)} traces of one job together (--per-trace splits them)\n")
        mine = [r for r in rows if not summary.per_trace or r["trace_id"] in ids]
        for section, what in (
                ("GPU activities", "all GPU activities (kernels, copies, memsets, graph executions)"),
                ("API calls", f"all {api_words(t['gpu_api'] for t in group)}")):
            part = [r for r in mine if r["section"] == section]
            out.write("\n" + fill(f"{section} (Time(%) = share of the summed time of {what}, not of wall time):",
                                   width, "") + "\n")
            if fmt == "markdown":
                _markdown_section(part, out, unit)
            else:
                _text_section(part, out, unit, width)


def source_label(source_format: str | None, exporter_version: str | None) -> str:
    """'nsys 2025.1.3.140', 'PyTorch profiler (Kineto)': the format's name once."""
    if exporter_version and source_format and source_format.lower() in exporter_version.lower():
        return exporter_version
    return " ".join(v for v in (source_format, exporter_version) if v)


def _trace_header(t, gpus, out, fmt, unit, width=None) -> None:
    version = source_label(t["source_format"], t["exporter_version"])
    bullet = "- " if fmt == "markdown" else "  "
    head, path = f"trace {t['trace_id']}: ", clean_text(t["path"])
    if width is not None and text_width(head + path) > width:  # the file's name kept, the middle of its folder cut
        path = shorten_middle(path, width - text_width(head))
    out.write(fill(f"{head}{path} ({version})", width, "") + "\n")
    if t["span_ns"] is None:
        out.write(f"{bullet}span: none (no event with a time)\n")
    else:
        span = summary_time(t["span_ns"], unit) + (f" {unit}" if unit else "")
        out.write(fill(f"{bullet}span: {span} from the first to the last event of any kind", width, bullet) + "\n")
    if not gpus:
        out.write(f"{bullet}GPUs: none recorded\n")
    idle = [g for g in gpus if not g["ops"]]
    if len(idle) > 1:  # GPUs of the machine the program did not use: one line, after the others
        gpus = [g for g in gpus if g["ops"]]
    for g in gpus:
        busy = summary_time(g["busy_ns"], unit) + (f" {unit}" if unit else "")
        pct = "-" if g["busy_pct"] is None else f"{g['busy_pct']:.2f}%"
        out.write(fill(f"{bullet}GPU {g['device_id']} {clean_text(g['device'] or '(name not recorded)')}: busy {busy} = {pct} "
                        f"of the span (time with at least one kernel, copy, memset or {t.get('gpu_api') or 'CUDA'} graph "
                        f"running; "
                        f"{g['ops']:,} operations)", width, bullet) + "\n")
        if g.get("idle_ns") is not None and t["span_ns"]:  # the temporal breakdown, report --by breakdown
            parts = ", ".join(f"{name} {100.0 * g[col] / t['span_ns']:.2f}%" for name, col in (
                ("compute", "compute_ns"), ("communication", "comm_ns"), ("memory only", "memory_ns"),
                ("idle", "idle_ns")))
            sub = "  - " if fmt == "markdown" else "    "
            out.write(fill(f"{sub}of the span: {parts} (report --by breakdown)", width, sub) + "\n")
    if len(idle) > 1:
        names = sorted({g["device"] or "(name not recorded)" for g in idle})
        ids = ", ".join(str(g["device_id"]) for g in idle)
        out.write(fill(f"{bullet}GPUs {ids} ({', '.join(names)}): no kernel, copy or memset", width, bullet) + "\n")


def _section_cells(rows, unit):
    time_head = "Time" if unit is None else f"Time({unit})"
    heads = ["Time(%)", time_head, "Calls", "Avg", "Min", "Max", "Name"]
    if unit is not None:
        heads[3:6] = [f"{h}({unit})" for h in heads[3:6]]
    cells = [[("-" if r["pct"] is None else f"{r['pct']:.2f}%"), summary_time(r["total_ns"], unit), f"{r['calls']:,}",
              summary_time(r["avg_ns"], unit), summary_time(r["min_ns"], unit), summary_time(r["max_ns"], unit),
              clean_text(r["name"]) if r["name"] is not None else "(unnamed)"] for r in rows]
    return heads, cells


def _text_section(rows, out, unit, width=None) -> None:
    heads, cells = _section_cells(rows, unit)
    if not cells:
        out.write("  (none)\n")
        return
    columns = [list(col) for col in zip(*cells)]
    layout = Layout(heads, [True] * 6 + [False], columns, width, underline=False)
    for line in layout.header():
        out.write(line + "\n")
    for line in layout.rows(columns):
        out.write(line + "\n")


def _markdown_section(rows, out, unit) -> None:
    heads, cells = _section_cells(rows, unit)
    out.write("\n| " + " | ".join(heads) + " |\n")
    out.write("|" + "|".join("---:" for _ in heads[:-1]) + "|---|\n")
    for c in cells:
        out.write("| " + " | ".join(v.replace("|", "\\|") for v in c) + " |\n")
