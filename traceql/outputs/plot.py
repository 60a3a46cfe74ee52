"""Bar charts of reports: `traceql plot`.

--by range is the figure of the K-FAC profiling workflow (seed 000): per NVTX range name, a
group of bars for its CPU time, the GPU kernel time and the memcpy time of the work launched
inside it (queries/range.sql), as totals or per instance; stacked, one bar per name with its
CPU time outside synchronization, synchronization, kernel and memcpy time end to end (the
figure's own layout: one step's parts add up). --by kernel ranks kernels by GPU
time, --by op PyTorch ops by forward and backward GPU time. Bars are horizontal so that long
names stay readable; names longer than a label's width are cut with an ellipsis. --by memory is
a line chart instead: each GPU's allocated (and reserved) device memory over time, as steps
(queries/_internal/memory_levels.sql), with the iterations (ProfilerStep ranges) marked.

matplotlib is an optional dependency (`pip install 'traceql[plot]'`). Figures are built with
the Agg canvas, never pyplot, so plotting works without a display and leaves no global state.
"""

from __future__ import annotations

import os
import textwrap
from dataclasses import dataclass
from pathlib import Path

from traceql.core.errors import UsageError
from traceql.outputs.cells import shorten_distinct

INSTALL_HINT = "plotting needs matplotlib, which is not installed: pip install 'traceql[plot]'"
IMAGE_FORMATS = (".png", ".svg", ".pdf")
STATS = ("total", "mean")
DEFAULT_LIMIT = 20
OUTLIER = 8  # a group of bars this many times longer than the next one is cut (linear axis)

# Colors of the series (matplotlib's tab10: distinguishable, also in grey print)
CPU, KERNEL, MEMCPY, FORWARD, BACKWARD, SYNC = "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#d62728"
RECOMPUTE, COMM = "#e377c2", "#7f7f7f"


@dataclass
class Chart:
    """What a figure shows: one group of bars per label, one bar per series."""

    title: str
    subtitle: str
    labels: list[str]
    series: list[tuple[str, str, list[float]]]  # (legend, color, value in ns per label)
    notes: list[str]  # text at the end of each group's longest bar ('' for none)
    log: bool = False  # a logarithmic time axis
    stacked: bool = False  # one bar per label, the series end to end


