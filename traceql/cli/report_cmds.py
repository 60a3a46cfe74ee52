"""Reports: report --by, summary, reports (their documentation), plot."""

from __future__ import annotations


import click

from traceql.query.jobs import pooling_warning, split_note
from traceql.query.registry import STORED
from traceql.query.reports import REPORTS, blurb, check_options, empty_note, report_query, summary_sql
from traceql.cli.context import Context, allow_numpy, table_width, wide
from traceql.cli.output import check_output, check_unit, emit, say, tell
from traceql.cli.params import (FILE_HELP, engine_options, file_argument, format_option, limit_option, output_option,
                                overwrite_option, per_trace_option, report_option, report_options, trace_option,
                                unit_option, wide_option)
from traceql.cli.group import cli


REPORT_HELP = """Summaries from the query library (queries/<report>.sql), one row per group.

\b
BY_LIST

--range NAME (or --range-match WORD) keeps the work launched inside those NVTX ranges, by any
thread of their process, each operation once, and adds range_pct, its share of the ranges' GPU
time: the drill-down into one range (kernel, api, memcpy, memset, gpu, launch, op, kernel-op,
layer, source).

Time statistics follow nsys stats: calls, total_ns, pct, avg_ns, med_ns, min_ns, max_ns,
stddev_ns (sample standard deviation, n - 1). pct is the row's share of the summed time of
all rows of the report (after --where; per trace with --per-trace), never of wall time; the
table header says which sum. `traceql reports NAME` documents every column. Machine formats
give times in ns; tables show readable units, or --unit.

""" + FILE_HELP.replace("COMMAND", "report --by kernel")


def _by_list() -> str:
    """Every --by value on a line of its own, with its one-line description."""
    pad = max(len(n) for n in REPORTS) + len("--by ")
    return "\n".join(f"{'--by ' + n:<{pad}}  {blurb(n)}" for n in REPORTS)


REPORT_HELP = REPORT_HELP.replace("BY_LIST", _by_list())


ONE_ROW_PER_TRACE = ("rank", "clock", "memory")  # reports whose rows are traces (or their GPUs): nothing pooled


@cli.command(help=REPORT_HELP)
@file_argument()
@click.option("--by", "by", type=click.Choice(list(REPORTS)), required=True, metavar="NAME",
              help="What to report on: one of the --by values above.")
@trace_option()
@per_trace_option("Split rows by trace (a trace_id column; % and --limit per trace).")
@click.option("--where", "where", default=None, metavar="EXPR",
              help="Keep input rows matching this SQL boolean expression over the report's input view "
                   "(kernel, api_call, memcpy, memset, gpu_op, nvtx_range; see `traceql schema VIEW`), "
                   "e.g. \"name LIKE '%gemm%' AND dur > 10000\".")
@click.option("--sort", default=None, metavar="COLUMN[:asc|:desc]",
              help="Order by this column of the report, named as in csv output (avg_ns) or as the table header "
                   "shows it (avg, 'avg ms', Time(%)); numbers descending, text ascending by default.")
@limit_option("At most N rows (per trace with --per-trace).")
@click.option("-c", "--columns", default=None, metavar="COL,COL",
              help="Only these columns, in this order (names as for --sort).")
@format_option("table for people (readable time units); csv, tsv, json, markdown, parquet for machines (ns).")
@output_option()
@unit_option("Times in this unit in --format table or markdown (default: table picks a readable unit).")
@report_options
@click.option("--recompute", is_flag=True,
              help=f"Compute the report from the tables even when ingest stored it ({', '.join(STORED[:-1])} "
                   f"and {STORED[-1]} with their default options store one per trace; the rows are the same).")
@click.option("--range", "range_names", multiple=True, metavar="NAME",
              help="Only the work launched inside the NVTX ranges of this name: full name, grouping name "
                   "(--by range's rows) or nesting path; repeatable. By any thread of the range's process, each "
                   "operation once; adds range_pct, the share of the ranges' GPU time (CPU time for --by api).")
