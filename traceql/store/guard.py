"""What a DuckDB connection traceql opens may reach, and what a workspace may hold.

A workspace is a file people send each other, and `sql --write` lets its owner store macros and
schemas in it. DuckDB resolves a macro of the workspace's `main` schema before its built-in
function of the same name, so a stored `lower` or `regexp_replace` macro would run inside
traceql's own SQL (ingest, upgrade, rm, every report); with file access on, it could read files
of this machine into the workspace. So:

- every connection traceql opens turns DuckDB's external access off (no file of this machine or
  the network reachable from SQL) once the sqlite extension is loaded from its pinned package,
  allowing only the files it reads itself (the source exports, the workers' files), and never
  installs or loads an extension by itself (connect());
- a workspace whose macros have the name of a DuckDB built-in function, or that holds a schema
  named like a catalog traceql attaches (raw, traceql_worker), is refused before traceql runs
  any of its own SQL on it (check_objects(); `sql --write` checks it before it commits);
- a --db that is not a DuckDB file (a SQLite export given by mistake) is refused before DuckDB
  opens it: DuckDB would otherwise try to download its sqlite extension to read it
  (check_workspace_file()).

The check lists every DuckDB function (0.05 s, a fifth of a report from a workspace), so each
version of a file found clean, or written by traceql itself, is remembered in a file of the
user's own cache folder, when there is one (remember_clean(), known_clean()): the version by the kernel's identity
of the file and of its WAL (device, inode, size, modification and change times in ns), which
every write changes and no user can set back; a record only its owner can write is trusted.
"""

from __future__ import annotations

import os
from pathlib import Path

import duckdb

from traceql.core import records
from traceql.core.errors import WorkspaceError

# Catalogs traceql attaches next to the workspace (ingest's staging area, a worker's file): a
# schema of the same name in the workspace makes `raw.x` ambiguous.
ATTACHED = ("raw", "traceql_worker")

SAFE_CONFIG = {"autoinstall_known_extensions": False, "autoload_known_extensions": False,
               "allow_community_extensions": False}


def check_workspace_file(path) -> None:
    """WorkspaceError when PATH exists, is not empty and is not a DuckDB database file (its
    bytes 8-11 are 'DUCK'). Missing, empty files and folders are left to the caller."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(16)
    except OSError:
        return
    if not head or head[8:12] == b"DUCK":
        return
    if head.startswith(b"SQLite format 3\x00"):
        what = "a SQLite database, perhaps a profiler export: read it with 'traceql ingest FILE'"
    else:
        what = "not a DuckDB database file"
    raise WorkspaceError(f"{path}: not a traceql workspace ({what}); --db names the workspace (a .duckdb file)")


def identity(path, st: os.stat_result | None = None) -> tuple | None:
    """What tells one version of a file from any other (traceql.core.records.version), then the
    same of its WAL when there is one (DuckDB replays it when it opens the file). None when PATH
    cannot be read. st: PATH's os.stat() taken already (of an open file: fstat)."""
    out = records.version(path, st)
    if out is None:
        return None
    wal = records.version(os.fspath(path) + ".wal")
    return out if wal is None else out + wal


CLEAN = "clean-workspaces"  # the record of workspace versions found clean (traceql.core.records)
CLEAN_KEPT = 256  # versions of files remembered clean (the most recent)


def known_clean(ident: tuple | None) -> bool:
    """Whether the file version IDENT (identity()) was found clean by check_objects, or written
    by traceql itself (remember_clean): its objects need no check."""
    line = records.key(ident)
    return line is not None and line in records.read(CLEAN)


def remember_clean(ident: tuple | None) -> None:
    """Record the file version IDENT as clean (best effort; see traceql.core.records)."""
    line = records.key(ident)
    if line is not None:
        records.remember(CLEAN, line, CLEAN_KEPT)


