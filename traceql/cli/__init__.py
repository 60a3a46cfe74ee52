"""The traceql command line (layer 10, with the MCP server): a thin layer over the library API."""

from traceql.cli.app import cli, main

__all__ = ["cli", "main"]
