"""The workspace file: a DuckDB file holding any number of ingested traces in the contract tables,
opened for queries (WorkspaceFile). `traceql.open(path)` returns a traceql.api.Workspace, which adds
analyze, exports, timelines and plots."""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

from typing import TYPE_CHECKING

import duckdb

from traceql.store import contract
from traceql.core.errors import InputError, UsageError, WorkspaceError
from traceql.core.text import one_line_error

if TYPE_CHECKING:  # pyarrow is imported where a result is made: ingest and --version need none of it
    import pyarrow as pa

DEFAULT_DB = "traceql.duckdb"
ROWS_PER_BATCH = 100_000  # Workspace.sql(batches=True)

# Views listed by `info`, with the name of their count column.
COUNTED = ("kernel", "memcpy", "memset", "api_call", "nvtx_range", "nvtx_mark", "thread", "device")


def default_db() -> Path:
    return Path(os.environ.get("TRACEQL_DB") or DEFAULT_DB)


def query_config(allow_files: bool = False) -> dict:
    """DuckDB settings of a workspace connection. A query, a view stored in a workspace someone
    sent, a query of a shared folder: none may read or write a file of this machine or reach the
    network (external access off: read_csv, read_text, glob, COPY TO, ATTACH, INSTALL refused)
    unless the user allowed files, and DuckDB never installs or loads an extension by itself."""
    return {"enable_external_access": bool(allow_files), "autoinstall_known_extensions": False,
            "autoload_known_extensions": False, "allow_community_extensions": False}