def connect(database, *, read_only: bool = False, files=(), folders=(), temp_directory=None,
            sqlite: bool = True) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection to DATABASE (a path, or ':memory:') for traceql's own SQL: no
    extension installed or loaded by DuckDB itself, the sqlite extension loaded from its package
    (sqlite=True; traceql.sources.reader.load_sqlite_scanner), then external access off for good, but for
    FILES (exact paths) and FOLDERS (every file under them) that traceql reads itself.
    temp_directory: where DuckDB spills (it cannot be changed once external access is off)."""
    if database != ":memory:":
        check_workspace_file(database)
    config = dict(SAFE_CONFIG)
    if temp_directory is not None:
        config["temp_directory"] = str(temp_directory)
    if sqlite:  # for the LOAD of the pinned package's file only, then off (traceql.sources.reader.load_sqlite_scanner)
        config["allow_unsigned_extensions"] = True
    con = duckdb.connect(str(database), read_only=read_only, config=config)
    try:
        if sqlite:
            from traceql.sources.reader import load_sqlite_scanner

            load_sqlite_scanner(con, fresh=True)  # when it cannot load, the reader falls back to Python's sqlite3
            con.execute("SET allow_unsigned_extensions = false")  # (off again whatever happened there)
        allowed = sorted({os.path.realpath(f) for f in files})
        allowed += [p + suffix for p in allowed for suffix in (".wal",) if p.endswith(".duckdb")]
        if allowed:
            con.execute("SET allowed_paths = ?", [allowed])
        dirs = sorted({os.path.join(os.path.realpath(d), "") for d in folders})
        if dirs:
            con.execute("SET allowed_directories = ?", [dirs])
        con.execute("SET enable_external_access = false")
    except BaseException:
        con.close()
        raise
    return con


def shadowing(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str]]:
    """(name, kind) of the macros of the database open on con that have the name of a DuckDB
    built-in function, and the schemas named like a catalog traceql attaches (kind 'schema').
    Every function called is qualified with system.main: a stored macro cannot redirect it."""
    macros = con.execute(  # duckdb_functions() listed once (0.05 s a time: it lists every function)
        "WITH f AS MATERIALIZED (SELECT function_name, function_type, database_name, internal "
        "FROM system.main.duckdb_functions() WHERE database_name IN (system.main.current_database(), 'system')) "
        "SELECT DISTINCT w.function_name, w.function_type FROM f w "
        "SEMI JOIN f b ON b.function_name = w.function_name AND b.database_name = 'system' "
        "WHERE w.database_name = system.main.current_database() AND NOT w.internal ORDER BY 1").fetchall()
    schemas = con.execute(
        "SELECT s.schema_name, 'schema' FROM system.main.duckdb_schemas() s "
        "WHERE s.database_name = system.main.current_database() AND system.main.list_contains(?, s.schema_name) "
        "ORDER BY 1", [list(ATTACHED)]).fetchall()
    return macros + schemas


def check_objects(con: duckdb.DuckDBPyConnection, path) -> None:
    """WorkspaceError when the workspace open on con holds what shadowing() finds, with the
    statements that remove it."""
    found = shadowing(con)
    if not found:
        return
    quoted = ['"' + name.replace('"', '""') + '"' for name, _ in found]
    macros = [q for q, (_, kind) in zip(quoted, found) if kind != "schema"]
    schemas = [q for q, (_, kind) in zip(quoted, found) if kind == "schema"]
    parts = []
    if macros:
        parts.append(f"macro{'s' if len(macros) > 1 else ''} {', '.join(macros)} with the name of a DuckDB built-in "
                     f"function (run in place of the built-in inside traceql's own SQL)")
    if schemas:
        parts.append(f"schema {', '.join(schemas)}, the name of a catalog traceql attaches while it writes")
    fixes = [f"DROP MACRO {'TABLE ' if kind == 'table_macro' else ''}{q}" if kind != "schema"
             else f"DROP SCHEMA {q} CASCADE" for q, (_, kind) in zip(quoted, found)]
    raise WorkspaceError(f"{path}: holds {' and '.join(parts)}; refused. Remove "
                         f"{'them' if len(found) > 1 else 'it'} with: traceql --db {Path(path)} sql --write "
                         f"'{'; '.join(fixes)}'")


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def check_not_workspace(path, workspace) -> None:
    """UsageError when PATH is workspace WORKSPACE, its WAL or its lock file, by any name."""
    from traceql.core.errors import UsageError

    db = Path(os.path.realpath(workspace))
    for p in (db, db.with_name(db.name + ".wal"), db.with_name(db.name + ".lock")):
        if _same_file(Path(path), p):
            raise UsageError(f"{path}: is the workspace {workspace} (or its WAL or lock file): -o never writes "
                             "over it; name another file")


def check_output(path, workspace=None, inputs=(), overwrite: bool = False, folder: bool = False) -> None:
    """The one rule for an output path (-o) of every command, before any work: never the
    workspace WORKSPACE (nor its WAL or lock file) or one of INPUTS, by any name (symbolic or
    hard links); a file that exists only with overwrite; a file in an existing, writable folder,
    or with folder=True a folder (made if needed)."""
    from traceql.core.errors import UsageError

    if path is None:
        return
    path = Path(path)
    if workspace is not None:
        check_not_workspace(path, workspace)
    for p in inputs:
        if _same_file(path, p):
            raise UsageError(f"{path}: is an input of this command ({p}): -o never writes over it; name another file")
    if folder:
        if path.exists() and not path.is_dir():
            raise UsageError(f"{path}: exists and is not a directory (-o names the directory to write into)")
        return
    if path.is_dir():
        raise UsageError(f"{path}: is a directory (-o names the file to write)")
    parent = path.parent
    if not parent.is_dir():
        raise UsageError(f"{path}: directory {parent} does not exist")
    if (path.exists() or path.is_symlink()) and not overwrite:
        raise UsageError(f"{path}: exists; use --overwrite to replace it")
    if not os.access(parent if not path.exists() else path, os.W_OK):
        raise UsageError(f"{path}: not writable (permission denied)")
