"""The traceql command line: a thin layer over the library API."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import click

from traceql.core.version import __version__
from traceql.query import library
from traceql.core.errors import InputError, TraceqlError, UsageError
from traceql.core.faults import printable
from traceql.query.jobs import pooling_warning, split_note
from traceql.core.progress import for_stderr
from traceql.outputs.render import FORMATS, UNITS, human_ns, humanize, render, render_summary, source_label
from traceql.query.reports import REPORTS, blurb, empty_note, report_query
from traceql.core.resources import view_docs

# Imported where a command needs them, so that the others start faster: traceql.ingest
# (the ingest machinery) and traceql.query.sqlcheck (sqlglot).


_opened = {"ctx": None}  # the command's Context: its workspace names errors that reach main() unnamed


class Context:
    engine = "duckdb"  # --engine spark (engine_options): --db names a Parquet export, read on Spark
    spark_master = None
    spark_conf: tuple = ()

    def __init__(self, db: Path | None, debug: bool, queries=()):
        self._db = db
        self.debug = debug
        self.queries = tuple(queries)
        self.wide = False
        self.width = None  # --width N
        self.overwrite = False  # --overwrite (overwrite_option)

    @property
    def db(self) -> Path:
        """--db, else $TRACEQL_DB or ./traceql.duckdb (traceql.store.workspace, and with it DuckDB,
        imported only by the commands that use a workspace)."""
        if self._db is None:
            from traceql.store.workspace import default_db

            self._db = default_db()
        return self._db

    @db.setter
    def db(self, value: Path) -> None:
        self._db = value

    def open(self, write: bool = False, queries=(), allow_files: bool = False) -> Workspace:
        from traceql.api import Workspace

        if self.engine == "spark":  # traceql.engines.spark: the same reports, on Spark over the Parquet export
            from traceql.engines.spark import SparkWorkspace, parse_conf

            return SparkWorkspace(self.db, queries=self.queries + tuple(queries), master=self.spark_master,
                                  conf=parse_conf(self.spark_conf))
        ws = Workspace(self.db, write=write, queries=self.queries + tuple(queries), on_wait=say_wait,
                       allow_files=allow_files)
        from traceql.core.faults import interrupt_on_sigint

        interrupt_on_sigint(ws.con)  # Ctrl-C also while a streamed result is read: exit 130
        ws.on_connect.append(interrupt_on_sigint)  # and on the connection after derived tables are built
        return ws


def tell(message: str) -> None:
    """A note or warning for people on stderr ('traceql: ' first), wrapped to the terminal's
    width when stderr is one."""
    from traceql.outputs.render import _fill, terminal_width

    click.echo(_fill(f"traceql: {message}", terminal_width(sys.stderr), "  "), err=True)


def say(text: str, indent: int = 2) -> None:
    """A line for people on stdout, wrapped to the terminal's width ($COLUMNS, else the
    terminal's; into a pipe as it is), the lines after the first indented by `indent`; a NUL
    is a space that never breaks ('kernel\0' '17,032' stays on one line)."""
    from traceql.outputs.render import hang, terminal_width

    click.echo(hang(text, None if wide() else terminal_width(sys.stdout), indent).replace("\0", " "))


def shown_path(path: str, before: int) -> str:
    """A path on a line after `before` columns of text: shortened in the middle (its file name
    kept) to fit a terminal; whole into a pipe."""
    from traceql.outputs.render import shorten_middle, terminal_width

    width = None if wide() else terminal_width(sys.stdout)
    return path if width is None or before + len(path) <= width else shorten_middle(path, width - before)


def gpu_list(gpus: list[str]) -> str:
    """'0 NVIDIA H100 80GB HBM3, 1 NVIDIA H100 80GB HBM3, ...' as '0-7 NVIDIA H100 80GB HBM3 (8)'
    when consecutive GPUs share a model."""
    runs: list[list] = []  # [first id, last id, model]
    for g in gpus:
        head, _, model = g.partition(" ")
        if head.isdigit() and runs and runs[-1][2] == model and runs[-1][1] == int(head) - 1:
            runs[-1][1] = int(head)
        elif head.isdigit():
            runs.append([int(head), int(head), model])
        else:
            runs.append([None, None, g])
    return ", ".join(model if a is None else f"{a} {model}" if a == b else f"{a}-{b} {model} ({b - a + 1})"
                     for a, b, model in runs)


def say_wait(message: str) -> None:
    """Tell on stderr that a command waits for another writer of the workspace."""
    click.echo(f"traceql: {message}", err=True)


QUERIES_HELP = ("A folder of your own queries (NAME.sql, same conventions as the built-in ones); "
                "repeatable, added to $TRACEQL_QUERIES. A name already taken is an error.")


DB_HELP = "Workspace database file [default: $TRACEQL_DB or ./traceql.duckdb]."


def _workspace_options() -> list[click.Option]:
    """--db, --queries and --debug for a command, so that they work after its name too
    (`traceql ingest x.sqlite --db ws.duckdb`), setting what the same option before it sets."""

    def set_db(ctx, _param, value):
        if value is not None:
            ctx.find_object(Context).db = value

    def add_queries(ctx, _param, value):
        if value:
            obj = ctx.find_object(Context)
            obj.queries = obj.queries + tuple(value)

    def set_debug(ctx, _param, value):
        if value:
            ctx.find_object(Context).debug = True

    return [click.Option(["--db"], type=click.Path(path_type=Path), default=None, expose_value=False,
                         callback=set_db, help=DB_HELP),
            click.Option(["--queries"], multiple=True, type=click.Path(path_type=Path), metavar="DIR",
                         expose_value=False, callback=add_queries, help=QUERIES_HELP),
            click.Option(["--debug"], is_flag=True, expose_value=False, callback=set_debug,
                         help="Show a traceback on errors.")]


class _Group(click.Group):
    def add_command(self, cmd, name=None):
        have = {opt for p in cmd.params for opt in getattr(p, "opts", ())}
        cmd.params += [o for o in _workspace_options() if not set(o.opts) & have]
        super().add_command(cmd, name)


def wide_option(f):
    """--wide and --width N, the width of tables for people (every command that prints them):
    --wide every name whole, one line per row (for less -S); --width N fitted to N columns."""

    def set_wide(ctx, _param, value):
        if value:
            ctx.find_object(Context).wide = True

    def set_width(ctx, _param, value):
        if value is not None:
            ctx.find_object(Context).width = value

    f = click.option("--width", type=click.IntRange(min=20), default=None, metavar="N", expose_value=False,
                     callback=set_width,
                     help="Tables: fit N columns (PyProf's prof -w), on a terminal, in a pipe and in -o FILE. "
                          "By default tables fit $COLUMNS or the terminal.")(f)
    return click.option("--wide", is_flag=True, expose_value=False, callback=set_wide,
                        help="Tables: print names whole and each row on one line, however long "
                             "(for a pager: | less -S). By default tables fit $COLUMNS or the terminal.")(f)


def overwrite_option(f):
    """--overwrite: -o may replace a file that exists (never the workspace: traceql.store.guard.check_output)."""

    def set_overwrite(ctx, _param, value):
        if value:
            ctx.find_object(Context).overwrite = True

    return click.option("--overwrite", is_flag=True, expose_value=False, callback=set_overwrite,
                        help="Let -o replace a file that exists.")(f)


def engine_options(f):
    """--engine, --spark-master and --spark-conf: run the command's queries on Spark (traceql.engines.spark)."""

    def setter(attr):
        def set_value(ctx, _param, value):
            if value:
                setattr(ctx.find_object(Context), attr, tuple(value) if isinstance(value, tuple) else value)
        return set_value

    f = click.option("--spark-conf", multiple=True, metavar="KEY=VALUE", expose_value=False,
                     callback=setter("spark_conf"),
                     help="A Spark setting for --engine spark (repeatable), over spark-defaults.conf.")(f)
    f = click.option("--spark-master", metavar="URL", default=None, expose_value=False,
                     callback=setter("spark_master"),
                     help="Spark master for --engine spark (spark://host:7077, yarn, local[4], ...) "
                          "[default: spark-defaults.conf, else local[*]].")(f)
    return click.option("--engine", type=click.Choice(["duckdb", "spark"]), default=None, expose_value=False,
                        callback=setter("engine"),
                        help="duckdb: the workspace (--db); spark: --db names a Parquet export partitioned by "
                             "trace (export --partition-by trace), queried on Apache Spark [default: duckdb].")(f)


