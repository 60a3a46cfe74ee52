"""The `traceql` command group: its help and the options given before a command."""

from __future__ import annotations

from pathlib import Path

import click

from traceql.core.version import __version__
from traceql.cli.context import Context, opened
from traceql.cli.params import DB_HELP, PATH_OR_URL, QUERIES_HELP, Group


HELP_WIDTH = 120  # help is wrapped at the terminal's width, up to this many columns

# Each command and the module that defines it (imported when the command is first looked up: a
# command loads no other command's module; tests/cli/test_cli.py checks this against the modules)
COMMANDS = {
    "analyze": "traceql.cli.analysis_cmds", "diff": "traceql.cli.analysis_cmds",
    "export": "traceql.cli.export_cmd", "mcp": "traceql.cli.mcp_cmd",
    "plot": "traceql.cli.report_cmds", "report": "traceql.cli.report_cmds", "reports": "traceql.cli.report_cmds",
    "summary": "traceql.cli.report_cmds",
    "queries": "traceql.cli.sql_cmds", "query": "traceql.cli.sql_cmds", "schema": "traceql.cli.sql_cmds",
    "sql": "traceql.cli.sql_cmds",
    "info": "traceql.cli.workspace_cmds", "ingest": "traceql.cli.workspace_cmds", "rm": "traceql.cli.workspace_cmds",
    "upgrade": "traceql.cli.workspace_cmds",
}


@click.group(cls=Group, lazy=COMMANDS,
             context_settings={"help_option_names": ["-h", "--help"], "max_content_width": HELP_WIDTH})
@click.option("--db", type=PATH_OR_URL, default=None, help=DB_HELP)
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
    opened["ctx"] = ctx.obj


def _views_help() -> str:
    """The contract's views for the top-level help, from the contract itself."""
    import textwrap

    from traceql.core.resources import CONTRACT_TABLES, CONTRACT_VIEWS

    # the docstring's lines are indented by 4: so are the lines after the first
    return textwrap.fill("Views: " + ", ".join(CONTRACT_TABLES + CONTRACT_VIEWS) + ".", 78, subsequent_indent="    ")


cli.help = cli.help.replace("VIEWS", _views_help())
