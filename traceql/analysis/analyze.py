"""`traceql analyze`: why the GPU is idle, what synchronizes, what to fix first.

Each rule is a query of the library, queries/analyze/<rule>.sql, that returns evidence rows:
the offending gaps, calls, copies, kernels or windows, each with the NVTX range and thread it
happened in and `recoverable_ns`, the time it cost (each rule says what that time is: GPU idle
time, or host time blocked in a call). Besides the usual query header (description,
parameters, defaults, columns, labels), a rule's header says how to present it:

    -- advice: what to do about it (one paragraph)
    -- finding: gap, gaps             (what one evidence row is, singular and plural)
    -- group: cause                   (optional: the column its findings are broken down by)
    -- total: wait_ns                 (optional: another column summed in the summary)
    -- show: at_ns, gap_ns, ...       (the columns of the evidence table for people)
    -- role: context                  (optional: context rather than a problem, e.g. iterations:
                                       printed first, not ranked among the findings)
    -- cost: memory                   (optional: the findings cost memory, not time (memory_leak,
                                       memory_peak, allocator_churn): their recoverable_ns is 0, the
                                       summary leaves it out, and --fail-on counts every finding)

analyze() runs the rules and returns an Analysis: one summary row per trace and rule, ranked
by recoverable time, and every rule's evidence rows as Arrow tables. A rule may abstain: a
row whose recoverable_ns is NULL and whose `note` says why (the iterations rule, when no
iteration pattern is clear); it is no finding. Rules overlap (a gap caused by a synchronization
shows in gpu_gaps and in sync_calls), so their recoverable times are not to be added up.
write_text() prints an Analysis for people (table) or for a pull request (markdown).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from traceql.query import library
from traceql.core.errors import UsageError

PREFIX = "analyze/"
FINDINGS_EXIT = 8  # exit code of `traceql analyze --fail-on RULE` when RULE has findings

_META = re.compile(r"^--\s*(advice|finding|group|total|show|role|cost):\s*(.+)$")


@dataclass
class Rule:
    name: str                  # e.g. 'gpu_gaps'
    query: library.Query
    advice: str = ""
    finding: tuple[str, str] = ("finding", "findings")
    group: str | None = None
    total: str | None = None
    show: list[str] = field(default_factory=list)
    context: bool = False
    memory: bool = False       # `-- cost: memory`: findings cost memory, not time

    @property
    def description(self) -> str:
        return self.query.description

    @property
    def thresholds(self) -> list[str]:
        """The rule's parameters other than trace_id: its thresholds and switches."""
        return [p for p in self.query.params if p != "trace_id"]


def rules() -> dict[str, Rule]:
    """The rules of traceql analyze, by name, in the library's order."""
    out = {}
    for name, q in library.library().items():
        if not name.startswith(PREFIX):
            continue
        meta = {}
        for line in q.sql.splitlines():
            m = _META.match(line)
            if m:
                meta[m.group(1)] = m.group(2).strip()
        finding = tuple(part.strip() for part in meta.get("finding", "finding, findings").split(",", 1))
        out[name[len(PREFIX):]] = Rule(
            name[len(PREFIX):], q, meta.get("advice", ""),
            finding if len(finding) == 2 else (finding[0], finding[0] + "s"),
            meta.get("group"), meta.get("total"),
            [c.strip() for c in meta.get("show", "").split(",") if c.strip()],
            meta.get("role") == "context", meta.get("cost") == "memory")
    return out


def rule(name: str) -> Rule:
    known = rules()
    key = name[len(PREFIX):] if name.startswith(PREFIX) else name
    if key not in known:
        from traceql.core.names import closest

        best = closest(key, list(known))
        hint = f"did you mean {best}? " if best else ""
        raise UsageError(f"--rule {name}: no such rule; {hint}rules: {', '.join(known)}")
    return known[key]