def wide() -> bool:
    """Whether the command running was given --wide (tables for people: no width limit)."""
    ctx = click.get_current_context(silent=True)
    obj = ctx.find_object(Context) if ctx is not None else None
    return bool(obj is not None and obj.wide)


def table_width(out=None) -> int | None:
    """The width tables for people are fitted to: --width N; else none with --wide or when
    writing the file OUT (-o FILE: lines as long as the data); else $COLUMNS or the terminal's."""
    ctx = click.get_current_context(silent=True)
    obj = ctx.find_object(Context) if ctx is not None else None
    if obj is not None and obj.width is not None:
        if obj.wide:
            raise UsageError("--wide and --width: give one (--wide: no width limit)")
        return obj.width
    if out is not None:
        return None
    from traceql.outputs.render import terminal_width

    return terminal_width(sys.stdout, wide())


HELP_WIDTH = 120  # help is wrapped at the terminal's width, up to this many columns


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": HELP_WIDTH})
@click.option("--db", type=click.Path(path_type=Path), default=None, help=DB_HELP)
@click.option("--queries", "queries", multiple=True, type=click.Path(path_type=Path), metavar="DIR",
              help=QUERIES_HELP)
@click.option("--debug", is_flag=True, help="Show a traceback on errors.")
@click.version_option(__version__, prog_name="traceql")
@click.pass_context
def cli(ctx, db, queries, debug):
    """Analyze Nsight Systems, nvprof and PyTorch profiler GPU traces with SQL.

    Ingest Nsight Systems SQLite exports, nvprof databases and PyTorch profiler (Kineto)
    JSON traces into a DuckDB workspace, then query the normalized views with `traceql
    sql`, the reports (`traceql report --by ...`, `traceql summary`), the query library
    (`traceql queries`, `traceql query NAME`) or from Python with traceql.open().
    `traceql schema VIEW` describes a view.

    \b
    VIEWS

    The options above (--db, --queries, --debug) are also accepted after the command.
    """
    ctx.obj = Context(db, debug, queries)
    _opened["ctx"] = ctx.obj


def _views_help() -> str:
    """The contract's views for the top-level help, from the contract itself."""
    import textwrap

    from traceql.core.resources import CONTRACT_TABLES, CONTRACT_VIEWS

    # the docstring's lines are indented by 4: so are the lines after the first
    return textwrap.fill("Views: " + ", ".join(CONTRACT_TABLES + CONTRACT_VIEWS) + ".", 78, subsequent_indent="    ")


cli.help = cli.help.replace("VIEWS", _views_help())


@cli.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
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
    """
    from traceql.store.ingest import ingest as ingest_files

    progress = for_stderr()  # bars on a terminal only
    try:
        results = ingest_files(files, db=obj.db, progress=progress,
                               on_wait=say_wait, flops=list(flops_plugins) or None, rank=rank, host=host,
                               jobs=jobs)
    finally:
        if progress:
            progress.close()
    for r in results:
        verb = "replaced" if r.replaced else "added"
        det = r.detected
        source = source_label(det.source_format, det.exporter_version)
        version = f"{source} schema {det.schema_version}" if det.schema_version else f"{source}, no schema version"
        click.echo(f"{verb} trace {r.trace_id}: {printable(str(r.path))} "
                   f"({version}, layout {det.layout}) in {r.seconds:.2f} s")
        from traceql.store.workspace import COUNTED

        if det.exported_from is not None:
            click.echo(f"  exported from {printable(str(det.exported_from))} by nsys export")
        click.echo("  " + ", ".join(f"{v} {r.counts[v]:,}" for v in COUNTED if v in r.counts))
        if r.identity is not None and r.identity.facts:
            click.echo("  " + printable(r.identity.line()))
        for w in r.warnings:
            click.echo(f"  warning: {printable(w)}")
        if hint := r.capture_hint():
            click.echo(f"  note: {hint}")
    click.echo(f"workspace: {obj.db}")


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
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
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


SQL_HELP = """Run SQL over the workspace and print the result.

The SQL comes from the QUERY argument, from -f FILE, or from standard input
(QUERY or FILE '-', or no QUERY with input piped in), e.g.

\b
  traceql sql "SELECT name, sum(dur) FROM kernel GROUP BY name LIMIT 5"
  traceql sql -f top.sql --param n=5          (top.sql: ... LIMIT $n)
  traceql sql --dialect sqlite -f nsys_style.sql

