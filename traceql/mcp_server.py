"""`traceql mcp`: the workspace as a Model Context Protocol server on stdio, for an LLM agent.

Built on the official `mcp` SDK (the `traceql[mcp]` extra) and on the library API only: each
tool call opens the workspace read-only (traceql.open), answers, and closes it, so the server
sees a workspace that another process ingests into meanwhile (ingest renames a new file over it;
calls made meanwhile answer from the old one) and never changes it.

Tools (TOOLS: name -> Tool, each with its JSON schema and a description):
  traces   what `traceql info` says
  schema   the contract views, their columns, types and descriptions (one view or all)
  report   `traceql report --by ...` with trace, where, sort, limit, columns, range, and every
           report-specific option of the report registry (query.registry.OPTIONS: depth, with_dims, ...)
  summary  `traceql summary`: nvprof's overview, GPU activities and API calls
  sql      `traceql sql`: read-only, no files of this machine, no extensions, a row cap
  analyze  `traceql analyze`: findings with thresholds, advice and evidence rows
  diff     `traceql diff A B` over two trace ids of the workspace: verdict and changed rows

Resources: traceql://contract (the contract reference, markdown), traceql://queries (the query
library's index, JSON) and traceql://queries/NAME (one query with its SQL).

A result is structured content ({"columns": [{"name", "type", "unit"}], "rows": [{...}], "row_count",
"note"}, times in ns as the CLI's csv gives them) and a short text table; an error is a tool
error whose text is the CLI's one-line message ('traceql: error: ...').
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from traceql.core.errors import TraceqlError, UsageError
from traceql.core.units import MAX_LIMIT

SQL_ROW_CAP = 1000  # rows the sql tool returns at most (the note says how many there were)
TEXT_ROWS = 20  # rows of the short text table beside the structured content
EVIDENCE_ROWS = 5  # analyze: evidence rows per rule unless `limit` says otherwise
DIFF_ROWS = 50  # diff: rows returned unless `limit` says otherwise
DIFF_TEXT = ["section", "key", "verdict", "time_a_ns", "time_b_ns", "delta_pct", "q_value"]  # its text table


@dataclass
class Tool:
    name: str
    description: str
    schema: dict
    run: Callable  # (db: Path, args: dict) -> dict (the structured content; 'text' its text table)


def _jsonable(rows: list[dict]) -> list[dict]:
    """Rows as JSON values: exact integers for integral decimals, text for times (render.json_value)."""
    from traceql.outputs.render import json_value

    return json.loads(json.dumps(rows, default=json_value))


def _column(field) -> dict:
    """A result column: its name, Arrow type and unit (traceql.core.units: ns, bytes, %, count, ...; None)."""
    from traceql.core.units import unit

    return {"name": field.name, "type": str(field.type), "unit": unit(field.name)}


def _result(table, note: str | None = None, row_count: int | None = None) -> dict:
    """A pyarrow Table as structured content: column names and types, rows, their count, a note."""
    from traceql.outputs.render import render

    text = io.StringIO()
    shown = table.slice(0, TEXT_ROWS)
    render(shown, "table", text, width=120)
    n = table.num_rows if row_count is None else row_count
    if n > shown.num_rows:
        text.write(f"({shown.num_rows} of {n} rows shown here; every row returned is in the structured content)\n")
    if note:
        text.write(note + "\n")
    return {"columns": [_column(f) for f in table.schema],
            "rows": _jsonable(table.to_pylist()), "row_count": n, "note": note, "text": text.getvalue()}


def _open(db: Path):
    from traceql import api

    return api.open(db)  # read-only, no files of this machine: per call, so re-ingests are seen


# -- tools -------------------------------------------------------------------------------------

def _traces(db: Path, args: dict) -> dict:
    with _open(db) as ws:
        rows = ws.info()
    text = "\n".join(f"trace {r['trace_id']}: {r['path']} ({r['source_format']}), GPUs "
                     f"{', '.join(r['gpus']) or 'none'}, span {r['duration']} ns, "
                     + ", ".join(f"{k} {v}" for k, v in r["counts"].items()) for r in rows)
    return {"traces": _jsonable(rows), "row_count": len(rows), "note": None if rows else f"{db}: no traces yet",
            "text": text or f"{db}: no traces yet"}


def _schema(db: Path, args: dict) -> dict:
    from traceql.core.resources import view_docs
    from traceql.core.units import unit

    docs = view_docs(args.get("view"))
    views = [{"view": d.name, "kind": d.kind, "description": d.doc,
              "columns": [{"name": c.name, "type": c.type, "unit": unit(c.name), "description": c.doc}
                          for c in d.columns]}
             for d in docs.values()]
    text = "\n".join(f"{v['view']}: {v['description']}" + "".join(
        f"\n  {c['name']}  {c['type']}{'  [' + c['unit'] + ']' if c['unit'] else ''}  {c['description']}"
        for c in v["columns"]) if args.get("view")
        else f"{v['view']}: {v['description']}" for v in views)
    return {"views": views, "row_count": len(views), "note": None, "text": text}


def option_name(param: str) -> str:
    """The report tool's argument for a report-specific option: its CLI flag in snake case
    (--skip-first -> skip_first, --group -> group; registry.OPTIONS)."""
    from traceql.query.registry import OPTIONS

    return OPTIONS[param].flag.lstrip("-").replace("-", "_")


def _report(db: Path, args: dict) -> dict:
    from traceql.query.registry import OPTIONS
    from traceql.query.reports import empty_note

    by = args["by"]
    # the report-specific options as the CLI passes them: a flag that is false is not given; which
    # report takes which, and the words of a refusal, are the query layer's (reports.check_options)
    params = {param: args[option_name(param)] for param in OPTIONS
              if option_name(param) in args and args[option_name(param)] is not False}
    columns = args.get("columns")
    with _open(db) as ws:
        table = ws.report(by, trace_id=args.get("trace"), per_trace=args.get("per_trace", False),
                          where=args.get("where"), sort=args.get("sort"), limit=args.get("limit"),
                          columns=",".join(columns) if isinstance(columns, list) else columns,
                          range=args.get("range") or None, range_match=args.get("range_match") or None, **params)
        note = empty_note(ws, by, args.get("trace")) if table.num_rows == 0 else None
    return _result(table, note)


def _summary(db: Path, args: dict) -> dict:
    from traceql.outputs.summary_text import render_summary
    from traceql.query.jobs import split_note

    trace, per_trace = args.get("trace"), args.get("per_trace", False)
    with _open(db) as ws:  # as `traceql summary`: traces that are not one job get one overview each
        split = None if per_trace or trace is not None else split_note(ws)
        result = ws.summary(trace_id=trace, per_trace=per_trace or split is not None, limit=args.get("limit"))
    out = _result(result.rows, split)
    text = io.StringIO()
    render_summary(result, "table", text, width=120)
    out["text"] = text.getvalue() + (split + "\n" if split else "")
    out["traces"] = _jsonable(result.traces.to_pylist())
    out["gpus"] = _jsonable(result.gpus.to_pylist())
    return out


def _sql(db: Path, args: dict) -> dict:
    import pyarrow as pa

    cap = args.get("max_rows", SQL_ROW_CAP)
    with _open(db) as ws:
        reader = ws.sql(args["query"], args.get("params") or None, dialect=args.get("dialect"), batches=True)
        if isinstance(reader, pa.Table):
            reader = reader.to_reader()
        kept, total = [], 0
        for batch in reader:  # read to the end, keep the first `cap` rows: the count is exact
            if total < cap:
                kept.append(batch.slice(0, cap - total))
            total += batch.num_rows
        table = pa.Table.from_batches(kept, schema=reader.schema)
    note = (f"{total} rows; the first {cap} are returned (max_rows; add LIMIT/OFFSET or aggregate)"
            if total > cap else None)
    return _result(table, note, row_count=total)


def _analyze(db: Path, args: dict) -> dict:
    limit = args.get("limit", EVIDENCE_ROWS)
    with _open(db) as ws:
        result = ws.analyze(args.get("rules") or None, trace_id=args.get("trace"), **(args.get("params") or {}))
    from traceql.query.reports import order_and_limit

    evidence = {name: order_and_limit(t, None, limit, per_trace=True) for name, t in result.evidence.items()}
    findings = _result(result.findings)
    findings["evidence"] = {name: {"columns": [_column(f) for f in t.schema],
                                   "rows": _jsonable(t.to_pylist()), "row_count": result.evidence[name].num_rows}
                            for name, t in evidence.items()}
    return findings


def _diff(db: Path, args: dict) -> dict:
    import pyarrow as pa
    import pyarrow.compute as pc

    from traceql.analysis.diff import diff
    from traceql.analysis.diff_rules import DEFAULT_ALPHA, DEFAULT_MIN_EFFECT_PCT

    # trace ids of this workspace only: a side given as a file would be read from this machine
    result = diff(str(args["a"]), str(args["b"]), db, alpha=args.get("alpha", DEFAULT_ALPHA),
                  min_effect_pct=args.get("min_effect_pct", DEFAULT_MIN_EFFECT_PCT))
    rows = result.rows
    if args.get("sections"):
        rows = rows.filter(pc.is_in(rows.column("section"), value_set=pa.array(args["sections"], pa.string())))
    if args.get("changed_only", True):
        rows = rows.filter(pc.fill_null(rows.column("changed"), False))
    out = _result(rows.slice(0, args.get("limit", DIFF_ROWS)), row_count=rows.num_rows)
    out["summary"] = _jsonable([result.summary()])[0]
    brief = _result(rows.slice(0, args.get("limit", DIFF_ROWS)).select(DIFF_TEXT), row_count=rows.num_rows)
    out["text"] = f"verdict: {result.verdict}\n" + brief["text"]
    return out


TRACE = {"type": "integer", "description": "Only this trace id (see the traces tool); default: every trace."}
NAMES = {"type": "array", "items": {"type": "string"}}


def _tools() -> dict[str, Tool]:
    from traceql.query.registry import OPTIONS
    from traceql.query.reports import REPORTS

    # report-specific options, from the report registry (the CLI builds its flags from the same rows)
    options = {option_name(param): {**opt.values, "description": opt.help + (
        f" Default: {opt.default}." if opt.default is not None and param != "group_by" else "")}
        for param, opt in OPTIONS.items()}

    tools = [
        Tool("traces", "The traces ingested in the workspace, as `traceql info` shows them: trace id, source file, "
             "format and versions, host and rank, GPUs, time span (ns) and rows per view, warnings. Start here: "
             "the other tools take these trace ids.",
             {"type": "object", "properties": {}, "additionalProperties": False}, _traces),
        Tool("schema", "The contract: every view (kernel, api_call, memcpy, nvtx_range, op_range, torch_op, ...) "
             "with its description and its columns' names, DuckDB types and descriptions (times are integer ns). "
             "Read it before writing SQL for the sql tool or a `where` filter for the report tool.",
             {"type": "object", "properties": {"view": {"type": "string", "description": "One view; default: all "
                                                        "(then only their descriptions in the text)."}},
              "additionalProperties": False}, _schema),
        Tool("report", "A report, as `traceql report --by BY --format csv` gives it (times in ns): kernel, api, "
             "memcpy, memset, gpu (all GPU work by kind), stream, device, thread, launch (queue delay), range (NVTX "
             "ranges: CPU time, GPU time of the work inside), op (PyTorch ops, forward and backward), kernel-op, "
             "layer, breakdown (per GPU: compute, communication, memory, idle), source, rank, collective, "
             "straggler, clock, gpu-trace, api-trace, memory. The options after range_match apply to some reports "
             "only (their descriptions begin with which); given to another report they are an error. pct is the "
             "share of the summed time of the rows, not of wall time.",
             {"type": "object", "required": ["by"], "additionalProperties": False, "properties": {
                 "by": {"type": "string", "enum": list(REPORTS), "description": "What to report on."},
                 "trace": TRACE,
                 "per_trace": {"type": "boolean", "description": "Rows split by trace (pct and limit per trace)."},
                 "where": {"type": "string", "description": "SQL boolean expression over the report's input view "
                           "(see the schema tool), e.g. \"name LIKE '%gemm%' AND dur > 10000\"."},
                 "sort": {"type": "string", "description": "COLUMN[:asc|:desc], e.g. total_ns:desc."},
                 "limit": {"type": "integer", "minimum": 0, "maximum": MAX_LIMIT, "description": "At most N rows."},
                 "columns": {**NAMES, "description": "Only these columns, in this order."},
                 "range": {**NAMES, "description": "Only the work launched inside the NVTX ranges of these names "
                                                   "(full name, grouping name or path); adds range_pct."},
                 "range_match": {**NAMES, "description": "Like range, for ranges whose name contains a word."},
                 **options}},
             _report),
        Tool("summary", "nvprof's overview (`traceql summary`): per trace its span and GPUs with their busy share "
             "of the span (traces, gpus), then the rows of 'GPU activities' (kernels by name, copies by direction, "
             "memsets) and 'API calls' with the nsys stats columns (calls, total_ns, pct, avg_ns, med_ns, min_ns, "
             "max_ns, stddev_ns). pct is the share of the summed time of the row's section, not of wall time. "
             "Traces that are not one job get one overview each (a trace_id column; the note says so).",
             {"type": "object", "additionalProperties": False, "properties": {
                 "trace": TRACE,
                 "per_trace": {"type": "boolean", "description": "One overview per trace (a trace_id column)."},
                 "limit": {"type": "integer", "minimum": 0, "maximum": MAX_LIMIT, "description": "At most N rows per section (and trace)."}}},
             _summary),
        Tool("sql", "Run one read-only SQL query (DuckDB dialect unless `dialect`) over the contract views and "
             "return its rows. Statements that change anything (INSERT, CREATE, DELETE, COPY, ATTACH, SET, ...), "
             "reading files of this machine and loading extensions are refused. At most max_rows rows are "
             "returned; row_count and the note say how many there were. Unknown views or columns are errors "
             "with the closest names.",
             {"type": "object", "required": ["query"], "additionalProperties": False, "properties": {
                 "query": {"type": "string", "description": "The SQL, e.g. SELECT name, sum(dur) AS total_ns FROM "
                                                             "kernel GROUP BY 1 ORDER BY 2 DESC LIMIT 10"},
                 "params": {"type": "object", "additionalProperties": {"type": ["string", "number", "boolean"]},
                            "description": "Values of $name placeholders, bound by DuckDB."},
                 "dialect": {"type": "string", "description": "The SQL's dialect (sqlite, postgres, spark, ...)."},
                 "max_rows": {"type": "integer", "minimum": 1, "maximum": 100000,
                              "description": f"Rows returned at most (default {SQL_ROW_CAP})."}}},
             _sql),
        Tool("analyze", "Why the GPU is idle, what synchronizes, what to fix first (`traceql analyze`): one "
             "finding row per trace and rule (gpu_gaps, sync_calls, pageable_memcpy, sync_memcpy, sync_memset, "
             "small_kernels, low_utilization, exposed_comm, exposed_memcpy, iterations) with recoverable time, thresholds and "
             "advice, and per rule its evidence rows ranked by recoverable time. Rules overlap: do not add "
             "their times.",
             {"type": "object", "additionalProperties": False, "properties": {
                 "rules": {**NAMES, "description": "Only these rules; default: all."},
                 "trace": TRACE,
                 "params": {"type": "object", "additionalProperties": {"type": ["string", "number", "boolean"]},
                            "description": "Rule thresholds, e.g. {\"min_gap_ns\": 500000}."},
                 "limit": {"type": "integer", "minimum": 0, "maximum": MAX_LIMIT,
                           "description": f"Evidence rows per rule and trace (default {EVIDENCE_ROWS})."}}},
             _analyze),
        Tool("diff", "Compare two traces of the workspace, A (before) and B (after), as `traceql diff A B` "
             "does: the verdict, the headline totals (iteration time, GPU operation time per iteration) and the "
             "rows that changed beyond run-to-run noise (kernels, ops, NVTX ranges, API calls, copies, memsets; "
             "a Benjamini-Hochberg q below alpha and at least min_effect_pct). Δ = B - A.",
             {"type": "object", "required": ["a", "b"], "additionalProperties": False, "properties": {
                 "a": {"type": "integer", "description": "Trace id of the before side (see the traces tool)."},
                 "b": {"type": "integer", "description": "Trace id of the after side."},
                 "alpha": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1,
                           "description": "False discovery rate (default 0.01)."},
                 "min_effect_pct": {"type": "number", "minimum": 0,
                                    "description": "Smallest change in percent called a change (default 5)."},
                 "sections": {"type": "array", "items": {"type": "string", "enum": [
                     "total", "kernel", "op", "range", "range_gpu", "api", "memcpy", "memset"]},
                     "description": "Only these sections."},
                 "changed_only": {"type": "boolean", "description": "Only the changed rows (default true); "
                                  "false: every row, as the CLI's csv."},
                 "limit": {"type": "integer", "minimum": 0, "maximum": MAX_LIMIT, "description": f"Rows at most (default {DIFF_ROWS})."}}},
             _diff),
    ]
    return {t.name: t for t in tools}


# -- resources ---------------------------------------------------------------------------------

CONTRACT_URI = "traceql://contract"
QUERIES_URI = "traceql://queries"  # the library's index; traceql://queries/NAME one query with its SQL


@dataclass
class Resource:
    uri: str
    name: str
    description: str
    mime_type: str


def contract_reference() -> str:
    """The contract reference as markdown: every view and table of the contract with its description,
    its columns' DuckDB types and descriptions (resources.contract_docs, what `traceql schema` prints)."""
    from traceql.core.resources import contract_docs
    from traceql.core.units import unit
    from traceql.store.contract import CONTRACT_VERSION

    docs = contract_docs()
    lines = ["# traceql contract reference", "",
             f"Contract version {CONTRACT_VERSION}. Every row carries trace_id; ts is a start in integer ns on the "
             "trace clock and dur a duration in ns. Query these views with the sql tool; `where` filters of the "
             "report tool run over them.", "", "| view | kind | description |", "|---|---|---|"]
    lines += [f"| {d.name} | {d.kind} | {_cell(d.doc)} |" for d in docs.values()]
    for d in docs.values():
        lines += ["", f"## {d.name}", "", f"{d.doc} ({d.kind})", "", "| column | type | unit | description |",
                  "|---|---|---|---|"]
        lines += [f"| {c.name} | {c.type} | {unit(c.name) or ''} | {_cell(c.doc)} |" for c in d.columns]
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def query_entry(q, sql: bool = False) -> dict:
    """One query of the library as the resources give it: name, description, parameters (name ->
    description, and the defaults of the reports), its input view, its documented columns, and its SQL."""
    out = {"name": q.name, "uri": f"{QUERIES_URI}/{q.name}", "description": q.description,
           "parameters": dict(q.params), "defaults": _jsonable([dict(q.defaults)])[0], "input": q.input,
           "columns": [{"name": c.name, "description": c.doc} for c in q.columns.values()]}
    if q.origin:
        out["origin"] = q.origin
    if sql:
        out["sql"] = q.sql
    return out


