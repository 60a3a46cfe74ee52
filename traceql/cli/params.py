"""The options commands share, each defined once here: --db, --queries and --debug (also after the command's
name), --format, -o/--output, --overwrite, --trace, --per-trace, --limit, --param, --unit, --wide/--width, --engine."""

from __future__ import annotations

from pathlib import Path

import click


from traceql.cli.context import Context


QUERIES_HELP = ("A folder of your own queries (NAME.sql, same conventions as the built-in ones); "
                "repeatable, added to $TRACEQL_QUERIES. A name already taken is an error.")


DB_HELP = ("Workspace database file [default: $TRACEQL_DB or ./traceql.duckdb]; --engine spark: a "
           "Parquet export, a directory or URL.")


class PathOrUrl(click.ParamType):
    """--db and ingest's files: a path, or a URL kept as it is written (a Path would fold 's3a://b/x' into 's3a:/b/x')."""

    name = "path"

    def convert(self, value, param, ctx):
        if isinstance(value, Path) or "://" in str(value):
            return value
        return Path(value)


PATH_OR_URL = PathOrUrl()


def workspace_options() -> list[click.Option]:
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

    return [click.Option(["--db"], type=PATH_OR_URL, default=None, expose_value=False,
                         callback=set_db, help=DB_HELP),
            click.Option(["--queries"], multiple=True, type=click.Path(path_type=Path), metavar="DIR",
                         expose_value=False, callback=add_queries, help=QUERIES_HELP),
            click.Option(["--debug"], is_flag=True, expose_value=False, callback=set_debug,
                         help="Show a traceback on errors.")]


class Group(click.Group):
    """The command group: each command gets the workspace options (--db, --queries, --debug), and
    the module of a command is imported when the command is first looked up (lazy: name -> module),
    so that a command starts without importing the others."""

    def __init__(self, *args, lazy: dict[str, str] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy or {})

    def load_all(self) -> None:
        import importlib

        for module in dict.fromkeys(self.lazy.values()):
            importlib.import_module(module)

    def list_commands(self, ctx):
        self.load_all()
        return super().list_commands(ctx)

    def get_command(self, ctx, name):
        if name not in self.commands:
            if name in self.lazy:
                import importlib

                importlib.import_module(self.lazy[name])
            else:  # an unknown name: every command known, for click's "did you mean"
                self.load_all()
        return super().get_command(ctx, name)

    def add_command(self, cmd, name=None):
        have = {opt for p in cmd.params for opt in getattr(p, "opts", ())}
        cmd.params += [o for o in workspace_options() if not set(o.opts) & have]
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


def overwrite_option(f=None, *, help: str = "Let -o replace a file that exists."):
    """--overwrite: -o may replace a file that exists (never the workspace: traceql.store.guard.check_output);
    Context.overwrite. `@overwrite_option`, or `@overwrite_option(help=...)` in another command's words."""
    if f is None:
        return lambda g: overwrite_option(g, help=help)

    def set_overwrite(ctx, _param, value):
        if value:
            ctx.find_object(Context).overwrite = True

    return click.option("--overwrite", is_flag=True, expose_value=False, callback=set_overwrite, help=help)(f)


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


# -- options that several commands take, each defined here once ------------------------------------

def format_option(help: str | None = None, choices=None, default: str = "table"):
    """--format FMT (the parameter fmt): how a command writes its result; by default every format
    a result can be written as (render's formats, and Parquet with -o)."""
    if choices is None:
        from traceql.outputs.render import FORMATS  # here: --help and --version print no result

        choices = FORMATS + ("parquet",)
    return click.option("--format", "fmt", type=click.Choice(list(choices)), default=default, show_default=True,
                        help=help)


def output_option(help: str = "Write to this file.", required: bool = False, name: str = "output"):
    """-o/--output PATH: where the result goes instead of stdout (checked by output.check_output)."""
    return click.option("-o", "--output", name, type=click.Path(path_type=Path), default=None, required=required,
                        help=help)