def plot(ws, by: str = "range", output: str | os.PathLike | None = None, *, trace_id: int | None = None,
         match=None, domain: str | None = None, stat: str = "total", limit: int | None = DEFAULT_LIMIT,
         title: str | None = None, log: bool = False, range=None, range_match=None,  # noqa: A002
         skip_first: int | None = None, stacked: bool = False):
    """A bar chart of report BY as a matplotlib Figure; written to `output` when given (the
    extension picks the format: .png, .svg or .pdf).

    by: 'range' (CPU, kernel and memcpy time per NVTX range name; match: words a range name must
    contain, any of them, ignoring case; domain: only this NVTX domain), 'kernel' (GPU time per
    kernel name) or 'op' (forward and backward GPU time per PyTorch op). stat: 'total' or
    'mean' (per range instance, kernel call or op call). limit: the N largest groups.
    title: the first title line (default: the trace's file name). log: a logarithmic time
    axis; on the default linear axis a group more than OUTLIER times longer than the next
    one (an 8 s ncclCommInitRank among millisecond ranges) is cut, its value printed, so that
    the other bars stay visible. range, range_match (--by kernel and op): only the work inside
    the NVTX ranges of these names or containing these words (traceql.query.rangefilter), the
    K-FAC walkthrough's drill-down into one range; kernels are then labelled with their share
    of the ranges' GPU time. skip_first (--by range): leave out the first N instances of each
    name, the warm-up (report --by range --skip-first). stacked (--by range): one bar per name,
    its CPU time outside synchronization, synchronization time, kernel time and memcpy time
    stacked: their sum, not wall time (GPU work overlaps the CPU time that launched it)."""
    if stat not in STATS:
        raise UsageError(f"--stat {stat}: choose total or mean")
    if output is not None and Path(output).suffix.lower() not in IMAGE_FORMATS:
        raise UsageError(f"{output}: the file extension picks the format: .png, .svg or .pdf")
    builders = available()
    if by not in builders:
        raise UsageError(f"--by {by}: plots are {', '.join(builders)}")
    if (match or domain is not None) and by != "range":
        raise UsageError("--match and --domain apply to --by range")
    if (skip_first is not None or stacked) and by != "range":
        raise UsageError("--skip-first and --stacked apply to --by range")
    if stacked and log:
        raise UsageError("--stacked draws to scale on a linear axis; --log applies to bars side by side")
    from traceql.query.rangefilter import selection

    ranged = selection(range, range_match)
    if ranged is not None and by == "range":
        raise UsageError("--range applies to --by kernel and op (the work inside a range); --by range --match "
                         "picks the ranges themselves")
    figure_cls, canvas_cls = _matplotlib()
    ws.check_trace(trace_id)
    if by == "memory":
        if ranged is not None or stat != "total" or skip_first or stacked:
            raise UsageError("--range, --stat, --skip-first and --stacked apply to the bar charts, not to --by memory")
        fig = _memory_figure(ws, trace_id, title, figure_cls, canvas_cls)
        if output is not None:
            Path(output).parent.mkdir(parents=True, exist_ok=True)
            fig.savefig(output, dpi=150, bbox_inches="tight")
        return fig
    extra = {"skip_first": skip_first, "stacked": stacked} if by == "range" else {}
    chart = builders[by](ws, trace_id=trace_id, match=list(match or ()), domain=domain, stat=stat, limit=limit,
                         ranged=ranged, **extra)
    chart.title = title or _trace_label(ws, trace_id)
    chart.log = bool(log)
    import matplotlib

    with matplotlib.rc_context({"text.parse_math": False, "text.usetex": False}):  # '$x$' in a name is text
        fig = _draw(chart, figure_cls, canvas_cls)
        if output is not None:
            Path(output).parent.mkdir(parents=True, exist_ok=True)
            fig.savefig(output, dpi=150, bbox_inches="tight")
    return fig


def available() -> dict:
    """The plots, by --by name: 'op' only when the op report exists."""
    from traceql.query.reports import REPORTS

    out = {"range": _range_chart, "kernel": _kernel_chart}
    if "op" in REPORTS:
        out["op"] = _op_chart
    out["memory"] = _memory_figure
    return out


def _matplotlib():
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise UsageError(INSTALL_HINT) from None
    return Figure, FigureCanvasAgg


# ------------------------------------------------------------------------------ data

