"""The command's context: the workspace it opens (--db, --queries, --engine) and how wide its tables
are (--wide, --width); numpy kept out of the commands that do not need it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from traceql.core.errors import UsageError

if TYPE_CHECKING:
    from traceql.api import Workspace


opened = {"ctx": None}  # the command's Context: its workspace names errors that reach main() unnamed


class Context:
    engine = "duckdb"  # --engine spark (engine_options): --db names a Parquet export, read on Spark
    spark_master = None
    spark_conf: tuple = ()

    def __init__(self, db: Path | None, debug: bool, queries=()):
        self._db = db
        self.debug = debug
        self.queries = tuple(queries)
        self.wide = False
        self.width = None  # --width N
        self.overwrite = False  # --overwrite (overwrite_option)

    @property
    def db(self) -> Path:
        """--db, else $TRACEQL_DB or ./traceql.duckdb (traceql.store.workspace, and with it DuckDB,
        imported only by the commands that use a workspace)."""
        if self._db is None:
            from traceql.store.workspace import default_db

            self._db = default_db()
        return self._db

    @db.setter
    def db(self, value: Path) -> None:
        self._db = value

    def local_db(self) -> Path:
        """--db as a local path: a URL is for --engine spark."""
        if isinstance(self.db, str):
            raise UsageError(f"--db {self.db}: a URL is read with --engine spark (a Parquet export); "
                             "a DuckDB workspace is a local file")
        return self.db

    def open(self, write: bool = False, queries=(), allow_files: bool = False) -> Workspace:
        from traceql.api import Workspace

        if self.engine == "spark":  # traceql.engines.spark: the same reports, on Spark over the Parquet export
            from traceql.engines.spark import SparkWorkspace, parse_conf

            if write or allow_files:
                raise UsageError("--write and --allow-files are for a DuckDB workspace: --engine spark reads "
                                 "its Parquet export and nothing else")

            return SparkWorkspace(self.db, queries=self.queries + tuple(queries), master=self.spark_master,
                                  conf=parse_conf(self.spark_conf))
        self.local_db()
        ws = Workspace(self.db, write=write, queries=self.queries + tuple(queries), on_wait=say_wait,
                       allow_files=allow_files)
        from traceql.core.faults import interrupt_on_sigint

        interrupt_on_sigint(ws.con)  # Ctrl-C also while a streamed result is read: exit 130
        ws.on_connect.append(interrupt_on_sigint)  # and on the connection after derived tables are built
        return ws

    def open_on(self, file, trace_id: int | None, reads: str = ""):
        """The workspace opened for a report and the trace to report on. With FILE (a report's
        optional argument: the first answer about an export in one command), FILE's trace, ingested
        first (what ingest prints goes to stderr) unless the workspace holds it unchanged, with the
        deferred families that READS (the SQL the command runs) needs built in the same transaction;
        else --trace's TRACE_ID. FILE: the argument's values (one at most; none: the workspace)."""
        if isinstance(file, tuple):
            if len(file) > 1:
                raise UsageError(f"{len(file)} files given: a command answers about one FILE; ingest several with "
                                 "'traceql ingest FILE...', then ask about them all (--per-trace splits them by trace)")
            file = file[0] if file else None
        if file is None:
            return self.open(), trace_id
        if trace_id is not None:
            raise UsageError(f"{file} and --trace {trace_id}: give one of them (the report on a file covers "
                             "that file's trace)")
        if self.engine == "spark":
            raise UsageError(f"{file}: a report on a file is for a DuckDB workspace; with --engine spark, "
                             "ingest the file into the Parquet export first")
        from traceql.sources.nsys_export import file_read

        db = self.local_db()
        if isinstance(file, str):
            raise UsageError(f"{file}: a URL is ingested with --engine spark; DuckDB reads local files")
        if db.exists():
            ws = self.open()
            try:
                held = ws.held(file_read(file, db))
            except BaseException:
                ws.close()
                raise
            if held is not None:
                return ws, held
            ws.close()
        from traceql.cli.ingested import tell_ingested  # (ingest's machinery: only when it ingests)
        from traceql.core.progress import for_stderr
        from traceql.derive.derivation import read_by
        from traceql.store.ingest import ingest as ingest_files

        progress = for_stderr()
        try:
            results = ingest_files([file], db=db, progress=progress, on_wait=say_wait, families=read_by(reads))
        finally:
            if progress:
                progress.close()
        tell_ingested(results, db, err=True)
        return self.open(), results[0].trace_id


def say_wait(message: str) -> None:
    """Tell on stderr that a command waits for another writer of the workspace."""
    click.echo(f"traceql: {message}", err=True)


def wide() -> bool:
    """Whether the command running was given --wide (tables for people: no width limit)."""
    ctx = click.get_current_context(silent=True)
    obj = ctx.find_object(Context) if ctx is not None else None
    return bool(obj is not None and obj.wide)


def table_width(out=None) -> int | None:
    """The width tables for people are fitted to: --width N; else none with --wide or when
    writing the file OUT (-o FILE: lines as long as the data); else $COLUMNS or the terminal's."""
    ctx = click.get_current_context(silent=True)
    obj = ctx.find_object(Context) if ctx is not None else None
    if obj is not None and obj.width is not None:
        if obj.wide:
            raise UsageError("--wide and --width: give one (--wide: no width limit)")
        return obj.width
    if out is not None:
        return None
    from traceql.outputs.tables import terminal_width

    return terminal_width(sys.stdout, wide())


def hide_numpy() -> None:
    """Start-up time: pyarrow imports numpy when it is installed, 0.13 s of a 0.3 s start, yet
    the command line hands no numpy arrays around and pyarrow works without it (only
    to_pandas() and to_numpy() need it). So a command run from the shell imports pyarrow with
    numpy hidden; `plot` (matplotlib needs numpy) lifts this before anything imports pyarrow.
    Never done when main() is called from Python, whose process may use numpy.

    pandas is not hidden: pyarrow's pandas shim takes a None in sys.modules for the module
    itself and fails (AttributeError on __version__) when it converts a timestamp
    (`sql "SELECT to_timestamp(1e12)"` was an internal error)."""
    for name in ("numpy",):
        if name not in sys.modules and "pyarrow" not in sys.modules:
            sys.modules[name] = None  # `import numpy` raises ImportError


def allow_numpy() -> None:
    for name in ("numpy", "pandas"):
        if name in sys.modules and sys.modules[name] is None:
            del sys.modules[name]
