"""`traceql diff` for people: the sides, warnings, the verdict and the rule, the tables of totals
and of each section's changed rows (table or markdown), and the one line a failed gate prints.
The numbers come from traceql.diff; nothing here computes a statistic."""

from __future__ import annotations

import re

from traceql.analysis.diff import Diff, gate_rows
from traceql.analysis.diff_rules import GATED, GATE_EXIT, HEADLINE, SECTIONS, TITLES


def gate_message(d: "Diff", failed: list, pct: float) -> str:
    """One line for a failed gate: what is slower by more than PCT percent, beyond the noise."""
    per = " per iteration" if d.per_iteration else ""
    parts = []
    for r in failed[:5]:
        if r["section"] == "total":
            parts.append(f"{r['key']} {r['gate_pct']:+.2f}%{per}")
        else:
            of = "iteration time" if r["pairs"] else "GPU operation time"
            parts.append(f"{_KEY_NAMES[r['section']]} {r['key']} adds {r['gate_pct']:.2f}% of the {of}")
    more = f" (and {len(failed) - 5} more)" if len(failed) > 5 else ""
    return f"{'; '.join(parts)}{more}: slower by more than --gate {pct:g}% beyond the noise (exit {GATE_EXIT})"



def _signed_ns(v) -> str:
    from traceql.outputs.numbers import human_ns

    return "" if v is None else ("+" if v > 0 else "") + human_ns(v)


def _pct(v) -> str:
    return "" if v is None else f"{v:+.1f}%"


def _q(v) -> str:
    return "" if v is None else "<1e-4" if v < 1e-4 else f"{v:.2g}"


def _side_text(side: dict) -> str:
    from traceql.core.faults import printable

    traces = side["traces"]
    what = ", ".join(" ".join(x for x in (t["source_format"], t["exporter_version"]) if x) for t in traces[:1])
    if side["kind"] == "file":
        head = f"{printable(side['spec'])} ({what})"
        if side.get("reused"):
            head += f", trace {side['trace_id']} of {printable(side['db'])} (ingested already)"
    elif side["kind"] == "trace":
        head = f"trace {side['trace_id']} of {printable(side['db'])}: {printable(traces[0]['path'])} ({what})"
    else:
        head = f"{printable(side['spec'])}: {len(traces)} trace{'s' if len(traces) != 1 else ''} ({what})"
    its = side["iterations"]
    if not its:
        return head + ", no iterations detected"
    source = side["iteration_source"]
    how = source if source == "ProfilerStep" else f"{source}: {printable(side['iteration_family'])}"
    return head + f", {its} iterations ({how})"


def _head_text(r: dict) -> str:
    """'iteration time +8.5% (slower, q < 1e-4)': the percentage and the verdict that reads it."""
    why = r["verdict"]
    if r["q_value"] is not None and r["verdict"] in ("slower", "faster", "not significant"):
        why += f", q {'< 1e-4' if r['q_value'] < 1e-4 else '= ' + _q(r['q_value'])}"
    return f"{r['key']} {_pct(r['effect_pct'])} ({why})"


def verdict_text(d: Diff) -> str:
    """'regression: iteration time +6.9% (slower, q < 1e-4), GPU operations +8.1% (slower, ...)
    per iteration; kernel K adds 6.0% of the iteration time' and the rule."""
    rows = d.rows.to_pylist()
    head = [r for r in rows if r["section"] == "total" and r["key"] in HEADLINE and r["effect_pct"] is not None]
    moved = ", ".join(_head_text(r) for r in head)
    per = " per iteration" if d.per_iteration else ""
    adds = [r for r in gate_rows(rows, d.min_effect_pct, d.alpha) if r["section"] != "total"]
    added = "".join(f"; {_KEY_NAMES[r['section']]} {r['key']} adds {r['gate_pct']:.1f}% of the "
                    f"{'iteration time' if r['pairs'] else 'GPU operation time'}" for r in adds[:3])
    if len(adds) > 3:
        added += f" (and {len(adds) - 3} more)"
    paired = any(r["pairs"] for r in head)
    test = ("a paired trimmed t-test over the iterations" if paired else
            f"Yuen's test on {round(d.trim * 100)}% trimmed means")
    rule = (f"a change is called when {test} gives q < {d.alpha:g} (Benjamini-Hochberg) and it is at least "
            f"{d.min_effect_pct:g}%; Δ = B - A")
    return f"{d.verdict}: {moved or 'no GPU operations or iterations to compare'}{per}{added}; {rule}"


_TOTAL_COLUMNS = [("verdict", "verdict"), ("A", "time_a_ns"), ("B", "time_b_ns"), ("Δ", "delta_ns"),
                  ("Δ%", "effect_pct"), ("q", "q_value"), ("metric", "key")]
_ROW_COLUMNS = [("verdict", "verdict"), ("calls A", "calls_a"), ("calls B", "calls_b"), ("tmean A", "tmean_a_ns"),
                ("tmean B", "tmean_b_ns"), ("Δ%", "effect_pct"), ("Δtime", "delta_ns"), ("q", "q_value")]
