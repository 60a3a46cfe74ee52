"""mcp: the workspace as a Model Context Protocol server on stdio."""

from __future__ import annotations


import click

from traceql.core.errors import UsageError
from traceql.cli.context import Context
from traceql.cli.group import cli


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