def _library() -> dict:
    from traceql.query import library

    return library.collection()  # the built-in queries and those of $TRACEQL_QUERIES, as `traceql queries`


def resources() -> dict[str, Resource]:
    """uri -> Resource: the contract reference, the query library's index, and each query."""
    out = [Resource(CONTRACT_URI, "contract", "The contract reference: every view and table traceql's SQL reads, "
                    "with its description and its columns' types, units and descriptions (times in integer ns).",
                    "text/markdown"),
           Resource(QUERIES_URI, "queries", "The query library: each query's name, description, parameters, "
                    "input view and columns (the reports run these; the SQL is in traceql://queries/NAME).",
                    "application/json")]
    out += [Resource(f"{QUERIES_URI}/{q.name}", f"query {q.name}", q.description, "application/json")
            for q in _library().values()]
    return {r.uri: r for r in out}


def read_resource(uri: str) -> tuple[str, str]:
    """(text, mime type) of resource URI; a UsageError naming the resources for an unknown one."""
    if uri == CONTRACT_URI:
        return contract_reference(), "text/markdown"
    lib = _library()
    if uri == QUERIES_URI:
        return json.dumps([query_entry(q) for q in lib.values()], indent=1), "application/json"
    name = uri[len(QUERIES_URI) + 1:] if uri.startswith(QUERIES_URI + "/") else None
    if name in lib:
        return json.dumps(query_entry(lib[name], sql=True), indent=1), "application/json"
    raise UsageError(f"no resource {uri!r}; resources: {CONTRACT_URI}, {QUERIES_URI}, {QUERIES_URI}/NAME "
                     f"(NAME: {', '.join(lib)})")