@click.option("--range-match", "range_words", multiple=True, metavar="WORD",
              help="Like --range, for the ranges whose name contains WORD (repeatable, ignores case).")
@overwrite_option
@wide_option
@engine_options
@click.pass_context
def report(ctx, file, by, trace_id, per_trace, where, sort, limit, columns, fmt, output, unit, with_dims, group_by,
           max_depth, match, domain, spread, skip_first, with_shapes, level, peak_tflops, peak_gbps, measure,
           per_iteration, recompute, range_names, range_words):
    # the report-specific options given on the command line; which apply to which report is the
    # query layer's rule (registry.OPTIONS, reports.check_options), the same for traceql.open().report()
    given = {"with_dims": with_dims, "group_by": group_by, "max_depth": max_depth, "match": list(match) or None,
             "domain": domain, "spread": spread, "skip_first": skip_first, "with_shapes": with_shapes,
             "level": level, "peak_tflops": peak_tflops, "peak_gbps": peak_gbps, "measure": measure,
             "per_iteration": per_iteration}
    params = {k: v for k, v in given.items() if ctx.get_parameter_source(k) != click.core.ParameterSource.DEFAULT}
    check_options(by, params)  # before the workspace is opened, as every usage error
    check_unit(unit, fmt)
    obj: Context = ctx.obj
    check_output(output)
    ws, trace_id = obj.open_on(file, trace_id, reads=report_query(by).sql)
    with ws:
        table = ws.report(by, trace_id=trace_id, per_trace=per_trace, where=where, sort=sort, limit=limit,
                          columns=columns, recompute=recompute, range=list(range_names) or None,
                          range_match=list(range_words) or None, rows=fmt != "parquet", **params)
        note = empty_note(ws, by, trace_id) if table.num_rows == 0 else None
        pooled = None if by in ONE_ROW_PER_TRACE else pooling_warning(ws, trace_id, per_trace)
    if note:
        click.echo(f"traceql: {note}", err=True)
    if pooled:
        tell(pooled)
    emit(table, fmt, output, unit=unit, labels=report_query(by).labels)


SUMMARY_HELP = """An nvprof-style overview: each trace's span, its GPUs and their busy share of the span,
then "GPU activities" (kernels by name, copies by direction, memsets) and "API calls",
with Time(%), Time, Calls, Avg, Min, Max, Name.

Time(%) is the share of the summed time of the section (all GPU activities, or all API
calls), not of wall time. Busy is the time a GPU ran at least one operation (overlapping
streams counted once), as a share of the trace span (first to last event of any kind).
Machine formats carry the nsys stats columns: section, name, calls, total_ns, pct,
avg_ns, med_ns, min_ns, max_ns, stddev_ns (sample standard deviation, n - 1).

""" + FILE_HELP.replace("COMMAND", "summary")


@cli.command(help=SUMMARY_HELP)
@file_argument()
@trace_option()
@per_trace_option("One overview per trace instead of all traces together (the default when the traces "
                   "are not one job).")
@limit_option("At most N rows per section (and trace).")
@format_option("table: nvprof's layout for people; csv, tsv, parquet: the rows with a section column; "
                   "json: traces, GPUs and rows; markdown: the layout as markdown tables.")
@output_option()
@unit_option("Times in this unit in --format table or markdown (default: a readable unit, as the reports).")
@click.option("--recompute", is_flag=True,
              help="Compute the sections from the tables even when ingest stored them (the rows are the same).")
@overwrite_option
@wide_option
@engine_options
@click.pass_obj
def summary(obj: Context, file, trace_id, per_trace, limit, fmt, output, unit, recompute):
    check_unit(unit, fmt)
    check_output(output)
    ws, trace_id = obj.open_on(file, trace_id, reads=summary_sql())
    with ws:
        split = None if per_trace or trace_id is not None else split_note(ws)
        result = ws.summary(trace_id=trace_id, per_trace=per_trace or split is not None, limit=limit,
                            recompute=recompute, rows=fmt != "parquet")
    if split:
        tell(split)
    from traceql.outputs.summary_text import render_summary  # (summary's alone: a report needs none of it)

    if fmt == "parquet":
        emit(result.rows, fmt, output)
    elif output is None:
        render_summary(result, fmt, unit=unit, width=table_width(), wide=wide())
    else:
        with open(output, "w", encoding="utf-8", newline="") as fh:
            render_summary(result, fmt, fh, unit=unit, width=table_width(fh))