class WorkspaceFile:
    """A workspace file, read-only unless opened with write=True: its connection, the derived
    tables built on first use, checked SQL, the query library and reports (every query returns a
    pyarrow.Table). traceql.api.Workspace, what traceql.open returns, adds what the layers above
    the store make of it: analyze, exports, timelines, plots."""

    def __init__(self, path: str | os.PathLike, write: bool = False, queries=(), on_wait=None,
                 allow_files: bool = False):
        self.path = Path(path)
        self.write = bool(write)
        self.allow_files = bool(allow_files)
        self.query_dirs = tuple(Path(q) for q in ([queries] if isinstance(queries, (str, os.PathLike))
                                                  else queries or ()))
        self._catalog = None
        self._on_wait = on_wait
        self._pending: dict[str, list[int]] = {}  # deferred families not built (traceql.derive.derivation)
        self._private: Path | None = None  # a copy holding families derived for this read-only workspace
        # the identity (traceql.store.guard.identity) of the file whose objects were last checked
        # (guard.check_objects) or that this Workspace wrote itself: not checked again
        self._checked: tuple | None = None
        self.notes: list[str] = []  # what the user should know about this session (a private copy)
        self.on_connect: list = []  # called with each new connection (ensure() reconnects)
        from traceql.store.lock import remove_dead_leftovers

        remove_dead_leftovers(self.path)  # of a writer that was killed: any command cleans them up
        if not self.path.exists():
            raise WorkspaceError(f"{self.path}: no workspace here; create one with 'traceql ingest FILE'")
        if self.path.is_dir():
            raise WorkspaceError(f"{self.path}: is a directory, not a workspace file")
        self._held = contextlib.ExitStack()  # the workspace lock, when writing
        try:
            if self.write:
                from traceql.store.lock import workspace_lock

                self._held.enter_context(workspace_lock(self.path, on_wait=on_wait, activity="sql --write"))
            self._connect()
            if self.write:  # statements may change anything: every family built first
                self.ensure()
        except BaseException:
            self._held.close()
            raise

    def _connect(self) -> None:
        """Open self.con. A workspace whose macros shadow
        DuckDB's built-ins is refused (traceql.store.guard); opened to write, it is checked when the
        statements end (sql()), so that `sql --write 'DROP MACRO ...'` can remove them."""
        from traceql.store import guard

        guard.check_workspace_file(self.path)  # a SQLite export given as --db: DuckDB would fetch an extension
        seen = None if self._private else guard.identity(self.path)  # (before it is opened: a later change differs)
        try:
            self.con = duckdb.connect(str(self._private or self.path), read_only=not self.write,
                                      config=query_config(self.allow_files))
        except duckdb.Error as exc:
            first = str(exc).splitlines()[0]
            if re.search(r"\block\b", first, re.I):  # not 'block': a damaged block is no lock
                raise WorkspaceError(f"{self.path}: in use by another process ({first})") from None
            from traceql.core.faults import fault, is_corrupt

            if is_corrupt(exc):
                raise fault(exc, self.path) from None
            raise WorkspaceError(f"{self.path}: not a traceql workspace ({first})") from None
        # DuckDB prints its progress bar on stdout, into the result, for a query over 2 s
        self.con.execute("SET enable_progress_bar = false")
        shadowed = False
        try:
            if not self.write:
                if seen is None or seen != self._checked:
                    if not guard.known_clean(seen):  # (a version checked before, or that traceql wrote)
                        guard.check_objects(self.con, self.path)
                        guard.remember_clean(seen)
                    self._checked = seen
            else:  # checked when the statements end; until then traceql's SQL calls system.main's built-ins
                shadowed = bool(guard.shadowing(self.con))
        except BaseException:
            self.con.close()
            raise
        tables = {(schema, name) for schema, name in self.con.execute(  # (one listing for the checks below)
            "SELECT schema_name, table_name FROM system.main.duckdb_tables() "
            "WHERE database_name = system.main.current_database()").fetchall()}
        if not any(name == "trace" for _, name in tables):
            self.con.close()
            raise WorkspaceError(f"{self.path}: not a traceql workspace (no trace table)")
        try:  # rows computed under another contract version are not read (traceql upgrade)
            contract.check(self.con, self.path, tables)
            from traceql.derive import derivation

            # no family is built over macros that shadow built-ins: the next command builds them, once the
            # statements (the DROP MACRO the refusal gives) have removed them
            self._pending = {} if shadowed else derivation.pending(self.con, tables)
        except BaseException:
            self.con.close()
            raise
        for hook in self.on_connect:
            hook(self.con)

    # -- derived tables built on first use (traceql.derive.derivation) ---------------------------
    def ensure(self, sql: str | None = None) -> None:
        """Build the families of derived tables that SQL reads (every family when SQL is None)
        for the traces that lack them, and keep them in the workspace: under the workspace lock,
        in a copy renamed over it, as an ingest writes (what another process built meanwhile is
        not built again). A workspace that cannot be written gets them in a private temporary
        copy for this session, said in self.notes (and to on_wait). Building reopens the
        connection: a SET or TEMP object made on it before is gone (call ensure() first)."""
        if not self._pending:
            return
        from traceql.derive import derivation

        wanted = set(self._pending) if sql is None else derivation.read_by(sql) & set(self._pending)
        if not wanted:
            return
        from traceql.store.families import build_families
        from traceql.store import guard
        from traceql.store.transaction import check_writable, writing_copy

        self.con.close()
        try:
            if self.write:  # this Workspace holds the lock already
                with writing_copy(self.path) as con:
                    build_families(con, wanted)
                return
            try:
                check_writable(self.path)
                writable = True
            except WorkspaceError:
                writable = False
            if writable and self._private is None:
                from traceql.store.lock import workspace_lock

                with workspace_lock(self.path, on_wait=self._on_wait, activity="derive"):
                    # the copy of the file checked when it was opened is not checked again, and the file
                    # written from it (traceql's own SQL adds no macro) not when it is opened next
                    with writing_copy(self.path, checked=self._checked) as con:
                        build_families(con, wanted)
                    self._checked = guard.identity(self.path)
            else:
                self._build_private(wanted)
        finally:
            self._connect()

    def _build_private(self, wanted) -> None:
        """The families WANTED built in a temporary copy of the workspace (one that cannot be
        written), which this Workspace reads from then on; removed by close()."""
        import shutil
        import tempfile

        from traceql.derive import derivation
        from traceql.core.settings import configure
        from traceql.store.families import build_families

        if self._private is None:
            folder = Path(tempfile.mkdtemp(prefix="traceql-"))
            private = folder / self.path.name
            shutil.copyfile(self.path, private)
            self._private = private
        con = duckdb.connect(str(self._private))
        try:
            configure(con, self._private.parent / "spill")
            built = build_families(con, wanted)
            con.execute("CHECKPOINT")
        finally:
            con.close()
        names = ", ".join(s.table for s in derivation.graph()
                          if any(s.family in fams for fams in built.values()))
        if names:
            note = (f"{self.path} cannot be written: {names} derived for this command only, in a temporary "
                    "copy (a writable workspace keeps them)")
            self.notes.append(note)
            if self._on_wait is not None:
                self._on_wait(note)

    def close(self) -> None:
        try:
            # A statement still running (a streamed result whose reader a Ctrl-C left in Python)
            # keeps DuckDB's threads at work, and close() waited for it to end, at full CPU:
            # `traceql sql` ignored one Ctrl-C in three under load. Stop it first.
            try:
                self.con.interrupt()
            except duckdb.Error:  # closed already
                pass
            self.con.close()
        finally:
            self._held.close()
            if self._private is not None:
                import shutil

                shutil.rmtree(self._private.parent, ignore_errors=True)
                self._private = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- queries ---------------------------------------------------------------------
    def sql(self, query: str, params=None, *, dialect: str | None = None, batches: bool = False,
            rows: bool = False) -> pa.Table:
        """Check and run SQL over the contract views; the result of its last statement.

        The query is parsed first: a syntax error, an unknown view or column (with the
        closest names), a missing parameter, and, unless the workspace was opened with
        write=True, any statement that is not a query are refused with a UsageError
        (traceql.query.sqlcheck). params: a dict for $name placeholders, or a list for ?
        placeholders; DuckDB binds the values. dialect: 'sqlite', 'postgres', 'spark',
        ... to translate from (traceql.query.dialects); DuckDB's own by default. Columns keep
        every name (a repeated one as name_1, ...) and integer sums that fit in 64 bits are
        int64 (traceql.core.results). batches: a pyarrow.RecordBatchReader that reads the rows as
        they are consumed, for results too large to hold (read it before closing). rows: a
        traceql.core.results.Rows instead (Python rows read as they are consumed, no pyarrow) when
        every column is of a plain type (numbers, text, booleans: what traceql.outputs prints
        alike from either), for printing them."""
        from traceql.core.results import Rows, tidy, tidy_reader

        if isinstance(query, str):
            self.ensure(query)
        result = self._plain_select(query, dialect, params)
        if result is None:
            from traceql.query.sqlcheck import Catalog, prepare

            if self._catalog is None:
                self._catalog = Catalog.of(self.con)
            steps = prepare(query, self.con, self._catalog, dialect=dialect, params=params, write=self.write)
            if any(step.writes for step in steps):
                return self._write(steps)
            for step in steps:
                result = self._run_user(step)
        if rows and Rows.plain(result):
            return Rows(result, on_error=self._stream_error)
        if batches and result.description:
            return tidy_reader(result.to_arrow_reader(ROWS_PER_BATCH), on_error=self._stream_error)
        if result.description:
            return tidy(result.to_arrow_table())
        import pyarrow as pa

        return pa.table({})

    def _write(self, steps) -> pa.Table:
        """Run a script that changes the workspace as one transaction: it changes everything or,
        when a statement fails (or Ctrl-C), nothing. The reports stored at ingest, which could
        disagree with what it changed, are dropped in the same transaction, and it is refused
        (nothing changed) when it leaves a macro that shadows a DuckDB built-in (traceql.store.guard)."""
        from traceql.store import guard, stored
        from traceql.core.results import tidy

        for step in steps:
            if step.statement.type.name == "TRANSACTION":
                raise UsageError("SQL: BEGIN, COMMIT and ROLLBACK are not needed: a script run with --write is one "
                                 "transaction (all of it or, when a statement fails, nothing)")
        self._catalog = None
        self.con.execute("BEGIN TRANSACTION")
        try:
            result = None
            for step in steps:
                result = self._run_user(step)
            if result.description:
                table = tidy(result.to_arrow_table())
            else:
                import pyarrow as pa

                table = pa.table({})
            self.con.execute("PRAGMA disable_profiling")  # a profile the script asked for is not of traceql's SQL
            guard.check_objects(self.con, self.path)
            stored.forget(self.con)
            contract.write_version(self.con)
            self.con.execute("COMMIT")
        except BaseException as exc:
            with contextlib.suppress(duckdb.Error):
                self.con.execute("ROLLBACK")
            if _internal(exc):  # (raised while the result is read)
                raise UsageError(f"SQL: DuckDB failed inside while running it ({one_line_error(str(exc))}); "
                                 "nothing it did was saved") from None
            raise
        return table

    def _plain_select(self, query, dialect, params):
        """The result of QUERY when DuckDB's parser reads it as one SELECT without parameters
        (in DuckDB's dialect, on a read-only workspace) and it runs: the statement that
        traceql.query.sqlcheck's last check (step 6) would let through, run without loading sqlglot
        (0.1-0.2 s of every `traceql sql`). None otherwise: any other text, and a query that
        fails, go through the full checks, which explain an unknown view or column."""
        if self.write or params or dialect not in (None, "duckdb") or not isinstance(query, str):
            return None
        try:
            statements = self.con.extract_statements(query)
        except duckdb.Error:
            return None
        if len(statements) != 1 or statements[0].type.name != "SELECT" or statements[0].named_parameters:
            return None
        try:
            return self.con.execute(statements[0])
        except duckdb.Error as exc:
            from traceql.core.faults import fault, is_interrupt

            if is_interrupt(exc):
                raise
            if fault(exc, self.path) is not None:  # a damaged workspace, a full disk: said as such
                raise fault(exc, self.path) from None
            return None

    def _run_user(self, step):
        """Run one checked statement of a user's SQL. DuckDB's internal errors there come from
        the statement (a setting such as profiling_output that DuckDB mishandles), not from a
        damaged file, which fails when it is opened or read with a checksum error."""
        try:
            return self.con.execute(step.statement, step.params or [])
        except duckdb.Error as exc:
            from traceql.core.faults import fault, is_interrupt

            if is_interrupt(exc):
                raise
            if _internal(exc):
                raise UsageError(f"SQL: DuckDB failed inside while running it ({one_line_error(str(exc))}); "
                                 "nothing it did was saved") from None
            raise fault(exc, self.path) or UsageError(f"SQL: {one_line_error(str(exc))}") from None

    def _stream_error(self, exc: Exception) -> Exception:
        """An error DuckDB reports while a streamed result is read (through Arrow, as an
        OSError): a Ctrl-C stays an interrupt, anything else is the query's error."""
        message = str(exc)
        if "INTERRUPT" in message:
            return duckdb.InterruptException(message)
        return UsageError(f"SQL: {one_line_error(message)}")

    def execute(self, query, params=None):
        """Run trusted SQL (the query library's) as it is: no checks. Use sql() for SQL
        that a user wrote. When QUERY reads a derived table not built yet, ensure() builds it
        and reopens the connection first, forgetting earlier SETs."""
        self.ensure(query if isinstance(query, str) else getattr(query, "query", None) or "")
        try:
            return self.con.execute(query, params or [])
        except duckdb.Error as exc:
            from traceql.core.faults import fault, is_interrupt

            if is_interrupt(exc):
                raise
            if isinstance(exc, duckdb.OutOfRangeException):  # the data, not traceql's SQL, is out of range
                raise InputError(
                    f"{self.path}: holds values too large for traceql's 64-bit arithmetic ({one_line_error(str(exc))}); "
                    "ingest refuses times and durations beyond +-2**62 ns (docs/errors.md), so rows changed with "
                    "sql --write or sizes this large are the cause") from None
            raise fault(exc, self.path) or UsageError(f"SQL: {one_line_error(str(exc))}") from None

    def queries(self) -> dict:
        """The query library: name -> library.Query, the built-in queries and those of the
        user's folders (queries=, $TRACEQL_QUERIES)."""
        from traceql.query import library

        return library.collection(self.query_dirs)

    def query(self, name: str, **params) -> pa.Table:
        """Run a query of the library (queries/NAME.sql, or NAME.sql in a user folder) with
        its parameters; a declared parameter not given is NULL."""
        from traceql.query import library

        q = library.get(name, self.query_dirs)
        values = library.bind(q, params)
        if q.origin is None:  # built-in: checked by the test suite, run as it is
            from traceql.core.results import tidy

            return tidy(self.execute(q.sql, values).to_arrow_table())
        library.check_placeholders(q)
        return self.sql(q.sql, values)

    def report(self, by: str, trace_id: int | None = None, **params) -> pa.Table:
        """What `traceql report --by BY` prints, as an Arrow table. Options shared by every
        report: trace_id, per_trace, where, sort, limit, columns, recompute (see reports.run_report);
        other keywords are the report query's parameters (with_dims, group_by, ...)."""
        from traceql.query.reports import run_report

        self.check_trace(trace_id)
        return run_report(self, by, trace_id=trace_id, **params)

    def summary(self, trace_id: int | None = None, per_trace: bool = False, limit: int | None = None,
                recompute: bool = False, rows: bool = False):
        """What `traceql summary` prints: a reports.Summary (traces, gpus and rows, Arrow tables).
        recompute: as for report(). rows: traceql.core.results.RowTable tables instead when they
        can be (reports.summary), for printing them."""
        from traceql.query.reports import summary

        self.check_trace(trace_id)
        return summary(self, trace_id=trace_id, per_trace=per_trace, limit=limit, recompute=recompute, rows=rows)

    def stored_report(self, by: str, q, bound: dict, limit: int | None = None, rows: bool = False) -> pa.Table | None:
        """The rows ingest stored for report BY with these bound parameters, when they answer it
        (traceql.store.stored); None otherwise. reports.run_report asks its workspace for them, so
        that the query layer needs nothing of the store.

        The deferred families the report reads are built first: building them stores the rows of
        the reports they make answerable, this one's included, which the first report then reads
        instead of computing them again (0.1-0.2 s of a first `report --by range`)."""
        from traceql.store import stored

        self.ensure(q.sql)
        return stored.load(self.con, by, q, bound, limit=limit, rows=rows)

    def traces(self) -> pa.Table:
        return self.sql("SELECT * FROM trace ORDER BY trace_id")

    def trace_ids(self) -> list[int]:
        return [r[0] for r in self.con.execute("SELECT trace_id FROM trace ORDER BY trace_id").fetchall()]

    def held(self, path: str | os.PathLike) -> int | None:
        """The trace id of the export PATH when this workspace holds it unchanged: the same
        absolute path (links resolved), size and SHA-256 as when it was ingested; else None (a
        file never ingested, changed since, or gone). The SHA-256 of a file version hashed
        before is read from the user's record (traceql.sources.digest), not computed again."""
        from traceql.sources.digest import sha256

        p = Path(path).resolve()
        row = self.con.execute("SELECT trace_id, file_size, file_sha256 FROM trace WHERE path = ?",
                               [str(p)]).fetchone()
        if row is None or row[2] is None:
            return None
        try:
            if p.stat().st_size != row[1] or sha256(p) != row[2]:  # (remembered per file version)
                return None
        except OSError:
            return None
        return row[0]

    def check_trace(self, trace_id: int | None) -> None:
        if trace_id is not None and trace_id not in self.trace_ids():
            raise UsageError(f"--trace {trace_id}: no such trace in {self.path} "
                             f"(traces: {', '.join(map(str, self.trace_ids())) or 'none'})")

    def _holding(self, table: str, trace_id: int) -> str:
        """The table that holds TABLE's rows of the trace now: nvtx_range_source for the ranges of
        a trace not nested yet (traceql.derive.derivation), which counts them without nesting them."""
        from traceql.derive import derivation

        if table == "nvtx_range" and trace_id in self._pending.get(derivation.nesting(), ()):
            return derivation.RANGE_SOURCE
        return table

    def info(self) -> list[dict]:
        """Per trace: its trace row, the GPUs it used or describes, and row counts per view."""
        out = []
        for row in self.traces().to_pylist():
            tid = row["trace_id"]
            row["gpus"] = [
                f"{d} {n}" if n else str(d)
                for d, n in self.con.execute(
                    "SELECT device_id, name FROM device WHERE trace_id = ? ORDER BY device_id", [tid]).fetchall()]
            row["counts"] = {
                view: self.con.execute(f"SELECT count(*) FROM {self._holding(view, tid)} WHERE trace_id = ?",
                                       [tid]).fetchone()[0]
                for view in COUNTED}
            cur = self.con.execute("SELECT host_source, local_rank, world_size, rank_source, local_rank_source, "
                                   "world_size_source FROM trace WHERE trace_id = ?", [tid])
            row.update(zip([d[0] for d in cur.description], (str(v) if isinstance(v, str) else v
                                                              for v in cur.fetchone())))
            from traceql.store.ingest_warnings import warning_text

            c = row["counts"]
            totals = {"gpu_op": c["kernel"] + c["memcpy"] + c["memset"], "kernel": c["kernel"],
                      "api_call": c["api_call"], "nvtx_range": c["nvtx_range"]}
            row["warnings"] = [warning_text(k, v, d, totals) for k, v, d in self.con.execute(
                "SELECT key, value, detail FROM ingest_stats WHERE trace_id = ? AND severity <> 'info' ORDER BY key",
                [tid]).fetchall()]
            out.append(row)
        return out


def _internal(exc: BaseException) -> bool:
    """A DuckDB internal error that a statement caused, not a damaged file (checksums, 'corrupt')."""
    return type(exc).__name__ in ("InternalException", "FatalException") and \
        not re.search(r"corrupt|checksum", str(exc), re.I)
