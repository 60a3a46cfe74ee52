"""The traceql command line (layer 10, beside the MCP server): a thin layer over traceql.api.
main.py runs it; group.py and params.py hold the group and the options commands share; one file per
command group; output.py what they print."""

from traceql.cli.group import cli
from traceql.cli.main import main

__all__ = ["cli", "main"]