It is checked before it runs: a syntax error gives its line and column, an unknown view
or column the closest names (`traceql schema` lists them all), and statements that are
not queries (CREATE, DROP, INSERT, UPDATE, DELETE, ATTACH, COPY, EXPORT, PRAGMA, SET,
INSTALL, LOAD, CALL, ...) are refused unless --write. Parameters ($name in the SQL) take
their values from --param name=value: integers and decimal numbers are numbers, anything
else text; DuckDB binds them, they never become part of the SQL text.
"""


@cli.command(help=SQL_HELP)
@click.argument("query", required=False)
@click.option("-f", "--file", "file", type=click.Path(path_type=Path), default=None,
              help="Read the SQL from this file ('-' for standard input).")
@click.option("--param", "params", multiple=True, metavar="NAME=VALUE",
              help="Value of the $NAME placeholder (repeatable).")
@click.option("--dialect", default="duckdb", show_default=True, metavar="DIALECT",
              help="The SQL's dialect, translated to DuckDB: sqlite (as the nsys stats scripts are written: "
                   "integer division, LIKE, date functions keep their SQLite meaning), postgres, mysql, spark, "
                   "bigquery, snowflake, trino, tsql, ... (sqlglot's dialects).")
@click.option("--write", is_flag=True,
              help="Allow statements that change the workspace (CREATE, INSERT, DROP, ...) or write files "
                   "(COPY, EXPORT; with --allow-files): the workspace is opened read-write and the changes are "
                   "saved in it. A later ingest keeps them, but they are yours to keep consistent.")
@click.option("--allow-files", is_flag=True,
              help="Let the SQL read and write files of this machine (read_csv, read_parquet, glob, COPY ... TO, "
                   "ATTACH), e.g. to join your own data. Off by default: a query, or a view stored in a "
                   "workspace someone sent you, reads only the workspace.")
@click.option("--format", "fmt", type=click.Choice(FORMATS + ("parquet",)), default="table", show_default=True,
              help="table for people; csv, tsv, json, markdown, parquet (needs -o) for machines.")
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None, help="Write to this file.")
@overwrite_option
@wide_option
@click.pass_obj
def sql(obj: Context, query, file, params, dialect, write, allow_files, fmt, output):
    from traceql.query.library import parse_params

    text = read_sql(query, file)
    values = parse_params(params)
    check_output(output)
    with obj.open(write=write, allow_files=allow_files) as ws:
        table = ws.sql(text, values or None, dialect=dialect, batches=True)
        emit_raw(table, fmt, output)


def read_sql(query: str | None, file: Path | None) -> str:
    """The SQL of `traceql sql`: the argument, the file, or standard input."""
    if query is not None and file is not None:
        raise UsageError("give the SQL as an argument or with -f FILE, not both")
    if file is not None and str(file) != "-":
        try:
            return file.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise InputError(f"{file}: no such file") from None
        except IsADirectoryError:
            raise InputError(f"{file}: is a directory, not a file of SQL") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"{file}: cannot read ({getattr(exc, 'strerror', None) or exc})") from None
    if query is not None and query != "-":
        return query
    if query is None and file is None and sys.stdin.isatty():
        raise UsageError("no SQL: give it as an argument, with -f FILE, or on standard input")
    return sys.stdin.read()


def check_output(path: Path | None, folder: bool = False, overwrite: bool | None = None, inputs=()) -> None:
    """-o PATH before any work, the same rule for every command (traceql.store.guard.check_output):
    never the workspace (--db) or an input, a file that exists only with --overwrite."""
    from traceql.store.guard import check_output as check

    obj = click.get_current_context().find_object(Context)
    check(path, workspace=obj.db if obj is not None else None, inputs=inputs,
          overwrite=obj.overwrite if overwrite is None and obj is not None else bool(overwrite), folder=folder)


def emit_raw(table, fmt, output) -> None:
    """Print or write a result as it is (no unit conversion): sql and query. table: a
    pyarrow Table or RecordBatchReader (written as it is read)."""
    if fmt == "parquet":
        emit(table, fmt, output)
    elif output is None:
        render(table, fmt, width=table_width(), wide=wide())
    else:
        with open(output, "w", encoding="utf-8", newline="") as fh:
            render(table, fmt, fh, width=table_width(fh))


@cli.command("queries")
@click.argument("name", required=False)
@click.option("--queries", "queries", multiple=True, type=click.Path(path_type=Path), metavar="DIR",
              help=QUERIES_HELP)
@click.pass_obj
def queries_cmd(obj: Context, name, queries):
    """List the query library: each query's description and parameters; with NAME, also its SQL.

    Built-in queries come with traceql (the reports use them); your own are the NAME.sql
    files of --queries DIR folders and of $TRACEQL_QUERIES (folders separated by ':'), which
    start with '-- NAME: description' and '-- param NAME: description' lines and use $NAME
    placeholders. Run one with `traceql query NAME --param k=v`.
    """
    lib = library.collection(obj.queries + tuple(queries))
    if name is not None and name not in lib:
        raise UsageError(f"no query {name!r}; queries: {', '.join(lib)}")
    for q in ([lib[name]] if name else lib.values()):
        origin = f" [{q.origin}]" if q.origin else ""
        say(printable(f"{q.name}: {q.description}{origin}"), 2)
        for p, doc in q.params.items():
            say(printable(f"  --param {p}: {doc}"), 4)
        if name:
            click.echo("")
            click.echo("\n".join(printable(line) for line in q.sql.rstrip().splitlines()))
    if name is None:
        click.echo("")
        say(f"{len(lib)} queries; `traceql queries NAME` shows one with its SQL, "
            "`traceql query NAME --param k=v` runs it", 0)


@cli.command("query")
@click.argument("name")
@click.option("--param", "params", multiple=True, metavar="NAME=VALUE",
              help="Value of the query's parameter NAME (repeatable); parameters not given are NULL.")
@click.option("--queries", "queries", multiple=True, type=click.Path(path_type=Path), metavar="DIR",
              help=QUERIES_HELP)
@click.option("--format", "fmt", type=click.Choice(FORMATS + ("parquet",)), default="table", show_default=True,
              help="table for people; csv, tsv, json, markdown, parquet (needs -o) for machines.")
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None, help="Write to this file.")
@overwrite_option
@wide_option
@engine_options
@click.pass_obj
def query_cmd(obj: Context, name, params, queries, fmt, output):
    """Run a query of the library (see `traceql queries`) with --param values, e.g.

    traceql query range --param group_by=path --param max_depth=2
    """
    from traceql.query.library import parse_params

    values = parse_params(params)
    check_output(output)
    with obj.open(queries=queries) as ws:
        table = ws.query(name, **values)
        emit_raw(table, fmt, output)


@cli.command()
@click.option("--format", "fmt", type=click.Choice(["csv", "parquet", "perfetto", "folded"]), default="parquet",
              show_default=True, help="csv, parquet: every view as a file in the -o directory; perfetto: a "
                                      "timeline (Chrome trace event JSON) of one trace, or of all, each a "
                                      "process group; folded: the kernels' GPU time per call stack for flame "
                                      "graphs (-o FILE).")
@click.option("-o", "--output", "out_dir", type=click.Path(path_type=Path), required=True,
              help="Directory to write into (created if needed); with --format perfetto the file "
                   "(.json, or .json.gz compressed).")
@click.option("--trace", "trace_id", type=int, default=None, help="Only this trace id.")
@click.option("--per-trace", is_flag=True, help="One sub-folder per trace instead of one file per view.")
@click.option("--start", default=None, metavar="TIME",
              help="perfetto: start of the window: ns on the trace clock, or with a unit (1.5s, 200ms, 50us); "
                   "+TIME counts from the trace's first event.")
@click.option("--end", default=None, metavar="TIME", help="perfetto: end of the window (exclusive), like --start.")
@click.option("--align-clocks", is_flag=True,
              help="perfetto, several traces: take each host's clock skew, estimated from collective kernels "
                   "(report --by clock), off its traces' times.")
@click.option("--overwrite", is_flag=True, help="Replace files that already exist.")
@click.option("--partition-by", "partition_by", type=click.Choice(["trace"]), default=None,
              help="parquet: Hive-style partitions VIEW/trace_id=N/ with a manifest, for Spark "
                   "(report --engine spark) and other Parquet readers.")
@click.option("--trace-id-offset", type=click.IntRange(min=0), default=0, show_default=True,
              help="With --partition-by trace: add this to the trace ids written, so that workspaces "
                   "ingested apart (one per rank) fill one export without clashing.")
@click.pass_obj
def export(obj: Context, fmt, out_dir, trace_id, per_trace, start, end, align_clocks, overwrite, partition_by,
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
"""


