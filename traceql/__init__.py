"""traceql: SQL-centric analysis of Nsight Systems and nvprof GPU profiler traces.

    import traceql
    traceql.ingest(["profile.sqlite"], db="traceql.duckdb")
    ws = traceql.open("traceql.duckdb")
    ws.sql("SELECT name, sum(dur) FROM kernel GROUP BY 1 ORDER BY 2 DESC LIMIT 5").to_pandas()
"""

__version__ = "0.1.0"

from .errors import (InputError, TraceqlError, UnsupportedVersionError,  # noqa: E402
                     UsageError, WorkspaceError)
from .ingest import ingest  # noqa: E402
from .workspace import Workspace, open  # noqa: E402,A004

__all__ = ["ingest", "open", "Workspace", "TraceqlError", "InputError", "UsageError",
           "UnsupportedVersionError", "WorkspaceError", "__version__"]