@cli.command()
@click.option("--by", "by", type=click.Choice(["range", "kernel", "op", "memory"]), default="range", show_default=True,
              help="range: CPU, kernel and memcpy time per NVTX range name; kernel: GPU time per kernel; "
                   "op: forward and backward GPU time per PyTorch op; memory: each GPU's allocated and reserved "
                   "memory over time (a line chart, one trace).")
@output_option("The image: .png, .svg or .pdf (the extension picks the format); --overwrite replaces it.",
               required=True)
@trace_option()
@report_option("match")
@report_option("domain")
@report_option("skip_first")
@click.option("--stacked", is_flag=True,
              help="range: one bar per range name, its CPU time outside synchronization, synchronization time, "
                   "kernel time and memcpy time stacked (K-FAC's figure), instead of bars side by side.")
@click.option("--stat", type=click.Choice(["total", "mean"]), default="total", show_default=True,
              help="Summed time, or the mean per range instance (kernel call, op call).")
@limit_option("The N largest groups of bars.", default=20, least=1)
@click.option("--title", default=None, help="Title of the figure [default: the trace's file name].")
@click.option("--log", is_flag=True,
              help="A logarithmic time axis. Without it, a group of bars more than 8 times longer than the "
                   "next is cut (its value printed) so that the others stay visible.")
@click.option("--range", "range_names", multiple=True, metavar="NAME",
              help="kernel, op: only the work inside the NVTX ranges of this name (full, grouping or path; "
                   "repeatable), as report --range: the drill-down into one range.")
@click.option("--range-match", "range_words", multiple=True, metavar="WORD",
              help="kernel, op: like --range, for ranges whose name contains WORD (ignores case).")
@overwrite_option
@click.pass_obj
def plot(obj: Context, by, output, trace_id, match, domain, skip_first, stacked, stat, limit, title, log, range_names,
         range_words):
    """Draw a report as a bar chart (needs matplotlib: pip install 'traceql[plot]').

    --by range: per NVTX range name, its CPU time (the ranges' durations) next to the GPU
    kernel time and memcpy time of the work launched inside it, at any depth, like the
    K-FAC profiling figure; --match fwd --match bwd picks ranges, as in `report --by range`.
    --stacked draws one bar per name with CPU time outside synchronization, synchronization,
    kernel and memcpy time stacked; --skip-first N leaves out each name's warm-up instances.
    """
    allow_numpy()  # matplotlib needs it
    from traceql.outputs.plot import plot as draw

    check_output(output)
    with obj.open() as ws:
        draw(ws, by, output, trace_id=trace_id, match=match, domain=domain, stat=stat, limit=limit, title=title,
             log=log, range=list(range_names) or None, range_match=list(range_words) or None,
             skip_first=skip_first, stacked=stacked)
        pooled = pooling_warning(ws, trace_id, what="bars", splits=False)
    click.echo(f"wrote {output}")
    if pooled:
        tell(pooled)


@cli.command("reports")
@click.argument("name", required=False)
def reports_cmd(name):
    """Describe the reports of `traceql report --by NAME`: input view, parameters, columns."""
    names = list(REPORTS) if name is None else [name]
    for n in names:
        q = report_query(n)
        say(f"{n}: {q.description}", 2)
        say(f"  input view (--where): {q.input}", 4)
        width = max(len(c.name) for c in q.columns.values())
        for c in q.columns.values():
            cond = "" if not c.when else (f" [without {c.when[4:]}]" if c.when.startswith("not ") else f" [with {c.when}]")
            say(f"  {c.name:<{width}}  {c.doc}{cond}", 2 + width + 2)
        click.echo("")