def _by_list() -> str:
    """Every --by value on a line of its own, with its one-line description."""
    pad = max(len(n) for n in REPORTS) + len("--by ")
    return "\n".join(f"{'--by ' + n:<{pad}}  {blurb(n)}" for n in REPORTS)


REPORT_HELP = REPORT_HELP.replace("BY_LIST", _by_list())
ONE_ROW_PER_TRACE = ("rank", "clock", "memory")  # reports whose rows are traces (or their GPUs): nothing pooled


@cli.command(help=REPORT_HELP)
@click.option("--by", "by", type=click.Choice(list(REPORTS)), required=True, metavar="NAME",
              help="What to report on: one of the --by values above.")
@click.option("--trace", "trace_id", type=int, default=None, help="Only this trace id.")
@click.option("--per-trace", is_flag=True, help="Split rows by trace (a trace_id column; % and --limit per trace).")
@click.option("--where", "where", default=None, metavar="EXPR",
              help="Keep input rows matching this SQL boolean expression over the report's input view "
                   "(kernel, api_call, memcpy, memset, gpu_op, nvtx_range; see `traceql schema VIEW`), "
                   "e.g. \"name LIKE '%gemm%' AND dur > 10000\".")
@click.option("--sort", default=None, metavar="COLUMN[:asc|:desc]",
              help="Order by this column of the report, named as in csv output (avg_ns) or as the table header "
                   "shows it (avg, 'avg ms', Time(%)); numbers descending, text ascending by default.")
@click.option("--limit", type=click.IntRange(min=0), default=None, help="At most N rows (per trace with --per-trace).")
@click.option("-c", "--columns", default=None, metavar="COL,COL",
              help="Only these columns, in this order (names as for --sort).")
@click.option("--format", "fmt", type=click.Choice(FORMATS + ("parquet",)), default="table", show_default=True,
              help="table for people (readable time units); csv, tsv, json, markdown, parquet for machines (ns).")
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None, help="Write to this file.")
@click.option("--unit", type=click.Choice(list(UNITS)), default=None,
              help="Times in this unit in --format table or markdown (default: table picks a readable unit).")
@click.option("--with-dims", is_flag=True, help="kernel: group by grid and block size too.")
@click.option("--group", "group_by", type=click.Choice(["group", "name", "path", "frame", "stack"]), default="group",
              show_default=True,
              help="range: group instances by operator (the name without PyTorch's per-instance ', seq = N', "
                   "', op_id = N', ', sizes = [...]' and PyProf's marker details), by full name, or by nesting "
                   "path. source: by the innermost frame of the user's code (frame, the default) or by the "
                   "whole stack.")
@click.option("--depth", "max_depth", type=click.IntRange(min=1), default=None,
              help="range: keep ranges above this depth (path has at most N levels).")
@click.option("--match", "match", multiple=True, metavar="WORD",
              help="range: keep ranges whose name contains WORD (repeatable, any matches, ignores case).")
@click.option("--domain", default=None, help="range: only this NVTX domain ('' = default domain).")
@click.option("--spread", is_flag=True,
              help="range: the spread of the instances too: min, median, max and standard deviation of the CPU "
                   "time and of the kernel time per instance.")
@click.option("--skip-first", "skip_first", type=click.IntRange(min=0), default=None, metavar="N",
              help="range: leave out the first N instances of each name (per trace; the warm-up iterations).")
@click.option("--with-shapes", is_flag=True, help="op: split each op by the input sizes of its calls.")
@click.option("--level", type=click.Choice(["top", "leaf"]), default="top", show_default=True,
              help="op: the outermost op of each call stack (aten::linear) or the op that launched the kernels "
                   "(aten::addmm).")
@click.option("--peak-tflops", type=click.FloatRange(min=0, min_open=True), default=None, metavar="TFLOPS",
              help="op: peak TFLOP/s for the roofline instead of the GPU's (device_peak).")
@click.option("--peak-gbps", type=click.FloatRange(min=0, min_open=True), default=None, metavar="GBPS",
              help="op: peak memory bandwidth in GB/s for the roofline instead of the GPU's.")
@click.option("--measure", type=click.Choice(["time", "compute"]), default="time", show_default=True,
              help="straggler: compare the ranges' durations, or the compute kernel time launched inside them.")
@click.option("--per-iteration", is_flag=True,
              help="straggler: a row per iteration (the i-th range of a name on every rank) instead of per name.")