def _range_chart(ws, trace_id, match, domain, stat, limit, ranged=None, skip_first=None, stacked=False) -> Chart:
    rows = [r for r in ws.report("range", trace_id=trace_id, match=match or None, domain=domain,
                                 skip_first=skip_first).to_pylist()
            if r["instances"]]  # the '[unattributed]' row has no instances: not a range
    if not rows:
        raise UsageError("nothing to plot: no NVTX ranges" + (f" match {', '.join(match)}" if match else "")
                         + ("" if trace_id is None else f" in trace {trace_id}"))
    mean = stat == "mean"
    for r in rows:
        n = r["instances"]
        r["cpu"] = (r["cpu_avg_ns"] if mean else r["cpu_total_ns"]) or 0
        r["kernel"] = r["gpu_kernel_ns"] / n if mean else r["gpu_kernel_ns"]
        r["memcpy"] = r["memcpy_ns"] / n if mean else r["memcpy_ns"]
        r["sync"] = min((r["sync_ns"] or 0) / n if mean else (r["sync_ns"] or 0), r["cpu"])
    if stacked:
        rows.sort(key=lambda r: (-(r["cpu"] + r["kernel"] + r["memcpy"]), r["name"]))
    else:
        rows.sort(key=lambda r: (-max(r["cpu"], r["kernel"], r["memcpy"]), r["name"]))
    shown = rows[:limit] if limit else rows
    what = "mean per instance" if mean else "total"
    if stacked:
        subtitle = (f"NVTX ranges: CPU time (outside and inside synchronization calls), then GPU kernel and memcpy "
                    f"time of the work launched inside them, stacked ({what}; the bar is their sum, not wall time)")
    else:
        subtitle = f"NVTX ranges: CPU time, and GPU time of the work launched inside them ({what})"
    if match:
        subtitle += f"\nnames containing {' or '.join(repr(w) for w in match)}"
    if skip_first:
        first = "first instance" if skip_first == 1 else f"first {skip_first} instances"
        subtitle += f"{'; ' if match else chr(10)}each name's {first} left out (warm-up)"
    if len(shown) < len(rows):
        subtitle += f"; the {len(shown)} longest of {len(rows)} names"
    labels = _labels([r["name"] for r in shown], [r["instances"] for r in shown], "×{}")
    if stacked:
        return Chart("", subtitle, labels,
                     [("CPU time outside synchronization", CPU, [r["cpu"] - r["sync"] for r in shown]),
                      ("synchronization time", SYNC, [r["sync"] for r in shown]),
                      ("GPU kernel time", KERNEL, [r["kernel"] for r in shown]),
                      ("memcpy time", MEMCPY, [r["memcpy"] for r in shown])],
                     [""] * len(shown), stacked=True)
    return Chart("", subtitle, labels,
                 [("CPU time (range duration)", CPU, [r["cpu"] for r in shown]),
                  ("GPU kernel time", KERNEL, [r["kernel"] for r in shown]),
                  ("memcpy time", MEMCPY, [r["memcpy"] for r in shown])],
                 [""] * len(shown))


def _kernel_chart(ws, trace_id, match, domain, stat, limit, ranged=None) -> Chart:
    column = "avg_ns" if stat == "mean" else "total_ns"
    table = ws.report("kernel", trace_id=trace_id, sort=column, **_range_options(ranged))
    rows = table.to_pylist()
    if not rows:
        raise UsageError("nothing to plot: no kernels" + ("" if trace_id is None else f" in trace {trace_id}")
                         + ("" if ranged is None else f" inside NVTX ranges {ranged.describe()}"))
    shown = rows[:limit] if limit else rows
    if ranged is None:
        subtitle = "Kernels by GPU time (" + ("mean per call" if stat == "mean" else "total") \
            + "; % of the summed time of all kernels)"
    else:
        subtitle = f"Kernels launched inside NVTX ranges {ranged.describe()}, by GPU time (" \
            + ("mean per call" if stat == "mean" else "total") + "; % of the ranges' GPU time)"
        for r in rows:
            r["pct"] = r["range_pct"]
    if len(shown) < len(rows):
        subtitle += f"; the {len(shown)} longest of {len(rows)} kernel names"
    names = [kernel_label(r["name"] or "[unnamed]") for r in shown]
    for i, n in enumerate(names):  # overloads alike without their parameters: keep the parameters
        if names.count(n) > 1:
            names = [_without_void(shown[j]["name"] or "[unnamed]") if names[j] == n else names[j]
                     for j in range(len(names))]
    notes = [f"{r['pct']:.1f}%" if r["pct"] is not None else "" for r in shown]
    return Chart("", subtitle, _labels(names, [r["calls"] for r in shown], "{} calls", width=70),
                 [("GPU time", KERNEL, [float(r[column]) for r in shown])], notes)


