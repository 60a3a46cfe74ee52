"""traceql: SQL-centric analysis of GPU profiler traces (Nsight Systems, nvprof, the PyTorch
profiler, rocprof) on DuckDB.

    import traceql
    traceql.ingest(["profile.sqlite"], db="traceql.duckdb")
    ws = traceql.open("traceql.duckdb")
    ws.sql("SELECT name, sum(dur) FROM kernel GROUP BY 1 ORDER BY 2 DESC LIMIT 5").to_pandas()

The public API is what __all__ lists (traceql.api holds it). The subpackages are the layers of the
implementation, each importing only from those below it (tests/project/test_layers.py):
core -> sources -> derive -> query -> store -> outputs -> analysis -> engines -> api -> cli, mcp_server.
"""

from traceql.core.errors import (InputError, NewerWorkspaceError, StaleWorkspaceError, TraceqlError,
                                 UnsupportedVersionError, UsageError, WorkspaceError)
from traceql.core.absent import skip_absent
from traceql.core.duckdb_version import spare_metadata_lookup
from traceql.core.version import __version__

# DuckDB tries `import pandas` for every Python value it converts: without pandas installed, each
# try would search sys.path again (traceql.core.absent)
skip_absent("pandas")
# duckdb reads its own version with importlib.metadata, a twelfth of a short command (traceql.core.duckdb_version)
spare_metadata_lookup()

__all__ = ["ingest", "open", "upgrade", "remove", "diff", "Workspace", "Progress", "RichProgress",
           "TraceqlError", "InputError", "UsageError", "UnsupportedVersionError", "WorkspaceError",
           "StaleWorkspaceError", "NewerWorkspaceError", "__version__"]


# The API is imported on first use: `import traceql` (and with it every CLI command) need not load
# the ingest machinery (adapters, sqlite3, the PyTorch formulas) nor DuckDB and pyarrow until it
# uses them.
def __getattr__(name: str):
    import importlib

    api = importlib.import_module("traceql.api")  # not `from traceql import api`: that asks this function
    if name not in api.__all__:
        raise AttributeError(f"module 'traceql' has no attribute {name!r}")

    value = getattr(api, name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(__all__)