@click.option("--recompute", is_flag=True,
              help="Compute the report from the tables even when ingest stored it (kernel, api, gpu and range "
                   "with their default options store one per trace; the rows are the same).")
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
def report(ctx, by, trace_id, per_trace, where, sort, limit, columns, fmt, output, unit, with_dims, group_by,
           max_depth, match, domain, spread, skip_first, with_shapes, level, peak_tflops, peak_gbps, measure,
           per_iteration, recompute, range_names, range_words):
    for option, param, owner in (("--with-dims", "with_dims", "kernel"), ("--group", "group_by", "range or source"),
                                 ("--depth", "max_depth", "range"), ("--match", "match", "range"),
                                 ("--domain", "domain", "range"), ("--spread", "spread", "range"),
                                 ("--skip-first", "skip_first", "range"), ("--with-shapes", "with_shapes", "op"),
                                 ("--level", "level", "op"), ("--peak-tflops", "peak_tflops", "op"),
                                 ("--peak-gbps", "peak_gbps", "op"), ("--measure", "measure", "straggler"),
                                 ("--per-iteration", "per_iteration", "straggler")):
        if by not in owner.split(" or ") and ctx.get_parameter_source(param) != click.core.ParameterSource.DEFAULT:
            raise UsageError(f"{option} applies to --by {owner} only")
    check_unit(unit, fmt)
    params = {"with_dims": with_dims} if by == "kernel" else {}
    if by == "range":
        params = {"group_by": group_by, "max_depth": max_depth, "match": list(match) or None, "domain": domain,
                  "spread": spread, "skip_first": skip_first}
    if by == "op":
        params = {"with_shapes": with_shapes, "level": level, "peak_tflops": peak_tflops, "peak_gbps": peak_gbps}
    from traceql.query.reports import GROUPINGS

    if by in GROUPINGS and ctx.get_parameter_source("group_by") != click.core.ParameterSource.DEFAULT:
        if group_by not in GROUPINGS[by]:
            raise UsageError(f"--group {group_by}: --by {by} groups by {' or '.join(GROUPINGS[by])}")
        if by == "source":
            params = {"group_by": group_by}
    if by == "straggler":
        params = {"measure": measure, "per_iteration": per_iteration}
    obj: Context = ctx.obj
    check_output(output)
    with obj.open() as ws:
        table = ws.report(by, trace_id=trace_id, per_trace=per_trace, where=where, sort=sort, limit=limit,
                          columns=columns, recompute=recompute, range=list(range_names) or None,
                          range_match=list(range_words) or None, **params)
        note = empty_note(ws, by, trace_id) if table.num_rows == 0 else None
        pooled = None if by in ONE_ROW_PER_TRACE else pooling_warning(ws, trace_id, per_trace)
    if note:
        click.echo(f"traceql: {note}", err=True)
    if pooled:
        tell(pooled)
    emit(table, fmt, output, unit=unit, labels=report_query(by).labels)


@cli.command()
@click.option("--trace", "trace_id", type=int, default=None, help="Only this trace id.")
@click.option("--per-trace", is_flag=True,
              help="One overview per trace instead of all traces together (the default when the traces "
                   "are not one job).")
@click.option("--limit", type=click.IntRange(min=0), default=None, help="At most N rows per section (and trace).")
@click.option("--format", "fmt", type=click.Choice(FORMATS + ("parquet",)), default="table", show_default=True,
              help="table: nvprof's layout for people; csv, tsv, parquet: the rows with a section column; "
                   "json: traces, GPUs and rows; markdown: the layout as markdown tables.")
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None, help="Write to this file.")
@click.option("--unit", type=click.Choice(list(UNITS)), default=None,
              help="Times in this unit in --format table or markdown (default: a readable unit, as the reports).")
@click.option("--recompute", is_flag=True,
              help="Compute the sections from the tables even when ingest stored them (the rows are the same).")
@overwrite_option
@wide_option
@engine_options
@click.pass_obj
def summary(obj: Context, trace_id, per_trace, limit, fmt, output, unit, recompute):
    """An nvprof-style overview: each trace's span, its GPUs and their busy share of the span,
    then "GPU activities" (kernels by name, copies by direction, memsets) and "API calls",
    with Time(%), Time, Calls, Avg, Min, Max, Name.

    Time(%) is the share of the summed time of the section (all GPU activities, or all API
    calls), not of wall time. Busy is the time a GPU ran at least one operation (overlapping
    streams counted once), as a share of the trace span (first to last event of any kind).
    Machine formats carry the nsys stats columns: section, name, calls, total_ns, pct,
    avg_ns, med_ns, min_ns, max_ns, stddev_ns (sample standard deviation, n - 1).
    """
    check_unit(unit, fmt)
    check_output(output)
    with obj.open() as ws:
        split = None if per_trace or trace_id is not None else split_note(ws)
        result = ws.summary(trace_id=trace_id, per_trace=per_trace or split is not None, limit=limit,
                            recompute=recompute)
    if split:
        tell(split)
    if fmt == "parquet":
        emit(result.rows, fmt, output)
    elif output is None:
        render_summary(result, fmt, unit=unit, width=table_width(), wide=wide())
    else:
        with open(output, "w", encoding="utf-8", newline="") as fh:
            render_summary(result, fmt, fh, unit=unit, width=table_width(fh))


ANALYZE_HELP = """Why the GPU is idle, what synchronizes, what to fix first.

Runs the rules of the query library's analyze/ folder (traceql queries analyze/RULE shows one):

\b
  gpu_gaps         GPU idle gaps and why the next work came late
  sync_calls       synchronizing calls and the GPU idle time after each
  pageable_memcpy  async copies from pageable memory (they run synchronously)
  sync_memcpy      synchronous host-device copies
  sync_memset      synchronous memsets of pinned or managed memory
  small_kernels    kernels shorter than their launch call (launch overhead)
  low_utilization  chunks of a GPU's time with low time utilization
  exposed_comm     communication kernels no computation overlapped
  iterations       iterations (ProfilerStep, a repeated range), their spread

Each finding comes with evidence rows (the gaps, calls, copies, kernels or windows, with the
NVTX range and thread they happened in) ranked by recoverable time, the time it cost; rules
overlap, so their times are not to be added. --param NAME=VALUE sets a rule's threshold
(--list shows them with their defaults). Tables and markdown show the top --limit rows per rule
(default 5); csv, tsv and parquet give one row per rule, or with a single --rule its evidence
rows; json gives both. --fail-on RULE (or 'any') exits with code 8 when the rule has findings
with recoverable time, for CI.
"""


