"""Commands that write or describe the workspace: ingest, upgrade, info, rm."""

from __future__ import annotations

import json
from pathlib import Path

import click

from traceql.core.faults import printable
from traceql.core.progress import for_stderr
from traceql.outputs.numbers import human_ns
from traceql.outputs.summary_text import source_label
from traceql.cli.context import Context, say_wait
from traceql.cli.ingested import tell_ingested
from traceql.cli.output import gpu_list, say, shown_path
from traceql.cli.params import PATH_OR_URL, engine_options, format_option
from traceql.core.errors import UsageError
from traceql.cli.group import cli


@cli.command()
@click.argument("files", nargs=-1, required=True, type=PATH_OR_URL)
@click.option("--flops", "flops_plugins", multiple=True, metavar="PLUGIN",
              help="A FLOPs plug-in: a module name or a .py file with a dict FLOPS of op names to functions "
                   "(op, shapes, dtypes, direction) -> (flops, bytes); repeatable, before $TRACEQL_FLOPS and "
                   "the 'traceql.flops' entry points. Its formulas win over the built-in ones for the ops it names.")
@click.option("--rank", type=click.IntRange(0, 2**31 - 1), default=None,
              help="The rank of the file (one file only), over what it records or its name says.")
@click.option("--host", default=None, metavar="NAME",
              help="The host the files were profiled on, over what they record or their names say.")
@click.option("--jobs", "-j", type=click.IntRange(1), default=None,
              help="Files read at a time, each by a worker process (default: one per core when the "
                   "files hold 64 MB or more together, else one at a time).")
@engine_options
@click.pass_obj
def ingest(obj: Context, files, flops_plugins, rank, host, jobs):
    """Load profiler exports into the workspace: Nsight Systems .sqlite (or a .nsys-rep/.qdrep
    report, exported with nsys when it is on PATH or $TRACEQL_NSYS names it, into a cache
    beside the workspace), nvprof .nvvp/.sql, PyTorch profiler (Kineto) .json.

    Several files are added together, all or nothing. A file that is already in the
    workspace (same absolute path) is replaced. The source files are only read.

    FLOPs and bytes of PyTorch ops are computed here, by the built-in formulas and by your
    plug-ins (--flops, $TRACEQL_FLOPS; README, "Custom FLOPs"): ingest a file again to apply
    a changed plug-in.

    Each trace's host, rank, local rank and world size are read from what the file records
    (nsys: the profiled machine's Hostname and the profiled process's environment, RANK,
    OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID ...; Kineto: distributedInfo), else from its
    name ('rank3', nsys's -o ..._%h_%p); trace.host_source, rank_source ... say which.

    With --engine spark, --db names a Parquet export (a directory, new or one to add to) and
    the files, local or URLs (hdfs://, s3a://), are ingested by Spark tasks, one per file, each
    writing its trace's partitions; the export changes only when every task succeeded.
    """
    if obj.engine == "spark":
        return _ingest_on_spark(obj, files, flops_plugins, rank, host, jobs)
    from traceql.store.ingest import ingest as ingest_files

    obj.local_db()
    if urls := [f for f in files if isinstance(f, str)]:
        raise UsageError(f"{urls[0]}: a URL is ingested with --engine spark; DuckDB reads local files")

    progress = for_stderr()  # bars on a terminal only
    try:
        results = ingest_files(files, db=obj.db, progress=progress,
                               on_wait=say_wait, flops=list(flops_plugins) or None, rank=rank, host=host,
                               jobs=jobs)
    finally:
        if progress:
            progress.close()
    tell_ingested(results, obj.db)


def _ingest_on_spark(obj: Context, files, flops_plugins, rank, host, jobs) -> None:
    from traceql.engines.spark import parse_conf
    from traceql.engines.spark_ingest import ingest as ingest_on_spark

    if rank is not None or jobs is not None:
        raise UsageError(f"{'--rank' if rank is not None else '--jobs'} is for a DuckDB ingest: with --engine "
                         "spark each file's rank comes from the file, and Spark's cores set the parallelism")
    if str(obj.db).endswith(".duckdb"):
        raise UsageError(f"--db {obj.db}: ingest --engine spark writes a Parquet export, a directory: "
                         "give --db DIR (a new one, or an export to add the files to)")
    done = ingest_on_spark(files, obj.db, master=obj.spark_master, conf=parse_conf(obj.spark_conf),
                           flops=list(flops_plugins) or None, host=host)
    for r in done:
        click.echo(f"added trace {r.trace_id}: {printable(r.source)} in {r.seconds:.2f} s "
                   f"({r.cpu_seconds:.2f} s CPU) on a Spark task")
        from traceql.store.workspace import COUNTED

        click.echo("  " + ", ".join(f"{v} {r.counts[v]:,}" for v in COUNTED if v in r.counts))
    click.echo(f"export: {obj.db}")