_GATE_COLUMNS = [("+%iter", "gate_pct")]  # gated sections: the time the key adds, in % of the iteration
_KEY_NAMES = {"kernel": "kernel", "op": "op", "range": "path", "range_gpu": "path", "api": "call", "memcpy": "kind",
              "memset": "kind"}


def _display(rows: list[dict], section: str, markdown: bool):
    """The rows as a table of text for people: numbers right-aligned, the key last."""
    import pyarrow as pa

    from traceql.outputs.numbers import human_ns

    right = {b"align": b"right"}
    columns = _TOTAL_COLUMNS if section == "total" else _ROW_COLUMNS + (
        _GATE_COLUMNS if section in GATED else []) + [(_KEY_NAMES[section], "key")]
    cells = {h: [] for h, _ in columns}
    for r in rows:
        for head, name in columns:
            v = r[name]
            if name == "key":
                text = v if not markdown else "`" + v.replace("`", "'") + "`"
            elif name == "verdict":
                text = v
            elif name in ("calls_a", "calls_b"):
                text = f"{v or 0:,}"
            elif name == "delta_ns":
                text = _signed_ns(v)
            elif name.endswith("_pct"):
                text = _pct(v)
            elif name == "q_value":
                text = _q(v)
            else:
                text = "" if v is None else human_ns(v)
            cells[head].append(text)
    fields = [pa.field(h, pa.string(), metadata=None if name in ("key", "verdict") else right) for h, name in columns]
    return pa.table([pa.array(cells[h], pa.string()) for h, _ in columns], schema=pa.schema(fields))


def _counts(rows: list[dict]) -> str:
    found: dict = {}
    for r in rows:
        if r["changed"]:
            found[r["verdict"]] = found.get(r["verdict"], 0) + 1
    return ", ".join(f"{n} {v}" for v, n in found.items())


def write_text(d: Diff, out, fmt: str = "table", width: int | None = None, limit: int = 10, sections=None,
               show_all: bool = False) -> None:
    """Print a Diff for people (fmt 'table') or as markdown for a pull request: the sides, the
    verdict, the totals, then per section its changed rows (all rows with show_all), the largest
    time change first, at most LIMIT of them."""
    import io

    from traceql.analysis.analyze import wrapped
    from traceql.outputs.render import render

    md = fmt == "markdown"
    rows = d.rows.to_pylist()
    per = ", time per iteration" if d.per_iteration else ""
    if md:
        out.write(f"## traceql diff: {d.verdict}\n\n")
        out.write(f"- A (before): {_side_text(d.a)}\n- B (after): {_side_text(d.b)}\n\n")
        for warning in d.warnings:
            out.write(f"> **Warning:** {warning}.\n\n")
        out.write(f"**{verdict_text(d)}.**\n")
        for note in d.notes:
            out.write(f"\nNote: {note}.\n")
    else:
        out.write(wrapped(f"A (before): {_side_text(d.a)}", width) + "\n")
        out.write(wrapped(f"B (after):  {_side_text(d.b)}", width) + "\n")
        for warning in d.warnings:
            out.write(wrapped(f"Warning: {warning}.", width) + "\n")
        out.write(wrapped(f"Verdict: {verdict_text(d)}.", width) + "\n")
        for note in d.notes:
            out.write(wrapped(f"Note: {note}.", width) + "\n")
    for section in sections or SECTIONS:
        mine = [r for r in rows if r["section"] == section]
        if section == "total":  # every total that is not zero on both sides
            shown = [r for r in mine if (r["time_a_ns"] or 0) != 0 or (r["time_b_ns"] or 0) != 0]
            title = f"{TITLES[section]}{per}"
        else:
            if not mine:
                continue
            changed = [r for r in mine if r["changed"]]
            shown = mine if show_all else changed
            counts = _counts(mine)
            title = (f"{TITLES[section]}{per}: {len(changed)} of {len(mine):,} changed ({counts})" if changed
                     else f"{TITLES[section]}{per}: none of {len(mine):,} changed")
        more = max(0, len(shown) - limit) if section != "total" else 0
        shown = shown if section == "total" else shown[:limit]
        out.write(f"\n### {title}\n" if md else "\n" + wrapped(title, width) + "\n")
        if not shown:
            continue
        if md:
            out.write("\n")
        table = _display(shown, section, md)
        if md:
            render(table, "markdown", out)
        else:
            buf = io.StringIO()
            render(table, "table", buf, width=width)
            lines = buf.getvalue().splitlines()
            if lines and re.match(r"^[\d,]+ rows?", lines[-1].replace("\x1b[2m", "")):
                lines = lines[:-1]  # the row count: the title says it
            out.write("\n".join(lines) + "\n")
        if more:
            note = f"({more:,} more; --limit N shows more, --format csv every row)"
            out.write(f"\n{note}\n" if md else wrapped(note, width) + "\n")