def _op_chart(ws, trace_id, match, domain, stat, limit, ranged=None) -> Chart:
    rows = [r for r in ws.report("op", trace_id=trace_id, sort="total_ns", **_range_options(ranged)).to_pylist()
            if r["calls"]]
    if not rows:
        raise UsageError("nothing to plot: no PyTorch ops with GPU work"
                         + ("" if trace_id is None else f" in trace {trace_id}"))
    mean = stat == "mean"
    parts = (("fwd", "fwd_ns"), ("bwd", "bwd_ns"), ("recompute", "recompute_ns"), ("comm", "comm_ns"))
    for r in rows:
        n = r["calls"]
        for key, column in parts:
            r[key] = (r.get(column) or 0) / n if mean else (r.get(column) or 0)
    rows.sort(key=lambda r: (-(r["fwd"] + r["bwd"] + r["recompute"] + r["comm"]), r["op"]))
    shown = rows[:limit] if limit else rows
    extra = [(key, label, color) for key, label, color in (("recompute", "recomputed (checkpointing)", RECOMPUTE),
                                                           ("comm", "communication", COMM))
             if any(r[key] for r in shown)]
    subtitle = "PyTorch ops: GPU time of their forward" + "".join(
        f", {label.split(' (')[0]}" for _, label, _ in extra) + " and backward kernels (" \
        + ("mean per call" if mean else "total") + ")"
    if ranged is not None:
        subtitle += f"\ninside NVTX ranges {ranged.describe()}"
    if len(shown) < len(rows):
        subtitle += f"; the {len(shown)} longest of {len(rows)} ops"
    return Chart("", subtitle, _labels([r["op"] for r in shown], [r["calls"] for r in shown], "{} calls"),
                 [("forward kernels", FORWARD, [r["fwd"] for r in shown]),
                  ("backward kernels", BACKWARD, [r["bwd"] for r in shown])]
                 + [(label, color, [r[key] for r in shown]) for key, label, color in extra],
                 [""] * len(shown))


def _range_options(ranged) -> dict:
    if ranged is None:
        return {}
    return {"range": list(ranged.names) or None, "range_match": list(ranged.words) or None}


def _memory_figure(ws, trace_id, title, figure_cls, canvas_cls):
    """Each GPU's allocated and reserved device memory of one trace over time, iterations marked."""
    from traceql.query import library

    if trace_id is None:
        ids = ws.trace_ids()
        if len(ids) != 1:
            raise UsageError("--by memory draws one trace: choose it with --trace ID")
        trace_id = ids[0]
    q = library.get("_internal/memory_levels")
    rows = ws.execute(q.sql, library.bind(q, {"trace_id": trace_id})).to_arrow_table().to_pylist()
    levels = [r for r in rows if r["kind"] == "level"]
    if not levels:
        raise UsageError(f"nothing to plot: no GPU memory allocations recorded in trace {trace_id} (a PyTorch "
                         "profiler trace recorded with profile_memory=True, or nsys --cuda-memory-usage=true)")
    top = max(max(r["allocated"], r["reserved"] or 0) for r in levels)
    unit, scale = _byte_unit(top)
    t_unit, t_scale = _unit(max(r["at_ns"] for r in rows) or 1)
    fig = figure_cls(figsize=(11, 4.5))
    canvas_cls(fig)
    ax = fig.add_subplot(1, 1, 1)
    colors = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")
    for i, device in enumerate(sorted({r["device_id"] for r in levels})):
        mine = [r for r in levels if r["device_id"] == device]
        xs = [r["at_ns"] / t_scale for r in mine]
        color = colors[i % len(colors)]
        peak = max(mine, key=lambda r: r["allocated"])
        ax.step(xs, [r["allocated"] / scale for r in mine], where="post", color=color, linewidth=1.2,
                label=f"GPU {device} allocated (peak {_bytes(peak['allocated'])})")
        if any(r["reserved"] is not None for r in mine):
            ax.step(xs, [(r["reserved"] or 0) / scale for r in mine], where="post", color=color, linewidth=1,
                    linestyle="--", label=f"GPU {device} reserved")
        ax.plot([peak["at_ns"] / t_scale], [peak["allocated"] / scale], marker="o", color=color, markersize=4)
    for r in rows:
        if r["kind"] == "iteration":
            ax.axvline(r["at_ns"] / t_scale, color="#bbbbbb", linewidth=0.8, zorder=0)
            ax.text(r["at_ns"] / t_scale, 1.0, " " + r["name"], transform=ax.get_xaxis_transform(), fontsize=7,
                    color="#666666", va="top", ha="left", rotation=90)
    ax.set_ylim(0, top / scale * 1.1)
    ax.set_xlabel(f"time since the trace's start ({t_unit})")
    ax.set_ylabel(f"device memory ({unit})")
    ax.grid(axis="y", color="#dddddd", linewidth=0.8)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.legend(loc="lower right", fontsize=8, frameon=False)
    ax.set_title("GPU memory over time: allocated (solid), reserved by the allocator (dashed) where recorded; "
                 "grey lines start iterations", fontsize=10, loc="left", color="#333333")
    fig.suptitle(title or _trace_label(ws, trace_id), fontsize=13, x=0.02, ha="left", fontweight="bold")
    fig.tight_layout()
    return fig


