"""The traceql command line (layer 10, beside the MCP server): a thin layer over traceql.api.
main.py runs it; group.py and params.py hold the group and the options commands share; one file per
command group; output.py what they print."""

from traceql.cli.main import main, run

__all__ = ["cli", "main", "run"]


def __getattr__(name: str):
    if name == "cli":  # the click group: imported when asked for (`traceql --version` needs none of it)
        from traceql.cli.group import cli

        return cli
    raise AttributeError(f"module 'traceql.cli' has no attribute {name!r}")
