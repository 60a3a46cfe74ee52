"""The workspace's transaction: every write (ingest, rm, upgrade, derived tables built on first use)
goes to a temporary copy of the workspace, renamed over it only when everything succeeded
(writing_copy); the caller holds the workspace lock (traceql.store.lock). Killed at any point, the
workspace stays as it was, and the next writer removes the leftovers."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import stat
import sys
import time
from pathlib import Path

import duckdb

from traceql.core.errors import WorkspaceError
from traceql.core.faults import fault, is_disk_full, raise_if_signalled
from traceql.core.settings import configure, small_input_threads
from traceql.store import contract, guard
from traceql.store.lock import real_path


class _TimedConnection:
    """With TRACEQL_TIMING=1: a connection that prints each statement's wall time to stderr."""

    def __init__(self, con):
        self._con = con
        self.untimed = con  # what traceql.sources.reader remembers the sqlite extension loaded on

    def execute(self, sql, *args):
        statements = self._con.extract_statements(sql) if not args else []
        if len(statements) > 1:  # a script: time each statement
            for statement in statements:
                result = self.execute(statement.query)
            return result
        started, cpu = time.perf_counter(), time.process_time()
        try:
            return self._con.execute(sql, *args)
        finally:
            head = " ".join(line for line in sql.splitlines() if not line.lstrip().startswith("--"))
            head = " ".join(head.split())[:100]
            print(f"[traceql timing] {time.perf_counter() - started:8.3f} s  cpu {time.process_time() - cpu:8.3f} s  "
                  f"{head}", file=sys.stderr)

    def __getattr__(self, name):
        return getattr(self._con, name)


