"""Reports stored at ingest: the default rows of each trace of the reports the registry marks
stored (registry.STORED; one that reads a family built on first use, when that is built),
computed by the same query library SQL the report runs, so that asking for them reads a few rows
instead of scanning millions.

A stored report answers only what it was computed for: the report's default parameters, no
--where, and either one trace or --per-trace. Anything else is computed as before. Each report
query's rows live in a table named after a hash of its SQL and default options
(stored_<report>_<fingerprint>), so rows stored by another traceql version, whose query
differs, are never read. A workspace written with `traceql sql --write` (Workspace.sql on a
workspace opened with write=True) drops them all: they could disagree with the changed
tables. Statements run on Workspace.con directly bypass that; call forget(ws.con) after
changing contract tables that way.
"""

from __future__ import annotations

import contextlib
import hashlib
import re

import duckdb

from traceql.query import library, registry
from traceql.core.faults import is_interrupt
from traceql.core.results import read_whole
from traceql.core.resources import read_schema

# The reports stored at ingest: those whose input grows with the trace (the registry's 'stored').
STORED = registry.STORED

# A report of more rows than this (e.g. ranges named with sequence numbers) is not stored: it
# would cost as much to read as to compute.
MAX_ROWS = 100_000

REGISTRY = "stored_report"