def trace_option(help: str = "Only this trace id."):
    """--trace ID (the parameter trace_id): one trace of the workspace."""
    return click.option("--trace", "trace_id", type=int, default=None, help=help)


FILE_HELP = """\
FILE: an export to answer about in one command (`traceql COMMAND profile.sqlite`): ingested
into the workspace first, as `traceql ingest FILE` does (what it prints goes to stderr),
unless the workspace holds it unchanged (same path, size and SHA-256); the answer covers
that file's trace, as --trace would.
"""


def file_argument():
    """[FILE]: an export to answer about in one command, ingested first unless the workspace holds
    it unchanged (traceql.cli.context.Context.open_on)."""
    return click.argument("file", nargs=-1, type=PATH_OR_URL, metavar="[FILE]")  # (several: refused by open_on)


def per_trace_option(help: str):
    """--per-trace: rows (or files) split by trace."""
    return click.option("--per-trace", is_flag=True, help=help)


def limit_option(help: str, default: int | None = None, least: int = 0):
    """--limit N: at most N rows (of a report, a section, a rule's evidence, groups of bars)."""
    return click.option("--limit", type=click.IntRange(min=least), default=default, show_default=default is not None,
                        help=help)


def param_option(help: str):
    """--param NAME=VALUE (the parameter params, repeatable): a query's or a rule's parameter."""
    return click.option("--param", "params", multiple=True, metavar="NAME=VALUE", help=help)


def queries_option():
    """--queries DIR (repeatable): folders of the user's own queries, as a command's own parameter."""
    return click.option("--queries", "queries", multiple=True, type=click.Path(path_type=Path), metavar="DIR",
                        help=QUERIES_HELP)


def unit_option(help: str):
    """--unit UNIT: times in this unit in tables and markdown."""
    from traceql.outputs.numbers import UNITS

    return click.option("--unit", type=click.Choice(list(UNITS)), default=None, help=help)



def report_option(param: str):
    """The report-specific option PARAM (`traceql report --depth`, ...) built from its Option in the report
    registry (traceql.query.registry.OPTIONS): its values' JSON schema gives the click type (boolean: a
    flag; array: repeatable; enum: a choice; minimum and exclusiveMinimum: a range), so that the CLI and
    the MCP server take the same values."""
    from traceql.query.registry import OPTIONS

    opt = OPTIONS[param]
    values, kwargs = opt.values, {"help": opt.help}
    if opt.metavar:
        kwargs["metavar"] = opt.metavar
    if opt.default is not None:
        kwargs.update(default=opt.default, show_default=True)
    if values["type"] == "boolean":
        kwargs["is_flag"] = True
    elif values["type"] == "array":
        kwargs["multiple"] = True
    elif "enum" in values:
        kwargs["type"] = click.Choice(values["enum"])
    elif values["type"] == "integer":
        kwargs["type"] = click.IntRange(min=values.get("minimum"))
    elif values["type"] == "number":
        low = values.get("exclusiveMinimum", values.get("minimum"))
        kwargs["type"] = click.FloatRange(min=low, min_open="exclusiveMinimum" in values)
    return click.option(opt.flag, param, **kwargs)


def report_options(f):
    """Every report-specific option of `traceql report` (--with-dims, --group, ... --per-iteration), in the
    registry's order."""
    from traceql.query.registry import OPTIONS

    for param in reversed(OPTIONS):
        f = report_option(param)(f)
    return f


def result_options(f):
    """What `sql` and `query` share after their own options: --format (every format), -o,
    --overwrite, --width/--wide and the engine options, in that order in --help."""
    for option in (engine_options, wide_option, overwrite_option, output_option(),
                   format_option("table for people; csv, tsv, json, markdown, parquet (needs -o) for machines.")):
        f = option(f)
    return f