def remove_stale_files(db: Path) -> None:
    """Temporary files of an ingest that was killed (kill -9, power loss): with the lock
    held no other ingest into this workspace is running, so they are all stale."""
    for leftover in db.parent.glob(f".{glob.escape(db.name)}.ingest-*"):
        if leftover.is_dir():
            shutil.rmtree(leftover, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                leftover.unlink()


def check_writable(db: Path) -> None:
    """WorkspaceError unless a workspace can be written at DB (new or existing)."""
    real_path(db)  # a symbolic link loop is a WorkspaceError
    if db.exists() and db.is_dir():
        raise WorkspaceError(f"{db}: is a directory, not a workspace file")
    parent = db.resolve().parent
    if not parent.is_dir():
        raise WorkspaceError(f"{db}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise WorkspaceError(f"{db}: directory {parent} is not writable")
    if db.exists() and not os.access(db, os.W_OK):
        raise WorkspaceError(f"{db}: the workspace file is read-only")
    guard.check_workspace_file(db)  # a SQLite export given as --db: before DuckDB opens it
    links = db.stat().st_nlink if db.exists() else 1
    if links > 1:  # the lock is per name: two names would write at once, and the rename splits them
        raise WorkspaceError(f"{db}: the workspace file has {links} hard links; a write replaces the file, which "
                             "would split them into separate workspaces: keep one name (a symbolic link is fine)")


@contextlib.contextmanager
def writing_copy(db: Path, files=(), checked: tuple | None = None):
    """A connection (configured for ingest) to a temporary copy of workspace DB, or to a new
    file when there is none yet. When the block succeeds the copy is stamped with this
    contract version, checkpointed and renamed over DB; when it fails or is interrupted
    (kill -9 included: the next writer removes the leftovers) DB stays exactly as it was.
    The caller holds the workspace lock.

    DB reached through a symbolic link: the file it names is written, the link kept. The new
    file keeps the mode and group (and, for root, the owner) of the old one: a private
    workspace stays private, also while it is copied.

    The connection reaches no file of this machine but FILES (the sources it reads) and the
    workers' folder (traceql.store.guard.connect); a workspace holding macros that shadow DuckDB's
    built-in functions is refused before any of traceql's SQL runs on it, unless it is the very
    file (its guard.identity()) that the caller checked already: CHECKED."""
    named, db = db, real_path(db)
    remove_stale_files(db)
    tmp = db.with_name(f".{db.name}.ingest-{os.getpid()}.tmp")
    tmpdir = db.with_name(f".{db.name}.ingest-{os.getpid()}.spill")
    try:
        st = db.stat() if db.exists() else None
        trusted = checked is not None and checked == guard.identity(db)
        if st is not None:
            _copy_keeping_mode(db, tmp, st)
            trusted = trusted and checked == guard.identity(db)  # (unchanged while it was copied)
        # the sqlite extension only to read FILES (loading it is a fifth of a small family build)
        con = guard.connect(tmp, files=files, folders=[workers_folder(db)], temp_directory=tmpdir,
                            sqlite=bool(files))
        if os.environ.get("TRACEQL_TIMING"):
            con = _TimedConnection(con)
        try:
            # a new file holds no macro, nor the one the caller checked (the check lists every function: 0.05 s)
            if st is not None and not trusted:
                guard.check_objects(con, named)
            # small inputs (the exports read, or the workspace itself): one DuckDB thread, and no FSST
            # string compression, whose analysis was a quarter of a 3.8 MB export's CHECKPOINT (0.04
            # CPU s) while no column of its workspace chose it
            threads = small_input_threads(files or [tmp])
            configure(con, None, threads=threads)
            if threads == 1:
                con.execute("SET disabled_compression_methods = 'fsst'")
            yield con
            raise_if_signalled()  # a Ctrl-C that DuckDB swallowed: nothing is committed
            contract.write_version(con)
            con.execute("CHECKPOINT")
        finally:
            con.close()
        raise_if_signalled()
        if st is not None:
            _keep_owner(tmp, st)
        with open(tmp, "rb") as written:  # the version renamed in place is clean: no command checks it again
            os.replace(tmp, db)
            guard.remember_clean(guard.identity(db, os.fstat(written.fileno())))
    except duckdb.Error as exc:  # a damaged workspace, a full disk: one line naming the workspace
        mapped = fault(exc, named)
        if isinstance(mapped, WorkspaceError):
            raise mapped from None
        if isinstance(exc, duckdb.IOException):
            raise WorkspaceError(f"{named}: cannot write the workspace ({str(exc).splitlines()[0]})") from None
        raise
    except OSError as exc:  # copying or renaming the workspace: disk full, permissions
        if is_disk_full(exc):
            raise WorkspaceError(f"{named}: out of disk space ({exc.strerror or exc})") from None
        raise WorkspaceError(f"{named}: cannot write the workspace ({exc.strerror or exc})") from None
    finally:
        for leftover in (tmp, tmp.with_name(tmp.name + ".wal")):
            with contextlib.suppress(FileNotFoundError):
                os.remove(leftover)
        shutil.rmtree(tmpdir, ignore_errors=True)


def workers_folder(db: Path) -> Path:
    """Where the worker processes of this process's ingest into DB write (traceql.store.parallel)."""
    db = real_path(db)
    return db.with_name(f".{db.name}.ingest-{os.getpid()}.workers")


def _copy_keeping_mode(src: Path, dst: Path, st: os.stat_result) -> None:
    """Copy SRC to a new file DST created with SRC's permission bits (and the owner's read and
    write, which the copy needs), never readable by more users than SRC, even for a moment."""
    fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL, stat.S_IMODE(st.st_mode) | stat.S_IRUSR | stat.S_IWUSR)
    with os.fdopen(fd, "wb") as out, open(src, "rb") as inp:
        shutil.copyfileobj(inp, out, 1 << 20)


def _keep_owner(path: Path, st: os.stat_result) -> None:
    """Give PATH the mode, group and (when root) owner of the workspace it replaces."""
    os.chmod(path, stat.S_IMODE(st.st_mode))
    with contextlib.suppress(OSError):  # a group the user is not in cannot be given
        os.chown(path, st.st_uid if os.geteuid() == 0 else -1, st.st_gid)