@cli.command(help=ANALYZE_HELP)
@click.option("--rule", "rule_names", multiple=True, metavar="NAME", help="Run only this rule (repeatable).")
@click.option("--trace", "trace_id", type=int, default=None, help="Only this trace id.")
@click.option("--param", "params", multiple=True, metavar="NAME=VALUE",
              help="A rule parameter, e.g. min_gap_ns=500000 (repeatable; --list shows them).")
@click.option("--limit", type=click.IntRange(min=0), default=None,
              help="Evidence rows per rule and trace [default: 5 in tables and markdown, all otherwise].")
@click.option("--format", "fmt", type=click.Choice(FORMATS + ("parquet",)), default="table", show_default=True,
              help="table for people, markdown for a pull request; csv, tsv, json, parquet for machines (ns).")
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None, help="Write to this file.")
@click.option("--fail-on", "fail_on", multiple=True, metavar="RULE",
              help="Exit with code 8 when RULE ('any': any rule run) has findings (repeatable).")
@click.option("--list", "list_rules", is_flag=True, help="List the rules with their parameters and defaults.")
@overwrite_option
@wide_option
@click.pass_obj
def analyze(obj: Context, rule_names, trace_id, params, limit, fmt, output, fail_on, list_rules):
    from traceql.analysis.analyze import FINDINGS_EXIT, rule, rules, write_text
    from traceql.query.library import parse_params

    if list_rules:
        for r in (rules().values() if not rule_names else [rule(n) for n in rule_names]):
            click.echo(f"{r.name}: {r.description}")
            for p in r.thresholds:
                default = r.query.defaults.get(p)
                click.echo(f"  --param {p}=...  {r.query.params[p]} [default: {'-' if default is None else str(default).lower() if isinstance(default, bool) else default}]")
            click.echo("")
        return
    check_output(output)
    with obj.open() as ws:
        result = ws.analyze(list(rule_names) or None, trace_id=trace_id, **parse_params(params))
        traces = ws.execute("SELECT trace_id, path, duration FROM trace WHERE ? IS NULL OR trace_id = ? "
                            "ORDER BY trace_id", [trace_id, trace_id]).to_arrow_table().to_pylist()
        gpus = ws.report("breakdown", trace_id=trace_id, per_trace=True).to_pylist()
    if fmt in ("table", "markdown"):
        def write(fh, width=None):
            write_text(result, traces, fh, fmt, width=width, limit=5 if limit is None else limit, gpus=gpus)

        if output is None:
            write(sys.stdout, None if fmt == "markdown" else table_width())
        else:
            with open(output, "w", encoding="utf-8", newline="") as fh:
                write(fh, None if fmt == "markdown" else table_width(fh))
    elif fmt == "json":
        doc = {"findings": result.findings.to_pylist(),
               "evidence": {name: (t if limit is None else _first_rows(t, limit)).to_pylist()
                            for name, t in result.evidence.items()}}
        from traceql.outputs.render import _json_value

        text = json.dumps(doc, default=_json_value, indent=1) + "\n"
        if output is None:
            click.echo(text, nl=False)
        else:
            Path(output).write_text(text, encoding="utf-8")
    else:
        table = result.findings
        if len(result.rules) == 1:
            table = result.evidence[next(iter(result.rules))]
            table = table if limit is None else _first_rows(table, limit)
        emit(table, fmt, output)
    failed = result.failed(fail_on) if fail_on else []
    if failed:
        click.echo(f"traceql: analyze: findings for {', '.join(failed)} (--fail-on)", err=True)
        sys.stdout.flush()
        sys.exit(FINDINGS_EXIT)


def _first_rows(table, limit: int):
    """The first LIMIT rows of each trace of an evidence table (it is ranked within each trace)."""
    from traceql.query.reports import order_and_limit

    return order_and_limit(table, None, limit, per_trace=True)


DIFF_HELP = """Compare two runs: what changed, and whether it is more than run-to-run noise.

A (before) and B (after) are each a trace file (Nsight Systems, nvprof or PyTorch profiler;
ingested into a temporary workspace, removed afterwards), a trace id of the workspace (--db),
or a workspace file (all its traces make one side), e.g.

\b
  traceql diff before.sqlite after.sqlite
  traceql diff 1 2                 (two traces of the workspace)
  traceql diff base.duckdb trace.json.gz --format markdown --gate 5

Rows align kernels by name, PyTorch ops by name and direction, NVTX ranges by path (CPU time,
and GPU time of the work inside), API calls by name, copies by kind, memsets by memory kind;
totals are the iteration time, the GPU operation time, busy time per GPU and the span. When
one anchor (ProfilerStep, an NVTX range or a kernel's pace; traceql analyze --rule iterations)
gives iterations on both sides, times and calls are per iteration and iteration k of A is
paired with iteration k of B. A row changed when its test (paired over the iterations for the
headline, kernels, ops and NVTX ranges; else Yuen's test on trimmed means over its instances'
durations) gives a Benjamini-Hochberg q below --alpha AND the change is at least --min-effect
percent; a key on one side only is added or removed. Kernels, ops, copies and memsets are compared within launch
configuration, input sizes or byte count (Δ%). Δ = B - A.

--gate PCT exits with code 7 when, beyond the noise (q below --alpha), the iteration time or
the GPU operation time per iteration is slower by more than PCT percent, or a kernel, op or
NVTX range adds more than PCT percent of A's iteration time per iteration (+%iter).
Tables and markdown show the changed rows; csv, tsv, json and parquet give every row.
"""


@cli.command(help=DIFF_HELP)
@click.argument("a", metavar="A")
@click.argument("b", metavar="B")
@click.option("--format", "fmt", type=click.Choice(FORMATS + ("parquet",)), default="table", show_default=True,
              help="table for people, markdown for a pull request; csv, tsv, json, parquet: every row (ns).")
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None, help="Write to this file.")
@click.option("--gate", type=click.FloatRange(min=0), default=None, metavar="PCT",
              help="Exit with code 7 when iteration time or GPU operation time per iteration is slower by more "
                   "than PCT percent, or a kernel, op or NVTX range adds more than PCT percent of the iteration "
                   "time, beyond the noise (q below --alpha).")
@click.option("--alpha", type=click.FloatRange(min=0, max=1, min_open=True, max_open=True), default=0.01,
              show_default=True, metavar="Q", help="False discovery rate: a change needs a Benjamini-Hochberg q below it.")
@click.option("--min-effect", "min_effect", type=click.FloatRange(min=0), default=5.0, show_default=True,
              metavar="PCT", help="Smallest change, in percent, called a change (the run-to-run drift that one "
                                  "trace per side cannot measure).")
