"""SQL and the query library: sql, queries, query, schema."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from traceql.core.errors import InputError, UsageError
from traceql.core.faults import printable
from traceql.core.resources import view_docs
from traceql.cli.context import Context
from traceql.cli.output import check_output, emit_raw, say
from traceql.cli.params import param_option, queries_option, result_options
from traceql.cli.group import cli


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
@param_option("Value of the $NAME placeholder (repeatable).")
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
@result_options
@click.pass_obj
def sql(obj: Context, query, file, params, dialect, write, allow_files, fmt, output):
    text = read_sql(query, file)
    values = None
    if params:  # (the query library's module, not imported without them)
        from traceql.query.library import parse_params

        values = parse_params(params)
    check_output(output)
    with obj.open(write=write, allow_files=allow_files) as ws:
        # rows: printed from Python rows, without pyarrow, when the columns' types allow it
        table = ws.sql(text, values or None, dialect=dialect, batches=True, rows=fmt != "parquet")
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


@cli.command("queries")
@click.argument("name", required=False)
@queries_option()
@click.pass_obj
def queries_cmd(obj: Context, name, queries):
    """List the query library: each query's description and parameters; with NAME, also its SQL.

    Built-in queries come with traceql (the reports use them); your own are the NAME.sql
    files of --queries DIR folders and of $TRACEQL_QUERIES (folders separated by ':'), which
    start with '-- NAME: description' and '-- param NAME: description' lines and use $NAME
    placeholders. Run one with `traceql query NAME --param k=v`.
    """
    from traceql.query import library

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
@param_option("Value of the query's parameter NAME (repeatable); parameters not given are NULL.")
@queries_option()
@result_options
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