@dataclass
class Analysis:
    """What `traceql analyze` prints.

    findings: one row per trace and rule, most recoverable time first: trace_id, rule, role
      ('finding', or 'context' for a rule that describes rather than finds problems:
      iterations), findings (evidence rows that are findings), recoverable_ns (their summed
      recoverable time), span_ns (the trace's span), recoverable_pct (recoverable_ns as a
      percentage of span_ns), summary (the count and totals), breakdown (the same by the
      rule's group column, largest first), thresholds (the parameter values used), note (why
      the rule abstained, else NULL), advice.
    evidence: rule name -> its evidence rows (all columns of queries/analyze/<rule>.sql),
      every trace asked for, most recoverable first.
    rules: the Rule objects run, by name."""

    findings: "pa.Table"
    evidence: dict
    rules: dict
    params: dict

    def failed(self, names) -> list[str]:
        """Those of the rules NAMES ('any': every rule run) with at least one finding of
        recoverable time above zero (of a memory rule: at least one finding)."""
        import pyarrow.compute as pc

        wanted = list(self.rules) if "any" in names else [rule(n).name for n in names]
        out = []
        for name in wanted:
            if name not in self.evidence:
                raise UsageError(f"--fail-on {name}: the rule was not run (see --rule)")
            rec = self.evidence[name].column("recoverable_ns")
            hit = pc.is_valid(rec) if self.rules[name].memory else pc.greater(rec.fill_null(0), 0)
            if pc.sum(hit).as_py():
                out.append(name)
        return out


def analyze(ws, rule_names=None, trace_id: int | None = None, params: dict | None = None) -> Analysis:
    """Run the rules RULE_NAMES (default: all) on trace TRACE_ID (default: every trace) with
    PARAMS, a dict of rule parameters ({'min_gap_ns': 500000}) given to every rule that declares
    them; a parameter no rule run declares is an error."""
    import pyarrow as pa

    selected = list(rules().values()) if not rule_names else [rule(n) for n in dict.fromkeys(rule_names)]
    params = {p: _typed(p, v, selected) for p, v in (params or {}).items()}
    declared = {p for r in selected for p in r.thresholds}
    unknown = sorted(set(params) - declared)
    if unknown:
        raise UsageError(f"--param {unknown[0]}: no rule run has this parameter; parameters: "
                         + ", ".join(sorted(declared)))
    ws.check_trace(trace_id)
    spans = {r["trace_id"]: r["duration"] for r in ws.execute(
        "SELECT trace_id, duration FROM trace WHERE ? IS NULL OR trace_id = ? ORDER BY trace_id",
        [trace_id, trace_id]).to_arrow_table().to_pylist()}
    from traceql.core.results import tidy

    evidence, used, rows = {}, {}, []
    # DuckDB runs an ASOF join as a nested loop when it expects a small left side; the rules'
    # left sides (gaps, calls, chunks) can be large: keep them the sort-based ASOF joins. (Spark
    # has no ASOF join: traceql.engines.transpile writes each as equi-joins.)
    duckdb = getattr(ws, "engine", "duckdb") == "duckdb"
    if duckdb:
        ws.execute("SET asof_loop_join_threshold = 0")
    try:
        for r in selected:
            values = {p: v for p, v in params.items() if p in r.query.params}
            values["trace_id"] = trace_id
            bound = library.bind(r.query, values)
            used[r.name] = {p: bound[p] for p in r.thresholds}
            table = tidy(ws.execute(r.query.sql, bound).to_arrow_table())
            evidence[r.name] = table
            for tid, span in spans.items():
                rows.append(_summary_row(r, table, tid, span, used[r.name]))
    finally:
        if duckdb:
            ws.execute("RESET asof_loop_join_threshold")
    rows.sort(key=lambda x: (x["trace_id"], x["role"] == "context", -(x["recoverable_ns"] or 0), -x["findings"],
                             x["rule"]))
    schema = pa.schema([("trace_id", pa.int32()), ("rule", pa.string()), ("role", pa.string()),
                        ("findings", pa.int64()), ("recoverable_ns", pa.int64()), ("span_ns", pa.int64()),
                        ("recoverable_pct", pa.float64()), ("summary", pa.string()), ("breakdown", pa.string()),
                        ("thresholds", pa.string()), ("note", pa.string()), ("advice", pa.string())])
    findings = pa.Table.from_pylist(rows, schema=schema)
    return Analysis(findings, evidence, {r.name: r for r in selected}, used)