@click.option("--trim", type=click.FloatRange(min=0, max=0.5, max_open=True), default=0.2, show_default=True,
              metavar="FRACTION", help="Fraction of the shortest and of the longest instances trimmed from each key's mean "
                   "(0: Welch's t-test on plain means).")
@click.option("--per-iteration/--no-per-iteration", "per_iteration", default=None,
              help="Times and calls per iteration [default: when both sides have iterations].")
@click.option("--kernel-key", type=click.Choice(["name", "short_name"]), default="name", show_default=True,
              help="Align kernels by demangled name or by short name (template arguments and parameters left out).")
@click.option("--paired/--no-paired", "paired", default=None,
              help="Compare iteration k of A with iteration k of B [default: when one anchor gives iterations on "
                   "both sides]; --no-paired: Yuen's test on the instances everywhere.")
@click.option("--section", "sections", multiple=True, metavar="NAME",
              type=click.Choice(["total", "kernel", "op", "range", "range_gpu", "api", "memcpy", "memset"]),
              help="Show only these sections (repeatable): total, kernel, op, range, range_gpu, api, memcpy, memset.")
@click.option("--limit", type=click.IntRange(min=0), default=10, show_default=True,
              help="Tables and markdown: at most N rows per section.")
@click.option("--all", "show_all", is_flag=True, help="Tables and markdown: unchanged rows too.")
@overwrite_option
@wide_option
@click.pass_obj
def diff(obj: Context, a, b, fmt, output, gate, alpha, min_effect, trim, per_iteration, kernel_key, paired,
         sections, limit, show_all):
    from traceql.analysis.diff import GATE_EXIT
    from traceql.analysis.diff_text import gate_message, write_text
    from traceql.analysis.diff import diff as compare_runs

    check_output(output, inputs=[Path(x) for x in (a, b) if Path(x).exists()])
    progress = for_stderr()  # bars on a terminal only, while trace files are ingested
    try:
        result = compare_runs(a, b, obj.db, alpha=alpha, min_effect_pct=min_effect, per_iteration=per_iteration,
                               kernel_key=kernel_key, trim=trim, paired=paired, progress=progress,
                               on_wait=say_wait)
    finally:
        if progress:
            progress.close()
    if fmt in ("table", "markdown"):
        def write(fh, width=None):
            write_text(result, fh, fmt, width=width, limit=limit, sections=list(sections) or None,
                                show_all=show_all)

        if output is None:
            write(sys.stdout, None if fmt == "markdown" else table_width())
        else:
            with open(output, "w", encoding="utf-8", newline="") as fh:
                write(fh, None if fmt == "markdown" else table_width(fh))
    else:
        table = result.rows
        if sections:
            import pyarrow.compute as pc

            table = table.filter(pc.is_in(table.column("section"), value_set=pa_strings(sections)))
        if fmt == "json":
            from traceql.outputs.render import _json_value

            text = json.dumps({"summary": result.summary(), "rows": table.to_pylist()}, default=_json_value,
                              indent=1) + "\n"
            if output is None:
                click.echo(text, nl=False)
            else:
                Path(output).write_text(text, encoding="utf-8")
        else:
            emit(table, fmt, output)
    if gate is not None:
        failed = result.gate(gate)
        if failed:
            click.echo(f"traceql: diff: {gate_message(result, failed, gate)}", err=True)
            sys.stdout.flush()
            sys.exit(GATE_EXIT)


def pa_strings(values):
    import pyarrow as pa

    return pa.array(list(values), pa.string())



@cli.command()
@click.option("--by", "by", type=click.Choice(["range", "kernel", "op", "memory"]), default="range", show_default=True,
              help="range: CPU, kernel and memcpy time per NVTX range name; kernel: GPU time per kernel; "
                   "op: forward and backward GPU time per PyTorch op; memory: each GPU's allocated and reserved "
                   "memory over time (a line chart, one trace).")
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True,
              help="The image: .png, .svg or .pdf (the extension picks the format); --overwrite replaces it.")
@click.option("--trace", "trace_id", type=int, default=None, help="Only this trace id.")
@click.option("--match", "match", multiple=True, metavar="WORD",
              help="range: keep ranges whose name contains WORD (repeatable, any matches, ignores case).")
@click.option("--domain", default=None, help="range: only this NVTX domain ('' = default domain).")
@click.option("--skip-first", "skip_first", type=click.IntRange(min=0), default=None, metavar="N",
              help="range: leave out the first N instances of each name (per trace; the warm-up iterations).")
@click.option("--stacked", is_flag=True,
              help="range: one bar per range name, its CPU time outside synchronization, synchronization time, "
                   "kernel time and memcpy time stacked (K-FAC's figure), instead of bars side by side.")
@click.option("--stat", type=click.Choice(["total", "mean"]), default="total", show_default=True,
              help="Summed time, or the mean per range instance (kernel call, op call).")
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True,
              help="The N largest groups of bars.")
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
    _allow_numpy()  # matplotlib needs it
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


def plural(n: int, word: str) -> str:
    """word for n things: 1 kernel, 2 kernels, 3 copies."""
    if n == 1:
        return word
    return word[:-1] + "ies" if word.endswith("y") and word[-2:-1] not in "aeiou" else word + "s"


def check_unit(unit, fmt) -> None:
    if unit is not None and fmt not in ("table", "markdown"):
        raise UsageError(f"--unit applies to --format table and markdown; {fmt} gives times in ns")


def emit(table, fmt, output, unit=None, labels=None):
    if fmt == "parquet":
        if output is None:
            raise UsageError("--format parquet needs -o FILE")
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            with pq.ParquetWriter(output, table.schema) as writer:  # a Table or a RecordBatchReader
                for batch in (table.to_batches() if hasattr(table, "to_batches") else table):
                    writer.write_batch(batch)
        except pa.ArrowNotImplementedError as exc:  # an interval, a union: no Parquet type
            Path(output).unlink(missing_ok=True)
            raise UsageError(f"--format parquet: {str(exc).splitlines()[0]}; CAST that column to VARCHAR") from None
        return
    transform = None
    if fmt == "table" or (fmt == "markdown" and unit is not None):
        names = labels if fmt == "table" else None
        transform = lambda chunk: humanize(chunk, unit=unit, labels=names)  # noqa: E731 - per chunk of rows
    if output is None:
        render(table, fmt, width=table_width(), wide=wide(), transform=transform)
    else:
        with open(output, "w", encoding="utf-8", newline="") as fh:
            render(table, fmt, fh, width=table_width(fh), transform=transform)


