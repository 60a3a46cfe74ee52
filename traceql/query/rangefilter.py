"""`--range NAME` / `--range-match WORD`: a report of the GPU work (or API calls) inside NVTX ranges.

The K-FAC walkthrough's drill-down (seed 000, step 4: which kernels make up `upd_curv`'s GPU
time) and nsys stats' nvtx_kern_sum, as a filter every report of operations takes:

    traceql report --by kernel --range upd_curv
    traceql report --by api --range-match backward

A range matches when its full name, its grouping name (nvtx_range.group_name: 'aten::mm' for
'aten::mm, seq = 12, op_id = 345') or its nesting path is one of the --range names, or when its
name contains one of the --range-match words (ignoring case, like `report --by range --match`).

What a range holds follows the attribution rule (README, schemas/derive/op_range.sql): a GPU
operation whose launching call lies wholly inside the range and was made by any thread of the
range's process, at any depth; an API call likewise. An operation that several matching ranges
hold (nested instances, several names) is counted once. The SQL is in schemas/filters/: the
condition (range_ops.sql for GPU operations, range_calls.sql for API calls) replaces the
report query's `/* where */ TRUE` marker, next to a --where filter if there is one; its only
variable parts are parameters ($range_names, $range_words, $range_depth_cap) and the input's id
column, which comes from the report registry (traceql.query.registry, range_rule), never from the user.

Each row gets `range_pct`, its time as a share of the matching ranges' GPU time
(range_time.sql: the summed durations of the GPU operations they hold, each once), or for
`--by api` of their CPU time (the time at least one of them was open, per process).
Stored reports never answer a filtered report.
"""

from __future__ import annotations

from dataclasses import dataclass

from traceql.core.errors import UsageError
from traceql.core.resources import read_schema
from traceql.query.registry import RANGED


SHARE = "range_pct"


@dataclass(frozen=True)
class Selection:
    """The ranges a filter names: exact names (full, grouping or path) and words."""

    names: tuple[str, ...] = ()
    words: tuple[str, ...] = ()

    def describe(self) -> str:
        parts = [repr(n) for n in self.names] + [f"names containing {w!r}" for w in self.words]
        return " or ".join(parts)


def selection(names=None, words=None) -> Selection | None:
    """The filter given by --range (a name or several) and --range-match (words); None when
    neither is given."""
    names = _strings(names, "--range")
    words = _strings(words, "--range-match")
    if not names and not words:
        return None
    return Selection(names, words)


def _strings(value, option: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    out = []
    for v in value:
        if not isinstance(v, str):
            raise UsageError(f"{option}: give range names as text, not {type(v).__name__}")
        if not v.strip():
            raise UsageError(f"{option}: an empty name matches no range")
        out.append(v)
    return tuple(dict.fromkeys(out))


def check_report(by: str) -> None:
    if by not in RANGED:
        raise UsageError(f"--range applies to the reports of operations ({', '.join(RANGED)}), not --by {by}; "
                         "report --by range --match WORD picks ranges themselves")


def parameters(sel: Selection) -> dict:
    from traceql.core.settings import NVTX_DEPTH_CAP

    return {"range_names": list(sel.names) or None, "range_words": list(sel.words) or None,
            "range_depth_cap": NVTX_DEPTH_CAP}


def condition(by: str) -> str:
    """The SQL condition over report BY's input rows that keeps what the ranges hold."""
    key, fragment, _, _ = RANGED[by]
    if fragment == "range_gpu":  # gpu_op rows by op id; whole-graph executions by their launching call
        return (f"({_fragment('range_ops', 'op_id')} OR {_fragment('range_calls', 'api_id')})")
    return _fragment(fragment, key)


def _fragment(name: str, key: str) -> str:
    text = "\n".join(line for line in read_schema(f"filters/{name}.sql").splitlines()
                     if not line.lstrip().startswith("--"))
    return "(" + text.strip().replace("{key}", key) + ")"


def totals(ws, sel: Selection, trace_id: int | None) -> dict[int, dict]:
    """Per trace: the matching instances, their GPU time and CPU time (range_time.sql)."""
    params = {**parameters(sel), "trace_id": trace_id}
    rows = ws.execute(read_schema("filters/range_time.sql"), params).to_arrow_table().to_pylist()
    return {r["trace_id"]: r for r in rows}


def check_matches(ws, sel: Selection, found: dict[int, dict], trace_id: int | None) -> None:
    """A UsageError naming the closest range names when no range of the traces matches."""
    if any(r["instances"] for r in found.values()):
        return
    from traceql.core.names import closest

    names = [n for (n,) in ws.execute(
        "SELECT DISTINCT group_name FROM nvtx_range WHERE group_name IS NOT NULL AND (? IS NULL OR trace_id = ?) "
        "ORDER BY 1 LIMIT 100000", [trace_id, trace_id]).fetchall()]
    scope = "the workspace" if trace_id is None else f"trace {trace_id}"
    if not names:
        raise UsageError(f"--range: {scope} has no NVTX ranges")
    hints = [h for h in (closest(n, names) for n in sel.names + sel.words) if h]
    hint = f"; did you mean {', '.join(dict.fromkeys(hints))}?" if hints else ""
    raise UsageError(f"--range: no NVTX range of {scope} matches {sel.describe()}{hint} "
                     "(`traceql report --by range` lists them)")


def add_share(table, by: str, found: dict[int, dict], per_trace: bool):
    """TABLE with range_pct after its time column: the row's time as a percentage of the
    matching ranges' GPU time (CPU time for --by api), per trace with per_trace."""
    import pyarrow as pa

    _, _, column, denominator = RANGED[by]
    pooled = sum(r[denominator] or 0 for r in found.values())
    times = table.column(column).to_pylist()
    traces = table.column("trace_id").to_pylist() if per_trace and "trace_id" in table.column_names else None
    shares = []
    for i, t in enumerate(times):
        total = (found.get(traces[i]) or {}).get(denominator) if traces is not None else pooled
        shares.append(None if t is None or not total else 100.0 * t / total)
    at = table.column_names.index(column) + 1
    if "pct" in table.column_names and table.column_names.index("pct") >= at:
        at = table.column_names.index("pct") + 1
    return table.add_column(at, SHARE, pa.array(shares, pa.float64()))