def _typed(param: str, value, selected: list[Rule]):
    """A parameter given as text ('true', '500000', from --param) in the type of its default."""
    defaults = [r.query.defaults[param] for r in selected if param in r.query.defaults]
    if not isinstance(value, str) or not defaults:
        return value
    if isinstance(defaults[0], bool):
        if value.lower() in ("true", "false", "1", "0", "yes", "no"):
            return value.lower() in ("true", "1", "yes")
        raise UsageError(f"--param {param}={value}: expected true or false")
    if isinstance(defaults[0], (int, float)):
        raise UsageError(f"--param {param}={value}: expected a number")
    return value


def _summary_row(r: Rule, table, trace_id: int, span: int | None, used: dict) -> dict:
    """The summary of rule R's evidence TABLE for one trace (Arrow compute: evidence can be
    hundreds of thousands of rows)."""
    import pyarrow.compute as pc

    mine = table.filter(pc.equal(table.column("trace_id"), trace_id))
    found = mine.filter(pc.is_valid(mine.column("recoverable_ns")))
    notes = []
    if "note" in mine.column_names:
        notes = [n for n in mine.filter(pc.is_null(mine.column("recoverable_ns"))).column("note").to_pylist() if n]
    recoverable = pc.sum(found.column("recoverable_ns")).as_py() or 0
    summary, breakdown = _summary_text(r, found, r.query.labels) if found.num_rows else (None, None)
    return {
        "trace_id": trace_id, "rule": r.name, "role": "context" if r.context else "finding",
        "findings": found.num_rows, "recoverable_ns": recoverable, "span_ns": span,
        "recoverable_pct": None if not span or r.memory else 100.0 * recoverable / span,
        "summary": summary, "breakdown": breakdown,
        "thresholds": ", ".join(f"{p}={_value_text(p, v)}" for p, v in used.items()),
        "note": notes[0] if notes else None,
        "advice": r.advice,
    }


def _summary_text(r: Rule, found, labels: dict) -> tuple[str, str | None]:
    """('62 gaps, recoverable 521 ms', 'host: 20 gaps, 264 ms; launch: 16 gaps, 202 ms; ...') for
    the evidence rows FOUND (an Arrow table)."""
    import pyarrow.compute as pc

    from traceql.outputs.numbers import human_ns

    def amounts(n, recoverable, total, short=False):
        noun = r.finding[0] if n == 1 else r.finding[1]
        parts = [f"{n:,} {noun}"]
        if not r.memory:
            parts.append(human_ns(recoverable) if short else f"recoverable {human_ns(recoverable)}")
        if r.total:
            label = labels.get(r.total, r.total[:-3] if r.total.endswith("_ns") else r.total)
            parts.append(f"{label} {human_ns(total) if r.total.endswith('_ns') else _count(r.total, total)}")
        return ", ".join(parts)

    def total_of(t):
        return (pc.sum(t.column(r.total)).as_py() or 0) if r.total else None

    summary = amounts(found.num_rows, pc.sum(found.column("recoverable_ns")).as_py() or 0, total_of(found))
    breakdown = None
    if r.group:
        aggs = [("recoverable_ns", "sum"), ("recoverable_ns", "count")] + ([(r.total, "sum")] if r.total else [])
        grouped = found.group_by(r.group).aggregate(aggs).to_pylist()
        ranked = sorted(grouped, key=lambda g: (-(g["recoverable_ns_sum"] or 0), str(g[r.group])))
        breakdown = "; ".join(
            f"{'-' if g[r.group] is None else g[r.group]}: "
            + amounts(g["recoverable_ns_count"], g["recoverable_ns_sum"] or 0,
                      (g[f"{r.total}_sum"] or 0) if r.total else None, short=True)
            for g in ranked)
    return summary, breakdown