def fingerprint(by: str, q: library.Query) -> str:
    """A hash of what the stored rows were computed with: the report's SQL, its defaults and the
    contract version (traceql.store.contract) of the tables it read."""
    from traceql.store.contract import CONTRACT_VERSION

    text = f"contract {CONTRACT_VERSION}\n" + q.sql + "\n" + repr(sorted(_default_bound(by, q).items()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def table_name(by: str, q: library.Query) -> str:
    return _table(by, fingerprint(by, q))


def _table(by: str, fp: str) -> str:
    """The table of report BY's rows stored by the query version FP."""
    return f"stored_{by.replace('-', '_')}_{fp}"


def _scope_free(bound: dict) -> dict:
    """A report's bound parameters without the two that choose the traces."""
    return {k: v for k, v in bound.items() if k not in ("trace_id", "per_trace")}


def _default_bound(by: str, q: library.Query) -> dict:
    return library.bind(q, {**registry.REPORTS[by].defaults, "per_trace": True})


def store(con: duckdb.DuckDBPyConnection, trace_id: int, families=None, only_new=None) -> None:
    """Compute and keep the default reports of trace TRACE_ID (ingest, after its contract rows
    are written). Stored rows of other query versions are dropped. FAMILIES: the families of
    derived tables built for the trace (traceql.derive.derivation; default all): a report that reads
    another family is stored when that is built. ONLY_NEW: only the reports that read one of
    these families (just built)."""
    from traceql.derive.derivation import read_by
    from traceql.query.reports import report_query

    con.execute(read_schema("stored_report.sql"))
    todo = []
    for by in STORED:
        q = report_query(by)
        reads = read_by(q.sql)
        if families is not None and not reads <= set(families):
            continue
        if only_new is not None and not reads & set(only_new):
            continue
        todo.append((by, q))
    if not todo:
        return
    tables = set(_stored_tables(con))  # listed once: the catalog is listed whole each time
    # (a small ingest runs some 230 statements, each a millisecond or more however little it does:
    # the registry is written with one DELETE and one INSERT for all reports)
    con.execute(f"DELETE FROM {REGISTRY} WHERE trace_id = ? AND list_contains(?, report)",
                [trace_id, [by for by, _ in todo]])
    stored = []
    # the report's rows in its order (insertion order kept: a temporary table's rowid numbers
    # them), kept in DuckDB: no Arrow round trip
    with _insertion_order(con):
        try:
            for by, q in todo:
                fp = fingerprint(by, q)
                name = _table(by, fp)
                _drop_other_versions(con, by, fp, tables)
                bound = {**_default_bound(by, q), "trace_id": trace_id}
                try:  # (CREATE TABLE AS returns its row count)
                    n = con.execute(f"CREATE OR REPLACE TEMP TABLE _traceql_stored_rows AS "
                                    f"{q.sql.strip().rstrip(';')}", bound).fetchone()[0]
                except duckdb.Error as exc:  # e.g. sums beyond BIGINT: the report says why when it is asked for
                    if is_interrupt(exc):  # Ctrl-C: the ingest stops, it does not go on without this report
                        raise
                    continue
                if n > MAX_ROWS:
                    continue
                rows = "(SELECT *, rowid AS row_no FROM _traceql_stored_rows)"
                try:
                    if name in tables:
                        con.execute(f"DELETE FROM {name} WHERE trace_id = ?", [trace_id])
                        con.execute(f"INSERT INTO {name} SELECT * FROM {rows} ORDER BY row_no")
                    else:
                        con.execute(f"CREATE TABLE {name} AS SELECT * FROM {rows} ORDER BY row_no")
                        tables.add(name)
                except duckdb.Error as exc:  # rows another trace stored with other types: computed on demand
                    if is_interrupt(exc):
                        raise
                    continue
                stored.append((by, fp, n))
        finally:
            con.execute("DROP TABLE IF EXISTS _traceql_stored_rows")
    if stored:
        con.execute(f"INSERT INTO {REGISTRY} SELECT ?, unnest(?::VARCHAR[]), unnest(?::VARCHAR[]), "
                    f"unnest(?::BIGINT[])", [trace_id, *map(list, zip(*stored))])


@contextlib.contextmanager
def _insertion_order(con: duckdb.DuckDBPyConnection):
    """preserve_insertion_order on for the block (ingest turns it off), as it was after."""
    was = con.execute("SELECT current_setting('preserve_insertion_order')").fetchone()[0]
    con.execute("SET preserve_insertion_order = true")
    try:
        yield
    finally:
        con.execute(f"SET preserve_insertion_order = {'true' if was else 'false'}")


def adopt(con: duckdb.DuckDBPyConnection, schema: str, trace_id: int) -> None:
    """Take the reports stored for trace TRACE_ID in the attached workspace SCHEMA (a worker
    process's, traceql.store.parallel) into the workspace on con, as store() would have kept them."""
    con.execute(read_schema("stored_report.sql"))
    try:
        rows = con.execute(f'SELECT report, fingerprint, row_count FROM "{schema}".{REGISTRY} WHERE trace_id = ?',
                           [trace_id]).fetchall()
    except duckdb.CatalogException:  # the worker stored none
        return
    for by, fp, count in rows:
        name = _table(by, fp)
        _drop_other_versions(con, by, fp)
        con.execute(f"DELETE FROM {REGISTRY} WHERE trace_id = ? AND report = ?", [trace_id, by])
        try:
            con.execute(f'CREATE TABLE IF NOT EXISTS {name} AS SELECT * FROM "{schema}".{name} LIMIT 0')
            con.execute(f"DELETE FROM {name} WHERE trace_id = ?", [trace_id])
            con.execute(f'INSERT INTO {name} SELECT * FROM "{schema}".{name} WHERE trace_id = ?', [trace_id])
        except duckdb.Error as exc:  # rows another trace stored with other types: computed on demand
            if is_interrupt(exc):
                raise
            continue
        con.execute(f"INSERT INTO {REGISTRY} VALUES (?, ?, ?, ?)", [trace_id, by, fp, count])


def _stored_tables(con, by: str | None = None) -> list[str]:
    """The stored rows tables of report BY (of every report when None), of any version."""
    pattern = (_table(by, "") if by else "stored_[a-z_]+_") + "[0-9a-f]{16}"
    return [name for (name,) in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() "
        "AND regexp_full_match(table_name, ?)", [pattern]).fetchall()]


def _drop_other_versions(con, by: str, keep_fp: str, tables: set[str] | None = None) -> None:
    """Drop the rows of report BY stored by other query versions than KEEP_FP. tables: the stored
    rows tables of the workspace (_stored_tables), kept up to date here; listed when None."""
    mine = re.compile(re.escape(_table(by, "")) + "[0-9a-f]{16}")
    for name in sorted(_stored_tables(con, by) if tables is None else (t for t in tables if mine.fullmatch(t))):
        fp = name.rsplit("_", 1)[1]
        if fp != keep_fp:
            con.execute(f'DROP TABLE "{name}"')
            con.execute(f"DELETE FROM {REGISTRY} WHERE report = ? AND fingerprint = ?", [by, fp])
            if tables is not None:
                tables.discard(name)


def delete_trace(con: duckdb.DuckDBPyConnection, trace_id: int) -> None:
    """Forget the stored reports of a trace that is being replaced."""
    for name in _stored_tables(con):
        con.execute(f"DELETE FROM {name} WHERE trace_id = ?", [trace_id])
    with contextlib.suppress(duckdb.CatalogException):  # no registry: a workspace from before stored reports
        con.execute(f"DELETE FROM {REGISTRY} WHERE trace_id = ?", [trace_id])


def forget(con: duckdb.DuckDBPyConnection) -> None:
    """Drop every stored report (the workspace was changed by a user's statement)."""
    for name in _stored_tables(con) + [REGISTRY]:
        con.execute(f'DROP TABLE IF EXISTS "{name}"')


def load(con: duckdb.DuckDBPyConnection, by: str, q: library.Query, bound: dict,
         limit: int | None = None, rows: bool = False) -> "pa.Table | None":
    """Report BY with these bound parameters from its stored rows, or None when they cannot
    answer it: other parameters than the defaults, several traces without per_trace, a trace
    ingested before reports were stored, or a report too large to store. limit: only the
    first rows of each trace (in the report's order). rows: as traceql.core.results.read_whole."""
    if by not in STORED or q.origin is not None:
        return None
    if _scope_free(bound) != _scope_free(_default_bound(by, q)):
        return None
    fp = fingerprint(by, q)
    try:
        # the whole registry (a row per trace and stored report) and the traces asked for, in two
        # plain statements: their join took DuckDB 4 ms to plan and run, these 1.3 ms together
        stored = {t for t, r, f in con.execute(f"SELECT trace_id, report, fingerprint FROM {REGISTRY}").fetchall()
                  if r == by and f == fp}
        ids = [t for (t,) in con.execute("SELECT trace_id FROM trace WHERE ? IS NULL OR trace_id = ?",
                                         [bound.get("trace_id"), bound.get("trace_id")]).fetchall()]
        if not ids or not stored.issuperset(ids) or (len(ids) > 1 and not bound.get("per_trace")):
            return None
        return read_whole(con.execute(
            f"SELECT * EXCLUDE (row_no) FROM {_table(by, fp)} WHERE list_contains(?, trace_id) "
            "AND (?::BIGINT IS NULL OR row_no < ?::BIGINT) ORDER BY trace_id, row_no",
            [ids, limit, limit]), rows)
    except duckdb.CatalogException:  # a workspace from before stored reports, or rows someone dropped
        return None
