"""`traceql rm`: take traces out of a workspace, from every table at once.

Like an ingest, removing works on a temporary copy of the workspace (traceql.store.ingest's
writing_copy) that is renamed over it only when every row of the traces is gone: killed at
any point it leaves the workspace as it was, and a report running meanwhile reads the old
file undisturbed. The rows go from every contract table and from the reports stored at
ingest; tables the user made with `sql --write` are theirs and stay as they are. The ids of
removed traces are not given to the traces ingested later while any row still carries
them (see traceql.ingest: rows of a trace without its `trace` row are purged first).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from traceql.core.errors import UsageError, WorkspaceError


@dataclass
class Removed:
    trace_id: int
    path: str
    rows: int  # rows removed from the contract tables


def remove(trace_ids, db: str | os.PathLike = "traceql.duckdb", on_wait=None) -> list[Removed]:
    """Remove the traces TRACE_IDS from workspace DB, all or nothing: an id the workspace does
    not hold is a UsageError and nothing is removed. on_wait(message) tells that it waits for
    another writer (traceql.store.lock)."""
    from traceql.derive import derivation
    from traceql.store import stored
    from traceql.store.transaction import check_writable, writing_copy
    from traceql.store.lock import workspace_lock
    from traceql.core.resources import TRACE_TABLES

    db = Path(db)
    ids: list[int] = []
    for t in trace_ids:
        try:
            value = int(t)
        except (TypeError, ValueError):
            raise UsageError(f"{t}: not a trace id (traceql info lists them)") from None
        if value not in ids:
            ids.append(value)
    if not ids:
        raise UsageError("no trace ids given; traceql info lists them")
    if not db.exists():
        raise WorkspaceError(f"{db}: no workspace here; create one with 'traceql ingest FILE'")
    check_writable(db)
    with workspace_lock(db, on_wait=on_wait, activity="rm"):
        with writing_copy(db) as con:
            from traceql.store.contract import check

            check(con, db)
            derivation.create_record(con)  # (a workspace from before nvtx_range_source: the table, empty)
            known = dict(con.execute("SELECT trace_id, path FROM trace ORDER BY trace_id").fetchall())
            missing = [i for i in ids if i not in known]
            if missing:
                raise UsageError(f"trace {missing[0]}: no such trace in {db} "
                                 f"(traces: {', '.join(map(str, known)) or 'none'}); nothing was removed")
            counts = dict.fromkeys(ids, 0)
            for table in TRACE_TABLES:
                for tid, n in con.execute(
                        f"SELECT trace_id, count(*) FROM {table} WHERE list_contains(?, trace_id) GROUP BY 1",
                        [ids]).fetchall():
                    counts[tid] += n
                con.execute(f"DELETE FROM {table} WHERE list_contains(?, trace_id)", [ids])
            for tid in ids:
                stored.delete_trace(con, tid)
                derivation.forget(con, tid)
    return [Removed(tid, known[tid], counts[tid]) for tid in ids]


def purge_orphans(con) -> list[int]:
    """Delete the rows of traces that have no `trace` row (left by `sql --write "DELETE FROM
    trace ..."`): a later ingest that took their id would otherwise absorb them (a 59-kernel
    file reported 7,387 kernels). Returns the ids purged. Run by ingest on its writing copy."""
    from traceql.derive import derivation
    from traceql.store import stored
    from traceql.core.resources import TRACE_TABLES

    orphans: set[int] = set()
    for table in TRACE_TABLES:
        if table == "trace":
            continue
        orphan = "trace_id IS NULL OR trace_id NOT IN (SELECT trace_id FROM trace WHERE trace_id IS NOT NULL)"
        ids = [r[0] for r in con.execute(f"SELECT DISTINCT trace_id FROM {table} WHERE {orphan}").fetchall()]
        if ids:
            orphans.update(i for i in ids if i is not None)
            con.execute(f"DELETE FROM {table} WHERE {orphan}")
    for tid in sorted(orphans):
        stored.delete_trace(con, tid)
        derivation.forget(con, tid)
    return sorted(orphans)


def check_tables(con, db) -> None:
    """WorkspaceError unless every contract table of the workspace on con is a table with the
    contract's columns: `sql --write` can turn one into a view or drop its columns, and an
    ingest would then fail midway (it used to say 'internal error')."""
    from traceql.core.resources import CONTRACT_TABLES, contract_columns  # (from the SQL text: no DuckDB)

    views = {r[0] for r in con.execute(
        "SELECT view_name FROM duckdb_views() WHERE database_name = current_database() AND NOT temporary").fetchall()}
    columns: dict[str, set[str]] = {}
    for table, column in con.execute(
            "SELECT table_name, column_name FROM duckdb_columns() WHERE database_name = current_database() "
            "AND NOT EXISTS (SELECT 1 FROM duckdb_views() v WHERE v.view_name = table_name "
            "AND v.database_name = current_database())").fetchall():
        columns.setdefault(table, set()).add(column)
    again = "make it a table with the contract's columns again, or ingest into a new workspace"
    for name in CONTRACT_TABLES:
        if name in views:
            raise WorkspaceError(f"{db}: {name} is a view, not the table traceql ingests into "
                                 f"(changed with sql --write?); {again}")
        if name in columns:
            lacking = [c for c in contract_columns()[name] if c not in columns[name]]
            if lacking:
                raise WorkspaceError(f"{db}: table {name} lacks the contract's column{'s' if len(lacking) > 1 else ''} "
                                     f"{', '.join(lacking)} (changed with sql --write?); {again}")