def _byte_unit(n: float) -> tuple[str, float]:
    return next((u, f) for u, f in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3), ("bytes", 1)) if n >= f or f == 1)


def _bytes(n: float) -> str:
    unit, scale = _byte_unit(n)
    return f"{n / scale:.3g} {unit}"


def _trace_label(ws, trace_id) -> str:
    traces = ws.traces().to_pylist()
    if trace_id is not None:
        traces = [t for t in traces if t["trace_id"] == trace_id]
    if len(traces) == 1:
        return Path(traces[0]["path"]).name
    return f"{len(traces)} traces"


# ------------------------------------------------------------------------------ labels

def _without_void(name: str) -> str:
    name = name.strip()
    return name[5:] if name.startswith("void ") else name


def kernel_label(name: str) -> str:
    """A demangled kernel name without 'void ' and its parameter list:
    'void gemm<float, 4>(float const*, int)' -> 'gemm<float, 4>'."""
    name = name.strip()
    if name.startswith("void "):
        name = name[5:]
    depth, cut = 0, None
    for i, ch in enumerate(name):
        if ch in "<(":
            if ch == "(" and depth == 0:
                cut = i
            depth += 1
        elif ch in ">)":
            depth = max(depth - 1, 0)
    if cut and name.endswith(")"):
        name = name[:cut]
    return name


def _labels(names: list[str], counts: list, count_format: str, width: int = 50) -> list[str]:
    """Axis labels: each name cut to `width` (in the middle, keeping where similar names
    differ: traceql.outputs.render.shorten_distinct), followed by its count; only names that are
    the same throughout are numbered."""
    cut = shorten_distinct([" ".join(str(n).split()) for n in names], width)
    seen: dict[str, int] = {}
    out = []
    for c, n in zip(cut, counts):
        seen[c] = seen.get(c, 0) + 1
        label = c if seen[c] == 1 else f"{c} #{seen[c]}"
        out.append(f"{label}  ({count_format.format(f'{n:,}')})" if n is not None else label)
    return out


# ------------------------------------------------------------------------------ drawing

def _unit(max_ns: float) -> tuple[str, float]:
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if max_ns >= scale:
            return unit, scale
    return "ns", 1.0


def _darker(color: str) -> str:
    """The series color at 70% brightness, for its value labels (readable on white)."""
    r, g, b = (int(color[i:i + 2], 16) for i in (1, 3, 5))
    return "#%02x%02x%02x" % (int(r * 0.7), int(g * 0.7), int(b * 0.7))


def _human(ns: float) -> str:
    unit, scale = _unit(ns)
    return f"{ns / scale:.3g} {unit}"