def call(db: Path, name: str, args: dict | None) -> tuple[dict | None, str, bool]:
    """Run tool NAME with ARGS over workspace DB: (structured content, text, is_error). Every
    failure is a one-line error text ('traceql: error: ...'), never an exception."""
    import jsonschema

    tools = _tools()
    try:
        if name not in tools:
            raise UsageError(f"no tool {name!r}; tools: {', '.join(tools)}")
        args = args or {}
        try:
            jsonschema.validate(args, tools[name].schema)
        except jsonschema.ValidationError as exc:
            where = "/".join(map(str, exc.absolute_path))
            raise UsageError(f"{name}: argument {where + ': ' if where else ''}{exc.message}") from None
        out = tools[name].run(Path(db), args)
    except TraceqlError as exc:
        from traceql.core.faults import printable

        return None, f"traceql: error: {printable(str(exc))}", True
    except Exception as exc:  # noqa: BLE001 - a tool error for the agent, the server stays up
        from traceql.core.faults import first_line

        return None, f"traceql: error: {first_line(exc)}", True
    text = out.pop("text")
    return out, text, False


def serve(db: Path) -> None:
    """Serve the tools over stdio until the client closes the connection."""
    import anyio
    import mcp_types as types
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server

    from traceql.core.version import __version__

    async def list_tools(ctx, params):
        return types.ListToolsResult(tools=[types.Tool(name=t.name, description=t.description, input_schema=t.schema)
                                            for t in _tools().values()])

    async def call_tool(ctx, params):
        structured, text, error = await anyio.to_thread.run_sync(call, db, params.name, params.arguments)
        return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=structured,
                                    is_error=error)

    async def list_resources(ctx, params):
        return types.ListResourcesResult(resources=[
            types.Resource(uri=r.uri, name=r.name, description=r.description, mime_type=r.mime_type)
            for r in (await anyio.to_thread.run_sync(resources)).values()])

    async def read(ctx, params):
        try:
            text, mime = await anyio.to_thread.run_sync(read_resource, str(params.uri))
        except TraceqlError as exc:
            from mcp.shared.exceptions import MCPError
            from mcp_types.jsonrpc import INVALID_PARAMS

            raise MCPError(INVALID_PARAMS, f"traceql: error: {exc}") from None
        return types.ReadResourceResult(contents=[types.TextResourceContents(uri=params.uri, mime_type=mime,
                                                                             text=text)])

    server = Server("traceql", version=__version__,
                    instructions="traceql answers questions about GPU profiler traces (Nsight Systems, nvprof, "
                                 "PyTorch profiler) ingested into one workspace: call traces first, schema before "
                                 "writing SQL; times are integer nanoseconds.",
                    on_list_tools=list_tools, on_call_tool=call_tool, on_list_resources=list_resources,
                    on_read_resource=read)

    async def main():
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)