def _count(name: str, n) -> str:
    from traceql.outputs.numbers import human_bytes

    return human_bytes(n) if name.endswith("bytes") else f"{n:,}"


def _value_text(param: str, value) -> str:
    from traceql.outputs.numbers import human_ns

    if value is None:
        return "-"
    if param.endswith("_ns") and isinstance(value, (int, float)):
        return human_ns(value)
    if param.endswith("_pct"):
        return f"{value}%"
    return str(value).lower() if isinstance(value, bool) else str(value)


# ------------------------------------------------------------------------------ for people

def write_text(analysis: Analysis, traces: list[dict], out, fmt: str = "table", width: int | None = None,
               limit: int = 5, gpus: list[dict] | None = None) -> None:
    """Print an Analysis for people (fmt 'table') or as markdown for a pull request: per trace,
    its GPUs' temporal breakdown (GPUS: rows of `report --by breakdown --per-trace`), the
    context rules (iterations), then the rules with findings, most recoverable time first, each
    with its summary, breakdown, advice and top LIMIT evidence rows; then the rules without
    findings and those that abstained."""
    from traceql.outputs.numbers import human_ns

    md = fmt == "markdown"
    rows = analysis.findings.to_pylist()
    advised: set = set()  # rules whose advice was printed (for an earlier trace)
    if not traces:
        out.write("no traces in this workspace: nothing to analyze\n")
    for i, t in enumerate(traces):
        tid = t["trace_id"]
        mine = [x for x in rows if x["trace_id"] == tid]
        if i:
            out.write("\n")
        span = "no events" if t["duration"] is None else f"span {human_ns(t['duration'])}"
        from traceql.core.text import clean_text

        path = clean_text(t["path"])
        if not md and width:  # a path longer than the terminal keeps both ends (continuation indent 2)
            from traceql.outputs.cells import shorten_middle
            path = shorten_middle(path, width - 2)
        head = f"trace {tid} ({span}): {path}"
        out.write(f"## {head}\n\n" if md else wrapped(head, width) + "\n")
        for g in (gpus or []):
            if g.get("trace_id") == tid:
                line = (f"GPU {g['device_id']}: compute {g['compute_pct']:.2f}%, communication {g['comm_pct']:.2f}%, "
                        f"memory only {g['memory_pct']:.2f}%, idle {g['idle_pct']:.2f}% of the span")
                out.write(f"- {line}\n" if md else wrapped(line, width, "  ") + "\n")
        for x in [x for x in mine if x["role"] == "context" and x["findings"]]:
            _rule_text(analysis, x, None, t, out, fmt, width, limit, advised)
        hits = [x for x in mine if x["role"] != "context" and x["findings"]]
        if hits:
            note = ("Findings, most recoverable time first (rules overlap: the same idle time can count in "
                    "several; each rule's recoverable time is defined with its columns: traceql queries "
                    "analyze/RULE)")
            out.write(("\n" + note + "\n") if md else "\n" + wrapped(note, width) + "\n")
        for n, x in enumerate(hits, 1):
            _rule_text(analysis, x, n, t, out, fmt, width, limit, advised)
        quiet = [x for x in mine if not x["findings"] and not x["note"]]
        if quiet:
            names = ", ".join(f"{x['rule']} ({x['thresholds']})" for x in quiet)
            out.write("\n" + wrapped(f"No findings: {names}", width) + "\n")
        for x in mine:
            if x["note"] and not x["findings"]:
                out.write("\n" + wrapped(f"{x['rule']} abstains: {x['note']}", width) + "\n")