@cli.command()
@click.pass_obj
def upgrade(obj: Context):
    """Bring a workspace written by an older traceql to this version's contract.

    A workspace records the contract version (views, columns, attribution rules) its rows were
    computed under; every other command refuses an older one (exit 6) and says so. upgrade
    rewrites it in a temporary copy that replaces it only when everything succeeded, keeping
    the trace ids: each trace is read again from its source file when that file is still
    there and unchanged (same size and SHA-256), else computed again from the rows the
    workspace holds (what only the source holds stays empty; ingest_stats says so).
    schemas/CHANGELOG.md lists what each contract version changed.
    """
    from traceql.store.contract import CONTRACT_VERSION
    from traceql.store.upgrade import upgrade as run_upgrade

    progress = for_stderr()
    try:
        old, done = run_upgrade(obj.db, progress=progress, on_wait=say_wait)
    finally:
        if progress:
            progress.close()
    if old == CONTRACT_VERSION:
        click.echo(f"{obj.db}: already at contract version {CONTRACT_VERSION}; nothing to do")
        return
    for t in done:
        how = "read again from its source" if t.read_again else f"computed from the workspace's rows: {t.reason}"
        click.echo(f"trace {t.trace_id}: {how}")
    click.echo(f"upgraded {obj.db} from contract version {old} to {CONTRACT_VERSION} "
               f"({len(done)} trace{'' if len(done) == 1 else 's'})")


@cli.command()
@format_option(choices=["table", "json"])
@click.pass_obj
def info(obj: Context, fmt):
    """Show each ingested trace: source, versions, GPUs, rows per view, time span."""
    with obj.open() as ws:
        rows = ws.info()
    if fmt == "json":
        click.echo(json.dumps(rows, default=str, indent=1))
        return
    if not rows:
        click.echo(f"{obj.db}: no traces yet")
    for r in rows:
        say(f"trace {r['trace_id']}: {shown_path(printable(r['path']), len(str(r['trace_id'])) + 8)}", 2)
        version = source_label(r["source_format"], r["exporter_version"] or "(version not recorded)")
        say(printable(f"  format   {version}, "
                      f"{'schema ' + r['schema_version'] if r['schema_version'] else 'no schema version'} "
                      f"(layout {r['layout']})"), 11)
        if r["host"]:
            say(f"  host     {printable(r['host'])} ({r['host_source']})", 11)
        if r["rank"] is not None or r["world_size"] is not None:
            given = [(text, source) for text, value, source in (
                (str(r["rank"]), r["rank"], r["rank_source"]), (f"of {r['world_size']}", r["world_size"],
                                                                r["world_size_source"]),
                (f"local rank {r['local_rank']}", r["local_rank"], r["local_rank_source"])) if value is not None]
            if len({source for _, source in given}) == 1:  # '3 of 6, local rank 1 (recorded)'
                line = " ".join(text for text, _ in given[:2]) + "".join(f", {t}" for t, _ in given[2:])
                line += f" ({given[0][1]})"
            else:
                line = ", ".join(f"{text} ({source})" for text, source in given)
            say(f"  rank     {'unknown, ' if r['rank'] is None else ''}{line}", 11)
        say(f"  GPUs     {printable(gpu_list(r['gpus'])) or 'none'}", 11)
        if r["start_ts"] is None:
            say("  span     none: the export holds no event with a time (no kernels, copies, API calls "
                "or NVTX ranges)", 11)
        else:
            say(f"  span     {human_ns(r['duration'])} from ts {r['start_ts']} to {r['end_ts']} "
                f"({r['clock']} clock)", 11)
        say("  rows     " + ", ".join(f"{k}\0{v:,}" for k, v in r["counts"].items()), 11)
        for w in r["warnings"]:
            say(f"  warning  {printable(w)}", 11)


@cli.command("rm")
@click.argument("trace_ids", nargs=-1, required=True, type=int, metavar="TRACE_ID...")
@click.pass_obj
def rm(obj: Context, trace_ids):
    """Remove traces (by id, see `traceql info`) from the workspace: their rows in every view
    and their stored reports, all at once, or nothing when an id is not there.

    Tables you made with `sql --write` are left as they are. The workspace is rewritten as a
    copy renamed over it, like an ingest: interrupted, it is unchanged.
    """
    from traceql.store.remove import remove

    for r in remove(trace_ids, db=obj.db, on_wait=say_wait):
        click.echo(f"removed trace {r.trace_id}: {printable(r.path)} ({r.rows:,} rows)")
    click.echo(f"workspace: {obj.db}")
