"""Reports: named queries of the library (queries/<name>.sql) with the options every report
shares: one trace or all, rows per trace, a --where filter over the report's input view,
sorting, a row limit and column selection. `traceql summary` (nvprof's overview) is here too.

Everything returns Arrow tables; the CLI only prints them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from traceql.query import library
from traceql.core.errors import UsageError
from traceql.core.results import read_whole
from traceql.core.units import MAX_LIMIT
from traceql.core.resources import contract_docs
from traceql.query.registry import GROUPINGS, OPTIONS, REPORTS

if TYPE_CHECKING:
    import pyarrow as pa

# pyarrow.compute (sorting) and traceql.query.where (sqlglot) are imported when --sort, --where or
# the per-trace summary need them: most reports do not, and they add to every CLI call.


def blurb(by: str) -> str:
    """The report in one line of at most 60 characters (the registry's blurb, else its query's description cut)."""
    if REPORTS[by].blurb is not None:
        return REPORTS[by].blurb
    text = report_query(by).description.split(":", 1)[-1].strip()
    return text if len(text) <= 60 else text[:59].rstrip() + "…"


def report_query(by: str) -> library.Query:
    if by not in REPORTS:
        raise UsageError(f"--by {by}: no such report; reports: {', '.join(REPORTS)}")
    return library.get(REPORTS[by].query)


def report_columns(by: str, **params) -> list[str]:
    """The columns report BY shows with these parameters, in order."""
    q = report_query(by)
    values = {**REPORTS[by].defaults, **params}
    return [c.name for c in q.columns.values() if c.shown(values)]


def input_columns(view: str) -> list[str]:
    return [c.name for c in contract_docs()[view].columns]


def run_report(ws, by: str, trace_id: int | None = None, per_trace: bool = False, where: str | None = None,
               sort: str | None = None, limit: int | None = None, columns=None, recompute: bool = False,
               range=None, range_match=None, rows: bool = False, **params) -> pa.Table:  # noqa: A002 - `range` is the option's name
    """Report BY as an Arrow table.

    trace_id: only that trace. per_trace: rows split by trace (a trace_id column first;
    percentages within the trace; limit counts per trace). where: a SQL boolean expression
    over the report's input view (see traceql.query.where). sort: a column of the report,
    optionally ':asc' or ':desc' (default: descending for numbers, ascending for text);
    ties keep the report's own order. columns: the columns to keep, in this order; 'all' for
    every column (the default: every column, or the set the query's '-- shown:' line names).
    recompute: compute the report from the contract tables even when the rows ingest stored
    for it can answer (traceql.store.stored; they are the same rows). range, range_match: only the
    work the NVTX ranges of these names (full, grouping or path) or containing these words
    hold, with a range_pct column (traceql.query.rangefilter). rows: a
    traceql.core.results.RowTable instead when the report needs no Arrow (no sort, range or
    per-trace limit; columns of plain types), for printing it: the command then starts without
    pyarrow (0.05-0.2 s). Other keyword arguments are the query's parameters (e.g. with_dims for
    kernel)."""
    from traceql.query import rangefilter

    q = report_query(by)
    check_options(by, params)
    check_limit(limit)
    values = {**REPORTS[by].defaults, **{k: v for k, v in params.items() if v is not None}}
    if "match" in values and not values["match"]:
        values.pop("match")
    if by == "straggler" and values.get("measure") not in ("time", "compute"):
        raise UsageError(f"measure {values.get('measure')!r}: 'time' (the ranges' durations) or 'compute' (the "
                         "compute kernel time launched inside them)")
    values["trace_id"] = trace_id
    values["per_trace"] = bool(per_trace)
    ranged = rangefilter.selection(range, range_match)
    if ranged is not None:
        rangefilter.check_report(by)
    if (where is not None or ranged is not None) and "filtered" in q.params:
        values["filtered"] = True
    bound = library.bind(q, values)
    rows = rows and sort is None and ranged is None and not (per_trace and limit is not None)

    table = None
    if where is None and ranged is None and not recompute:
        stored_report = getattr(ws, "stored_report", None)  # the workspace file's (traceql.store), not Spark's
        if stored_report is not None:
            table = stored_report(by, q, bound, limit=limit if sort is None else None, rows=rows)
    if table is None:
        found = None
        if ranged is not None:
            found = rangefilter.totals(ws, ranged, trace_id)
            rangefilter.check_matches(ws, ranged, found, trace_id)
        table = _compute(ws, q, bound, where, by if ranged is not None else None,
                         rangefilter.parameters(ranged) if ranged is not None else None, rows=rows)
        if ranged is not None:
            table = rangefilter.add_share(table, by, found, per_trace)

    values["range"] = ranged is not None  # shows range_pct ('-- column range_pct if range')
    shown = [c.name for c in q.columns.values() if c.shown(values)]
    missing = set(shown) - set(table.column_names)
    if missing:  # the query and its documentation disagree: a bug, not a usage error
        raise RuntimeError(f"queries/{q.name}.sql: documented columns missing from its result: {sorted(missing)}")
    table = table.select(shown)
    aliases = header_aliases(shown, q.labels)
    table = order_and_limit(table, sort, limit, per_trace, aliases)
    return select_columns(table, default_columns(q, shown) if columns is None else columns, aliases)


def check_options(by: str, params: dict) -> None:
    """A UsageError for a report-specific option given to a report it does not apply to
    (registry.OPTIONS: --with-dims is kernel's), or a --group the report cannot group by. An
    option whose value is None or an empty list is not given."""
    for param, value in params.items():
        if value is None or (isinstance(value, (list, tuple)) and not value) or param not in OPTIONS:
            continue
        option = OPTIONS[param]
        if by not in option.reports:
            raise UsageError(f"{option.flag} applies to --by {' or '.join(option.reports)} only")
    group_by = params.get("group_by")
    if by in GROUPINGS and group_by is not None and group_by not in GROUPINGS[by]:
        raise UsageError(f"--group {group_by}: --by {by} groups by {' or '.join(GROUPINGS[by])}")


def default_columns(q, shown: list[str]) -> list[str] | None:
    """The columns a report shows when none are asked for: its '-- shown:' set (PyProf's eight
    for kernel-op), with trace_id first and range_pct last when they apply; None: every column."""
    if q.shown is None:
        return None
    return ([c for c in shown if c == "trace_id"] + [c for c in q.shown if c in shown]
            + [c for c in shown if c == "range_pct"])


def empty_note(ws, by: str, trace_id: int | None = None) -> str | None:
    """Why report BY has no rows, when the reason is that the traces lack what it reports on
    (the CLI prints it for an empty table); None otherwise."""
    if by in ("op", "kernel-op", "layer"):
        n = ws.execute("SELECT count(*) FROM torch_op WHERE ? IS NULL OR trace_id = ?", [trace_id, trace_id]).fetchone()[0]
        if n == 0:
            scope = "this workspace" if trace_id is None else f"trace {trace_id}"
            return (f"no PyTorch op ranges in {scope}: --by {by} needs the NVTX ranges of "
                    "torch.autograd.profiler.emit_nvtx() or nsys profile --pytorch=autograd-nvtx "
                    "(or PyProf markers); `traceql report --by range` shows the NVTX ranges there are")
    if by == "memory":
        n = ws.execute("SELECT count(*) FROM memory_event WHERE ? IS NULL OR trace_id = ?", [trace_id, trace_id]).fetchone()[0]
        if n == 0:
            scope = "this workspace" if trace_id is None else f"trace {trace_id}"
            return (f"no memory allocations recorded in {scope}: --by memory needs a PyTorch profiler trace "
                    "recorded with profile_memory=True or an nsys profile captured with --cuda-memory-usage=true")
    return None


def _compute(ws, q, bound: dict, where: str | None, ranged_by: str | None = None,
             range_params: dict | None = None, rows: bool = False) -> pa.Table:
    sql = q.sql
    if where is not None or ranged_by is not None:
        from traceql.query.where import compile_where, splice

        fragments = []
        if where is not None:
            fragment, where_params = compile_where(where, input_columns(q.input), q.input)
            fragments.append(fragment)
            bound = {**bound, **where_params}
        if ranged_by is not None:  # traceql.query.rangefilter: the package's SQL, values bound as parameters
            from traceql.query.rangefilter import condition

            fragments.append(condition(ranged_by))
            bound = {**bound, **range_params}
        sql = splice(sql, " AND ".join(fragments))
    try:
        return read_whole(ws.execute(sql, bound), rows)
    except UsageError as exc:
        if where is None:
            raise
        raise UsageError(f"--where {where!r}: {exc}") from None


def header_aliases(columns: list[str], labels: dict[str, str]) -> dict[str, str]:
    """What tables print as headers, mapped to the columns, so that --sort and -c take both:
    'avg' and 'avg_ms' or 'avg ms' (--unit ms) for avg_ns, 'cpu total' for cpu_total_ns, a label
    ('Time(%) of all kernels', or its first words 'Time(%)') for pct; keys in lower case."""
    out: dict[str, str] = {}
    for c in columns:
        if c.endswith("_ns"):
            for shown in [c[:-3]] + [f"{c[:-3]}_{u}" for u in ("us", "ms", "s")]:
                out.setdefault(shown.lower(), c)
        if c in labels:
            out.setdefault(labels[c].lower(), c)
            out.setdefault(labels[c].split(" of ")[0].strip().lower(), c)
    for key, c in list(out.items()) + [(c.lower(), c) for c in columns]:  # as tables print them: 'avg ms', 'cpu total'
        out.setdefault(key.replace("_", " "), c)
    return {k: v for k, v in out.items() if k not in columns}


def resolve_column(name: str, columns: list[str], aliases: dict[str, str] | None, option: str) -> str:
    """The report column `name` means: a column, or what a table header shows for one."""
    if name in columns:
        return name
    folded = {c.lower(): c for c in columns}
    hit = folded.get(name.strip().lower()) or (aliases or {}).get(name.strip().lower())
    if hit is not None:
        return hit
    from traceql.core.names import closest

    best = closest(name, list(columns) + list(aliases or {}))
    hint = f"did you mean {(aliases or {}).get(best, best)}? " if best else ""
    raise UsageError(f"{option}: no column {name!r} in this report; {hint}columns: {', '.join(columns)}")


def check_limit(limit: int | None) -> None:
    """UsageError when LIMIT is not a row count from 0 to MAX_LIMIT (None: no limit)."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit <= MAX_LIMIT):
        raise UsageError(f"limit {limit!r}: a number of rows from 0 to {MAX_LIMIT}")


def order_and_limit(table: pa.Table, sort: str | None, limit: int | None, per_trace: bool,
                    aliases: dict[str, str] | None = None) -> pa.Table:
    """TABLE sorted by SORT (a stable sort), then its first LIMIT rows (of each trace with
    per_trace). A traceql.core.results.RowTable takes neither a sort nor a per-trace limit."""
    check_limit(limit)
    if sort is not None:
        column, sep, direction = sort.rpartition(":")
        if not sep:
            column, direction = sort, ""
        column = resolve_column(column, table.column_names, aliases, f"--sort {sort}")
        if direction not in ("", "asc", "desc"):
            raise UsageError(f"--sort {sort}: the direction after ':' is 'asc' or 'desc'")
        import pyarrow as pa

        if not direction:
            kind = table.schema.field(column).type
            direction = "asc" if pa.types.is_string(kind) or pa.types.is_large_string(kind) else "desc"
        keys = [(column, "ascending" if direction == "asc" else "descending")]
        if per_trace:
            keys.insert(0, ("trace_id", "ascending"))
        import pyarrow.compute as pc

        # a stable sort: ties keep the report's own order
        table = table.take(pc.sort_indices(table, sort_keys=keys))
    if limit is not None:
        if per_trace and "trace_id" in table.column_names:
            import pyarrow as pa

            seen: dict = {}
            keep = []
            for i, t in enumerate(table.column("trace_id").to_pylist()):
                seen[t] = seen.get(t, 0) + 1
                if seen[t] <= limit:
                    keep.append(i)
            table = table.take(pa.array(keep, pa.int64()))
        else:
            table = table.slice(0, limit)
    return table


def select_columns(table: pa.Table, columns, aliases: dict[str, str] | None = None) -> pa.Table:
    if not columns:
        return table
    if isinstance(columns, str):
        columns = [c.strip() for c in columns.split(",") if c.strip()]
    if [c.lower() for c in columns] == ["all"] and "all" not in table.column_names:
        return table  # -c all: every column (PyProf's prof -c all)
    option = f"-c {','.join(columns)}"
    return table.select([resolve_column(c, table.column_names, aliases, option) for c in columns])


# ------------------------------------------------------------------------------ summary

SECTIONS = (("GPU activities", "gpu"), ("API calls", "api"))
SUMMARY_COLUMNS = ["section", "name", "calls", "total_ns", "pct", "avg_ns", "med_ns", "min_ns", "max_ns",
                   "stddev_ns"]


@dataclass
class Summary:
    """What `traceql summary` prints.

    traces: one row per trace shown (trace_id, path, source_format, exporter_version,
      span_ns, start_ts, end_ts).
    gpus: one row per GPU of those traces with its busy time and share of the trace span
      (queries/_internal/gpu_busy.sql).
    rows: the "GPU activities" (kernels by name, copies by direction, memsets) and "API calls"
      sections with nsys-stats columns: section, name, calls, total_ns, pct, avg_ns, med_ns,
      min_ns, max_ns, stddev_ns (and trace_id first with per_trace). pct is the share of the
      summed time of the row's section (per trace with per_trace), not of wall time."""

    traces: pa.Table
    gpus: pa.Table
    rows: pa.Table
    per_trace: bool


def summary_sql() -> str:
    """The SQL summary() runs: its sections' reports and the queries of its header."""
    return "\n".join([report_query(by).sql for _, by in SECTIONS]
                     + [library.get(name).sql for name in ("_internal/traces", "_internal/gpu_busy")])


def summary(ws, trace_id: int | None = None, per_trace: bool = False, limit: int | None = None,
            recompute: bool = False, rows: bool = False) -> Summary:
    """nvprof's overview: GPU activities and API calls; limit: rows per section (and trace);
    recompute: as for run_report. rows: its tables as traceql.core.results.RowTable when each
    can be (as run_report's rows), for printing them without pyarrow."""
    from traceql.core.results import RowTable

    keep = (["trace_id"] if per_trace else []) + SUMMARY_COLUMNS[1:]
    parts = [(section, run_report(ws, by, trace_id=trace_id, per_trace=per_trace, limit=limit,
                                  recompute=recompute, rows=rows).select(keep))
             for section, by in SECTIONS]
    header = None
    if all(isinstance(t, RowTable) for _, t in parts):
        header = [_internal_rows(ws, name, trace_id) for name in ("_internal/traces", "_internal/gpu_busy")]
    if header is not None and all(t is not None for t in header):
        table = RowTable.concat([t.add_column(1 if per_trace else 0, "section", "VARCHAR", [section] * t.num_rows)
                                 for section, t in parts])
        if per_trace:  # each trace's sections together
            table = table.sort_by("trace_id")
        return Summary(header[0], header[1], table, per_trace)
    if any(isinstance(t, RowTable) for _, t in parts):
        return summary(ws, trace_id, per_trace, limit, recompute)
    import pyarrow as pa

    table = pa.concat_tables([t.add_column(1 if per_trace else 0, "section", pa.array([section] * t.num_rows, pa.string()))
                              for section, t in parts])
    if per_trace:  # each trace's sections together
        import pyarrow.compute as pc

        table = table.take(pc.sort_indices(table, sort_keys=[("trace_id", "ascending")]))
    traces = ws.query("_internal/traces", trace_id=trace_id)
    gpus = ws.query("_internal/gpu_busy", trace_id=trace_id)
    return Summary(traces, gpus, table, per_trace)


def _internal_rows(ws, name: str, trace_id: int | None):
    """Built-in query NAME over trace_id as a traceql.core.results.RowTable; None when a column
    is not of a plain type."""
    from traceql.core.results import RowTable

    q = library.get(name)
    return RowTable.of(ws.execute(q.sql, library.bind(q, {"trace_id": trace_id})))
