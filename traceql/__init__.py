"""traceql: SQL-centric analysis of Nsight Systems and nvprof GPU profiler traces.

    import traceql
    traceql.ingest(["profile.sqlite"], db="traceql.duckdb")
    ws = traceql.open("traceql.duckdb")
    ws.sql("SELECT name, sum(dur) FROM kernel GROUP BY 1 ORDER BY 2 DESC LIMIT 5").to_pandas()
"""

import sys
import types

__version__ = "0.1.0"

from .errors import (InputError, NewerWorkspaceError, StaleWorkspaceError, TraceqlError,  # noqa: E402
                     UnsupportedVersionError, UsageError, WorkspaceError)

__all__ = ["ingest", "open", "upgrade", "remove", "diff", "Workspace", "TraceqlError", "InputError", "UsageError",
           "UnsupportedVersionError", "WorkspaceError", "StaleWorkspaceError", "NewerWorkspaceError",
           "__version__"]


# ingest, open and Workspace are imported on first use: `import traceql` (and with it every
# CLI command) need not load the ingest machinery (adapters, sqlite3, the PyTorch formulas)
# nor DuckDB and pyarrow until it uses them.
def __getattr__(name: str):
    if name == "ingest":
        from .ingest import ingest as value
    elif name == "upgrade":
        from .upgrade import upgrade as value
    elif name == "remove":
        from .remove import remove as value
    elif name == "diff":
        from .diff import diff as value
    elif name in ("open", "Workspace"):
        from . import workspace

        value = getattr(workspace, name)
    else:
        raise AttributeError(f"module 'traceql' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))


class _Package(types.ModuleType):
    def __setattr__(self, name, value):
        # Importing the submodule traceql.ingest (traceql.upgrade, ...) binds it to the package as
        # `ingest`; the name stays the function, as it was when this file imported it eagerly.
        if name in ("ingest", "upgrade", "remove", "diff") and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
