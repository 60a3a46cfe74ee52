"""`traceql upgrade`: bring a workspace written under an older contract version
(traceql.store.contract) to the current one, atomically.

Like an ingest it works on a temporary copy, renamed over the workspace only when everything
succeeded: killed at any point, it leaves the old workspace exactly as it was. In the copy:

1. Every contract table gets the current columns: missing tables are created; a table whose
   columns changed is rebuilt, its rows kept by column name (new columns NULL until step 2);
   the derived tables (traceql.store.ingest.DERIVED_TABLES) are emptied, to be computed again.
   Stored reports are dropped.
2. Each trace, keeping its trace id, is then either
   - read again from its recorded source file, when the file is still there and unchanged:
     same size and, for traces ingested since contract 2, the same SHA-256 (trace.file_sha256);
     a trace of contract 1 records no hash, so its file must also be no newer than the ingest.
     This gives exactly the rows a fresh ingest of the file gives today; or
   - computed again from the rows the workspace holds: nvtx_range's grouping names and paths,
     then every derived table (launching calls, attribution, per-range GPU work, PyTorch ops,
     busy time, ...), the diagnostics and the stored reports. What only the source file holds
     stays as it was (new tables such as graph_exec stay empty for that trace, new columns
     NULL) and an ingest_stats warning 'upgrade.without_source' says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import duckdb

from traceql.store import contract, guard, stored
from traceql.derive import derivation
from traceql.sources import ranks
from traceql.sources.detect import detect
from traceql.core.errors import WorkspaceError
from traceql.sources.digest import sha256
from traceql.store.families import DERIVED_TABLES, add_stats, derive, drop_temp_objects
from traceql.store.load import errors_of, existing_objects, ingest_one
from traceql.store.transaction import check_writable, writing_copy
from traceql.store.lock import workspace_lock
from traceql.core.progress import as_progress
from traceql.core.resources import CONTRACT_TABLES, CONTRACT_VIEWS, contract_types, read_schema


@dataclass
class UpgradedTrace:
    trace_id: int
    path: str
    read_again: bool          # True: from its source file; False: computed from the workspace's rows
    reason: str | None = None  # why the source file was not used


def upgrade(db, progress=None, on_wait=None) -> tuple[int, list[UpgradedTrace]]:
    """Upgrade workspace DB to this traceql's contract version; (the version it had, what was
    done per trace). A workspace already at this version is left alone; one of a newer version
    raises NewerWorkspaceError."""
    db = Path(db)
    progress = as_progress(progress)
    if not db.exists():
        raise WorkspaceError(f"{db}: no workspace here; create one with 'traceql ingest FILE'")
    check_writable(db)
    with workspace_lock(db, on_wait=on_wait, activity="upgrade"):
        version, sources = _version_of(db)
        if version == contract.CONTRACT_VERSION:
            return version, []
        done: list[UpgradedTrace] = []
        with writing_copy(db, files=sources) as con:
            _migrate_tables(con)
            stored.forget(con)
            derivation.create_record(con, existing_built=False)  # every derived table was emptied
            con.execute(f"DELETE FROM {derivation.BUILT}")
            traces = con.execute(
                "SELECT trace_id, path, file_size, ingested_at, "
                + ("file_sha256" if version >= 2 else "NULL") + " FROM trace ORDER BY trace_id").fetchall()
            for trace_id, path, size, ingested_at, sha in traces:
                reason = _source_unusable(Path(path), size, sha, ingested_at)
                if reason is None:
                    det = detect(Path(path))
                    with errors_of(det.path):
                        ingest_one(con, det, progress)
                    done.append(UpgradedTrace(trace_id, path, True))
                else:
                    progress.start(f"trace {trace_id}")
                    _rederive(con, trace_id, reason)
                    progress.update(1, 1, "done")
                    done.append(UpgradedTrace(trace_id, path, False, reason))
        return version, done


def _version_of(db: Path) -> tuple[int, list[str]]:
    """The contract version of workspace DB and the source files its traces record."""
    try:
        con = guard.connect(db, read_only=True, sqlite=False)
    except duckdb.Error as exc:
        raise WorkspaceError(f"{db}: not a traceql workspace ({str(exc).splitlines()[0]})") from None
    try:
        guard.check_objects(con, db)
        if "trace" not in existing_objects(con):
            raise WorkspaceError(f"{db}: not a traceql workspace (no trace table)")
        version = contract.read_version(con)
        if version > contract.CONTRACT_VERSION:
            contract.check(con, db)  # raises NewerWorkspaceError
        return version, [r[0] for r in con.execute("SELECT path FROM trace WHERE path IS NOT NULL").fetchall()]
    finally:
        con.close()


def _source_unusable(path: Path, size: int | None, sha: str | None, ingested_at: datetime | None) -> str | None:
    """Why the recorded source file cannot be read again, or None when it is the same file."""
    try:
        st = path.stat()
    except OSError as exc:
        return f"the source file {path} cannot be read ({exc.strerror or exc})"
    if size is not None and st.st_size != size:
        return f"the source file {path} changed since it was ingested ({st.st_size:,} bytes, then {size:,})"
    if sha is not None:
        if sha256(path) != sha:
            return f"the source file {path} changed since it was ingested (its SHA-256 differs)"
    elif ingested_at is not None and datetime.fromtimestamp(st.st_mtime, timezone.utc).replace(tzinfo=None) > ingested_at:
        return f"the source file {path} was modified after it was ingested"
    return None


def _migrate_tables(con: duckdb.DuckDBPyConnection) -> None:
    """Give every contract table and view the current columns (step 1 of the module doc)."""
    for view in CONTRACT_VIEWS:  # they read the tables: made again at the end
        con.execute(f"DROP VIEW IF EXISTS {view}")
    existing = existing_objects(con)
    want = contract_types()
    _ranges_as_read(con, existing)
    for name in CONTRACT_TABLES:
        ddl = read_schema(f"contract/{name}.sql")
        if name not in existing:
            con.execute(ddl)
            continue
        have = [(r[0], r[1]) for r in con.execute(f"DESCRIBE {name}").fetchall()]
        if have == want[name] and name not in DERIVED_TABLES:
            continue
        if name in DERIVED_TABLES:  # computed again for every trace
            con.execute(f"DROP TABLE {name}")
            con.execute(ddl)
            continue
        common = [c for c, _ in want[name] if c in {h for h, _ in have}]
        con.execute(re.sub(rf"\bCREATE TABLE {name}\b", f"CREATE TABLE {name}__upgraded", ddl, count=1))
        cols = ", ".join(f'"{c}"' for c in common)
        con.execute(f"INSERT INTO {name}__upgraded ({cols}) SELECT {cols} FROM {name}")
        con.execute(f"DROP TABLE {name}")
        con.execute(f"ALTER TABLE {name}__upgraded RENAME TO {name}")
    for view in CONTRACT_VIEWS:
        con.execute(read_schema(f"contract/{view}.sql"))


def _ranges_as_read(con: duckdb.DuckDBPyConnection, existing: set[str]) -> None:
    """nvtx_range is derived (the family 'nesting') from the ranges as read: the stored ranges go
    to nvtx_range_source, where an ingest leaves them, before nvtx_range is emptied. A trace read
    again from its source replaces its own; the others' are nested again from there (_rederive)."""
    source = derivation.RANGE_SOURCE
    con.execute(read_schema(f"{source}.sql"))
    if "nvtx_range" not in existing:
        return
    have = {r[0] for r in con.execute("DESCRIBE nvtx_range").fetchall()}
    cols = [r[0] for r in con.execute(f"DESCRIBE {source}").fetchall() if r[0] in have]
    listed = ", ".join(f'"{c}"' for c in cols)
    con.execute(f"INSERT INTO {source} ({listed}, end_ts) SELECT {listed}, ts + dur FROM nvtx_range")