def _outlier_cap(chart: Chart) -> float | None:
    """Where the linear axis ends when a few groups of bars dwarf the rest: a group more than
    OUTLIER times longer than the next one (among the top third) is cut there; None: no cut."""
    n = len(chart.labels)
    peaks = sorted((max((values[i] for _, _, values in chart.series), default=0) for i in range(n)), reverse=True)
    for m in range(1, max(1, n // 3) + 1):
        if m < n and peaks[m] > 0 and peaks[m - 1] > OUTLIER * peaks[m]:
            return peaks[m] * 1.25
    return None


def _draw_stacked(chart: Chart, ax, scale: float) -> None:
    """One bar per label, the series end to end, each bar's sum printed at its end."""
    n = len(chart.labels)
    left = [0.0] * n
    for legend, color, values in chart.series:
        ax.barh(range(n), [v / scale for v in values], left=[x / scale for x in left], height=0.7,
                color=color, label=legend)
        left = [x + v for x, v in zip(left, values)]
    for y, total in enumerate(left):
        if total > 0:
            ax.text(total / scale, y, "  " + _human(total), va="center", ha="left", fontsize=7, color="#333333")


def _draw(chart: Chart, figure_cls, canvas_cls):
    n, k = len(chart.labels), len(chart.series)
    if chart.stacked:
        peak = max((sum(values[i] for _, _, values in chart.series) for i in range(n)), default=0) or 1
        return _finish(chart, figure_cls, canvas_cls, n, 1, peak, None)
    peak = max((v for _, _, values in chart.series for v in values), default=0) or 1
    cap = None if chart.log else _outlier_cap(chart)
    return _finish(chart, figure_cls, canvas_cls, n, k, peak, cap)


def _finish(chart: Chart, figure_cls, canvas_cls, n: int, k: int, peak: float, cap: float | None):
    """The figure: K bars per group (one when stacked), the axis to PEAK, or cut at CAP."""
    unit, scale = _unit(cap or peak)
    subtitle = chart.subtitle
    if cap is not None:
        subtitle += (f"\nbars longer than {_human(cap)} are cut (marked //, their values printed); "
                     "--log draws every bar to scale")
    row = 0.17 * k + 0.13  # inches per group
    height = 1.5 + row * n + (0.4 if chart.stacked else 0)  # stacked: a line for the legend below
    fig = figure_cls(figsize=(11, height))
    canvas_cls(fig)
    ax = fig.add_subplot(1, 1, 1)
    positive = [v for _, _, values in chart.series for v in values if v > 0]
    low = min(positive, default=1) / scale / 2 if chart.log else 0.0
    bar = 0.8 / k
    if chart.stacked:
        _draw_stacked(chart, ax, scale)
    for j, (legend, color, values) in enumerate([] if chart.stacked else chart.series):
        offsets = [i + (j - (k - 1) / 2) * bar for i in range(n)]
        shown = [min(v, cap) if cap is not None else v for v in values]
        ax.barh(offsets, [max(v / scale - low, 0) if v > 0 else 0 for v in shown], left=low, height=bar * 0.9,
                color=color, label=legend)
        for y, v, s, note in zip(offsets, values, shown, chart.notes):
            # every bar's value at its end: small bars next to a long one stay readable
            text = _human(v) + (f" ({note})" if note else "")
            if v > 0:
                ax.text(s / scale, y, "  " + text, va="center", ha="left", fontsize=7, color=_darker(color))
            if s < v:  # cut: a break mark near its end
                ax.text(s / scale * 0.93, y, "//", va="center", ha="center", fontsize=8, color="white",
                        fontweight="bold")
    ax.set_yticks(range(n))
    ax.set_yticklabels(chart.labels, fontsize=9)
    ax.invert_yaxis()  # the largest group on top
    ax.set_ylim(n - 0.5, -0.5)
    ax.set_xlabel(f"time ({unit}{', log scale' if chart.log else ''})")
    ax.grid(axis="x", color="#dddddd", linewidth=0.8)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    top = (cap or peak) / scale
    if chart.log:
        ax.set_xscale("log")
        ax.set_xlim(low, top * (4 if any(chart.notes) else 3))  # room for the values
    else:
        ax.set_xlim(0, top * (1.3 if any(chart.notes) else 1.15))
    if chart.stacked:  # below the figure, in the order the parts are stacked: never over a bar
        fig.legend(*ax.get_legend_handles_labels(), loc="lower left", ncol=len(chart.series), fontsize=9,
                   frameon=False)
    elif k > 1:
        ax.legend(loc="lower right", fontsize=9, frameon=False)
    ax.set_title("\n".join(textwrap.fill(line, 110) for line in subtitle.splitlines()),
                 fontsize=10, loc="left", color="#333333")
    fig.suptitle(chart.title, fontsize=13, x=0.02, ha="left", fontweight="bold")
    fig.tight_layout(rect=(0, 0.35 / height, 1, 1) if chart.stacked else None)
    return fig