@cli.command("mcp")
@click.pass_obj
def mcp_cmd(obj: Context):
    """Serve the workspace to an LLM agent: a Model Context Protocol server on stdio.

    Tools: traces, schema, report, sql (read-only, no files of this machine), analyze and diff,
    each opening the workspace read-only per call (a re-ingest by another process is seen).
    Needs the mcp extra: pip install 'traceql[mcp]'. Register it with a client as the
    command `traceql --db WORKSPACE mcp` (README: "An agent's questions").
    """
    try:
        from traceql.mcp_server import serve
        import mcp  # noqa: F401 - the SDK, an optional dependency
    except ImportError:
        raise UsageError("traceql mcp needs the Model Context Protocol SDK: pip install 'traceql[mcp]'") from None
    serve(obj.db.resolve())


@cli.command()
@click.argument("view", required=False)
def schema(view):
    """Describe the contract views: every column with its DuckDB type and description."""
    for name, doc in view_docs(view).items():
        say(f"{name}: {doc.doc}", 2)
        width = max(len(c.name) for c in doc.columns)
        type_width = max(len(c.type) for c in doc.columns)
        for c in doc.columns:
            say(f"  {c.name:<{width}}  {c.type:<{type_width}}  {c.doc}", 2 + width + 2 + type_width + 2)
        click.echo("")


def main(argv=None) -> None:
    debug = "--debug" in (argv if argv is not None else sys.argv[1:])
    from traceql.core.faults import fault, first_line, is_disk_full, is_interrupt

    _quiet_signals()
    if argv is None:  # run from the shell, not called from Python
        _hide_numpy()
    try:
        cli.main(args=argv, prog_name="traceql", standalone_mode=False)
        sys.stdout.flush()  # here, so that a closed pipe is seen while it can be handled
        if argv is None:
            _ignore_late_ctrl_c()
    except click.exceptions.Abort:
        click.echo("traceql: interrupted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        click.echo(f"traceql: error: {printable(click_message(exc))}", err=True)
        sys.exit(exc.exit_code)
    except TraceqlError as exc:
        if debug:
            raise
        click.echo(f"traceql: error: {printable(str(exc))}", err=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("traceql: interrupted; the workspace is unchanged", err=True)
        sys.exit(130)
    except BrokenPipeError:  # `traceql sql ... | head`: the reader has what it wanted
        _stdout_to_devnull()
        sys.exit(141)  # 128 + SIGPIPE, as a shell reports a tool that a closed pipe ended
    except SystemExit as exc:  # click ends a command whose output pipe closed with exit 1, quietly
        if exc.code == 1 and type(sys.stdout).__name__.endswith("PacifyFlushWrapper"):
            _stdout_to_devnull()
            sys.exit(141)
        raise
    except Exception as exc:  # noqa: BLE001 - one line unless --debug
        if debug:
            raise
        if is_interrupt(exc):  # Ctrl-C while DuckDB ran a statement
            click.echo("traceql: interrupted", err=True)
            sys.exit(130)
        if isinstance(exc, OSError) and exc.filename is not None:  # writing -o FILE, a progress bar, ...
            cause = exc.strerror or first_line(exc)
            click.echo(f"traceql: error: {printable(str(exc.filename))}: "
                       f"{'out of disk space (' + cause + ')' if is_disk_full(exc) else cause}", err=True)
            sys.exit(5 if is_disk_full(exc) else 2)
        ctx = _opened["ctx"]
        mapped = fault(exc, ctx.db if ctx is not None else "the workspace")  # a damaged workspace, a full disk
        if isinstance(mapped, TraceqlError):
            click.echo(f"traceql: error: {printable(str(mapped))}", err=True)
            sys.exit(mapped.exit_code)
        click.echo(f"traceql: internal error: {type(exc).__name__}: {printable(str(exc).splitlines()[0]) if str(exc) else ''} "
                   "(run with --debug for a traceback)", err=True)
        sys.exit(1)


def click_message(exc: click.ClickException) -> str:
    """click's error as the one line of every traceql error: 'OPTION: cause (traceql CMD --help)'."""
    text = " ".join(exc.format_message().split())
    m = re.match(r"Invalid value for '?([^':]+)'?: (.*)$", text)
    if m:
        text = f"{m.group(1)}: {m.group(2)}"
    ctx = getattr(exc, "ctx", None)
    if isinstance(exc, click.UsageError) and ctx is not None:
        text += f" (see {ctx.command_path} --help)"
    return text


def _hide_numpy() -> None:
    """Start-up time: pyarrow imports numpy when it is installed, 0.13 s of a 0.3 s start, yet
    the command line hands no numpy arrays around and pyarrow works without it (only
    to_pandas() and to_numpy() need it). So a command run from the shell imports pyarrow with
    numpy hidden; `plot` (matplotlib needs numpy) lifts this before anything imports pyarrow.
    Never done when main() is called from Python, whose process may use numpy.

    pandas is not hidden: pyarrow's pandas shim takes a None in sys.modules for the module
    itself and fails (AttributeError on __version__) when it converts a timestamp
    (`sql "SELECT to_timestamp(1e12)"` was an internal error)."""
    for name in ("numpy",):
        if name not in sys.modules and "pyarrow" not in sys.modules:
            sys.modules[name] = None  # `import numpy` raises ImportError


def _allow_numpy() -> None:
    for name in ("numpy", "pandas"):
        if name in sys.modules and sys.modules[name] is None:
            del sys.modules[name]


def _quiet_signals() -> None:
    """A file that grows beyond `ulimit -f` gets SIGXFSZ, which would kill traceql with no
    message and leave its temporary files: ignored, the write fails with EFBIG instead, which
    is reported as a full disk (exit 5)."""
    import signal

    if hasattr(signal, "SIGXFSZ"):
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    # `kill PID`, a closed terminal or CI's timeout: stop as Ctrl-C does (temporary files removed,
    # the workspace unchanged, exit 130), not killed on the spot with the files left behind
    for name in ("SIGTERM", "SIGHUP"):
        if hasattr(signal, name) and signal.getsignal(getattr(signal, name)) == signal.SIG_DFL:
            signal.signal(getattr(signal, name), signal.default_int_handler)


def _ignore_late_ctrl_c() -> None:
    """The command's work is done (an ingest renamed into place): a Ctrl-C while Python shuts
    down would only kill the process by SIGINT, with no message and no exit code of ours."""
    import signal

    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_IGN)


def _stdout_to_devnull() -> None:
    """After a closed pipe: nothing more can be written, and Python's final flush of stdout
    must not complain about it."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    main()