def _derived_stat_keys() -> set[str]:
    """The ingest_stats keys schemas/derive/stats.sql computes from contract rows."""
    return set(re.findall(r"SELECT\s+(?:\w+\.)?trace_id,\s*'([\w.]+)'", read_schema("derive/stats.sql")))


def _rederive(con: duckdb.DuckDBPyConnection, trace_id: int, reason: str) -> None:
    """Compute a trace's derived rows again from the rows the workspace holds (step 2)."""
    con.execute("SET VARIABLE trace_id = ?", [trace_id])
    drop_temp_objects(con)
    con.execute("ATTACH ':memory:' AS raw")
    try:
        for table in DERIVED_TABLES:  # (the ranges wait in nvtx_range_source: _migrate_tables)
            con.execute(f"DELETE FROM {table} WHERE trace_id = ?", [trace_id])
        derive(con, trace_id)
        keys = sorted(_derived_stat_keys())
        con.execute("DELETE FROM ingest_stats WHERE trace_id = ? AND list_contains(?, key)", [trace_id, keys])
        con.execute(read_schema("derive/stats.sql"))
        con.execute("INSERT INTO ingest_stats SELECT trace_id, key, value, severity, detail FROM derived_stats "
                    "WHERE trace_id = ?", [trace_id])
        _reidentify(con, trace_id)
        con.execute(read_schema("derive/gpu_api.sql"))
        con.execute(
            "INSERT INTO ingest_stats VALUES (?, 'upgrade.without_source', NULL, 'warning', ?)",
            [trace_id, f"upgraded to contract {contract.CONTRACT_VERSION} from the workspace's own rows, since "
                       f"{reason}: what only the source holds (tables and columns new in later contracts, such as "
                       "graph_exec) stays empty for this trace; ingest the file again to fill it"])
        stored.store(con, trace_id)
        derivation.record(con, trace_id, derivation.families())
    finally:
        con.execute("DETACH DATABASE IF EXISTS raw")  # (a Ctrl-C inside free_staging: raw may be gone)


def _reidentify(con: duckdb.DuckDBPyConnection, trace_id: int) -> None:
    """The host, rank, local rank and world size of a trace upgraded without its source file,
    with where each came from (traceql.sources.ranks.identify_stored), from its stored row."""
    path, host, rank, world_size, source_format = con.execute(
        "SELECT path, host, rank, world_size, source_format FROM trace WHERE trace_id = ?", [trace_id]).fetchone()
    ident = ranks.identify_stored(path, host, rank, world_size, source_format)
    sets = ", ".join(f"{name} = ?, {name}_source = ?" for name in ranks.FIELDS)
    con.execute(f"UPDATE trace SET {sets} WHERE trace_id = ?",
                [f(name) for name in ranks.FIELDS for f in (ident.value, ident.source)] + [trace_id])
    keys = [key for name in ranks.FIELDS for key in (f"trace.{name}", f"{name}.file_name_differs", f"{name}.ambiguous")]
    con.execute("DELETE FROM ingest_stats WHERE trace_id = ? AND list_contains(?, key)", [trace_id, keys])
    if ident.stats:  # none for a trace whose file name and contents say nothing of its rank
        add_stats(con, [(trace_id, *row) for row in ident.stats])
