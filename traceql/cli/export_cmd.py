"""export: every contract view as CSV or Parquet files, a Perfetto timeline, folded stacks."""

from __future__ import annotations


import click

from traceql.core.errors import UsageError
from traceql.query.jobs import split_note
from traceql.core.progress import for_stderr
from traceql.cli.context import Context
from traceql.cli.output import check_output, plural, tell
from traceql.cli.params import format_option, output_option, overwrite_option, per_trace_option, trace_option
from traceql.cli.group import cli


@cli.command()
@format_option("csv, parquet: every view as a file in the -o directory; perfetto: a timeline (Chrome trace "
               "event JSON) of one trace, or of all, each a process group; folded: the kernels' GPU time per "
               "call stack for flame graphs (-o FILE).", choices=["csv", "parquet", "perfetto", "folded"],
               default="parquet")
@output_option("Directory to write into (created if needed); with --format perfetto the file (.json, or .json.gz "
               "compressed).", required=True, name="out_dir")
@trace_option()
@per_trace_option("One sub-folder per trace instead of one file per view.")
@click.option("--start", default=None, metavar="TIME",
              help="perfetto: start of the window: ns on the trace clock, or with a unit (1.5s, 200ms, 50us); "
                   "+TIME counts from the trace's first event.")
@click.option("--end", default=None, metavar="TIME", help="perfetto: end of the window (exclusive), like --start.")
@click.option("--align-clocks", is_flag=True,
              help="perfetto, several traces: take each host's clock skew, estimated from collective kernels "
                   "(report --by clock), off its traces' times.")
@overwrite_option(help="Replace files that already exist.")
@click.option("--partition-by", "partition_by", type=click.Choice(["trace"]), default=None,
              help="parquet: Hive-style partitions VIEW/trace_id=N/ with a manifest, for Spark "
                   "(report --engine spark) and other Parquet readers.")
@click.option("--trace-id-offset", type=click.IntRange(min=0), default=0, show_default=True,
              help="With --partition-by trace: add this to the trace ids written, so that workspaces "
                   "ingested apart (one per rank) fill one export without clashing.")
@click.pass_obj
def export(obj: Context, fmt, out_dir, trace_id, per_trace, start, end, align_clocks, partition_by,
           trace_id_offset):
    """Write every contract view as a CSV or Parquet file, for pandas, polars or Spark; or
    a timeline for ui.perfetto.dev and chrome://tracing (--format perfetto).

    The timeline: NVTX ranges and CUDA API calls on their CPU threads, kernels, copies and
    memsets on their GPU and stream, arrows from each launching call to its GPU work.
    --start/--end keep the events that overlap the window (whole, not clipped), so a
    large trace stays small enough to open. A workspace of several traces (the ranks of a
    job) gives one timeline of all, each trace a process group named for its rank and host,
    on one UTC axis (--start/--end on it: +TIME from the job's first event); traces that are
    not one job each start at time 0 on their own clock; --trace ID gives one.
    """
    overwrite = obj.overwrite  # --overwrite (params.overwrite_option)
    check_output(out_dir, folder=fmt not in ("perfetto", "folded"), overwrite=overwrite)
    if fmt == "folded":
        if per_trace or start is not None or end is not None:
            raise UsageError("--per-trace, --start and --end do not apply to --format folded (--trace ID picks a trace)")
        with obj.open() as ws:
            lines = ws.export_folded(out_dir, trace_id=trace_id, overwrite=overwrite)
        click.echo(f"wrote {lines:,} {plural(lines, 'stack')} to {out_dir} (frame;frame;kernel GPU-ns per line: "
                   "flamegraph.pl, inferno, speedscope)")
        return
    progress = for_stderr()  # bars on a terminal only
    try:
        with obj.open() as ws:
            if fmt == "perfetto":
                if per_trace:
                    raise UsageError("--per-trace applies to csv and parquet; a timeline shows every trace, each "
                                     "a process group, or one (--trace ID)")
                result = ws.export_perfetto(out_dir, trace_id=trace_id, start=start, end=end, overwrite=overwrite,
                                            progress=progress, align_clocks=align_clocks)
                apart = None if trace_id is not None else split_note(
                    ws, "each job starts at time 0 of the timeline, on its own clock")
            else:
                if start is not None or end is not None:
                    raise UsageError("--start and --end apply to --format perfetto")
                if align_clocks:
                    raise UsageError("--align-clocks applies to --format perfetto")
                files = ws.export(out_dir, fmt, trace_id=trace_id, per_trace=per_trace, overwrite=overwrite,
                                  progress=progress, partition_by=partition_by, trace_id_offset=trace_id_offset)
    finally:
        if progress:
            progress.close()
    if fmt != "perfetto":
        click.echo(f"wrote {len(files)} {plural(len(files), 'file')} to {out_dir}")
        return
    window = ""
    if result.start is not None or result.end is not None:
        window = f" from ts {'start' if result.start is None else result.start} to {'end' if result.end is None else result.end}"
    labels = {"range": "NVTX range", "async": "start/end range", "mark": "NVTX mark", "api": "API call",
              "kernel": "kernel", "memcpy": "copy", "memset": "memset", "flow": "launch arrow"}
    parts = ", ".join(f"{n:,} {plural(n, label)}" for kind, label in labels.items() if (n := result.counts.get(kind)))
    what = f"trace {result.trace_id}" if result.trace_id is not None else f"{len(result.trace_ids)} traces"
    click.echo(f"wrote {what}{window} to {out_dir}: {parts or 'no events'}")
    if apart:
        tell(apart)
    if result.overlap_tracks:
        click.echo(f"  {result.overlap_tracks} extra track(s) hold events that partly overlap others on their thread or stream")
