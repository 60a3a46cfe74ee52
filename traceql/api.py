"""The public API (layer 9): traceql.open, ingest, diff, upgrade, remove and the Workspace, as
`import traceql` gives them. The CLI and the MCP server stand on these; what a command does, the
Python API can do.

Each name is imported from its layer on first use, so that `traceql.open` does not load the
ingest machinery nor `traceql.ingest` the analysis."""

_WHERE = {
    "ingest": "traceql.store.ingest",
    "upgrade": "traceql.store.upgrade",
    "remove": "traceql.store.remove",
    "diff": "traceql.analysis.diff",
    "open": "traceql.store.workspace",
    "Workspace": "traceql.store.workspace",
}

__all__ = list(_WHERE)


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module 'traceql.api' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(_WHERE[name]), name)
    globals()[name] = value
    return value