def _rule_text(analysis: Analysis, x: dict, n: int | None, t: dict, out, fmt: str, width, limit: int,
               advised: set) -> None:
    from traceql.core.text import clean_text

    x = {**x, **{k: clean_text(x[k]) for k in ("summary", "breakdown") if x.get(k)}}  # names of the trace
    r = analysis.rules[x["rule"]]
    advice = x["advice"] if r.name not in advised else f"as for trace {min(advised_by(analysis, r.name))} above"
    advised.add(r.name)
    share = x["recoverable_pct"]
    # above 100 %: a multi-GPU trace's idle or copy time, summed over its GPUs
    why = ": the times of its GPUs, streams or threads add up" if (share or 0) > 100 else ""
    pct = "" if share is None else f" ({share:.2f}% of the trace span{why})"
    number = f"{n}. " if n is not None else ""
    if fmt == "markdown":
        out.write(f"\n### {number}`{x['rule']}`: {x['summary']}{pct}\n\n")
        if x["breakdown"]:
            out.write(f"By {r.query.labels.get(r.group, r.group)}: {x['breakdown']}.\n\n")
        out.write(f"Thresholds: {x['thresholds']}.\n\nWhat to do: {advice}\n\n")
    else:
        out.write("\n" + wrapped(f"{number}{x['rule']}: {x['summary']}{pct}", width) + "\n")
        if x["breakdown"]:
            out.write(wrapped(f"by {r.query.labels.get(r.group, r.group)}: {x['breakdown']}", width, "   ") + "\n")
        out.write(wrapped(f"thresholds: {x['thresholds']}", width, "   ") + "\n")
        out.write(wrapped(f"what to do: {advice}", width, "   ") + "\n")
    _evidence(analysis, r, t["trace_id"], out, fmt, width, limit, x["findings"])


def advised_by(analysis: Analysis, rule_name: str) -> list[int]:
    """The traces for which RULE_NAME has findings (its advice is printed with the first)."""
    return [x["trace_id"] for x in analysis.findings.to_pylist() if x["rule"] == rule_name and x["findings"]]


def _evidence(analysis: Analysis, r: Rule, trace_id: int, out, fmt: str, width, limit: int, total: int) -> None:
    import pyarrow.compute as pc

    from traceql.outputs.numbers import humanize
    from traceql.outputs.render import render

    table = analysis.evidence[r.name]
    table = table.filter(pc.and_(pc.equal(table.column("trace_id"), trace_id),
                                 pc.is_valid(table.column("recoverable_ns"))))
    shown = [c for c in r.show if c in table.column_names]
    part = table.select(shown).slice(0, limit)
    if fmt == "markdown":
        render(part, "markdown", out, transform=lambda t: humanize(t, labels=r.query.labels))
        more = f"{total - part.num_rows:,} more: `traceql analyze --rule {r.name} --format csv`" \
            if total > part.num_rows else ""
        out.write(f"\n{more}\n" if more else "")
        return
    import io

    buf = io.StringIO()
    render(part, "table", buf, width=None if width is None else width - 3,
           transform=lambda t: humanize(t, labels=r.query.labels))
    lines = buf.getvalue().splitlines()
    if lines and re.match(r"^[\d,]+ rows?", lines[-1].replace("\x1b[2m", "")):
        lines = lines[:-1]  # the row count: said below, with the rows not shown
    for line in lines:
        out.write("   " + line + "\n")
    if total > part.num_rows:
        out.write(wrapped(f"({part.num_rows} of {total:,} shown, most recoverable first; all: "
                           f"traceql analyze --rule {r.name} --format csv)", width, "   ") + "\n")


_AMOUNT = re.compile(r"(\d) (ns|us|ms|s|B|kB|MB|GB|TB)\b")


def wrapped(text: str, width: int | None, indent: str = "") -> str:
    """TEXT wrapped to WIDTH, continuation lines indented two more; a number is never parted
    from its unit ('30.3 ms')."""
    if width is None:
        return indent + text
    import textwrap

    glued = _AMOUNT.sub("\\1\u00a0\\2", text)
    return textwrap.fill(glued, width, initial_indent=indent, subsequent_indent=indent + "  ",
                         break_long_words=False, break_on_hyphens=False).replace("\u00a0", " ")
