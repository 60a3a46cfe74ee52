"""Ingest: load profiler exports into a workspace through the versioned adapters.

Each ingest builds the new workspace in a temporary file next to the target (a copy of
the current workspace, when there is one) and renames it over the target only when
everything succeeded, so an interrupted or failed ingest leaves the previous workspace
exactly as it was. The source file is opened read-only.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import sys
import time
from datetime import datetime, timezone
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from . import __version__
from .adapters import prepare as prepare_adapters
from .detect import Detected, detect
from .errors import InputError, TraceqlError, UnsupportedVersionError, WorkspaceError
from .reader import stage
from .resources import CONTRACT_TABLES, CONTRACT_VIEWS, read_schema, schema_exists

# Adapter views each layout provides, in the order they are created. A layout folder
# (schemas/nsys/<layout>/) may override any file of schemas/nsys/common/.
ADAPTER_FILES = ("labels", "mem_kind", "kernel", "api_call", "memcpy", "memset",
                 "nvtx_event", "thread", "device", "stats")

# Contract tables filled from an adapter view, with the id column ingest numbers in
# (ts, source row) order. kernel, memcpy and memset share one id space (gpu_op.op_id).
ID_TABLES = (("kernel", "kernel_id"), ("memcpy", "memcpy_id"), ("memset", "memset_id"),
             ("api_call", "api_id"))

DEFAULT_MEMORY_LIMIT = "3GB"  # DuckDB buffer pool; spills beyond it (TRACEQL_MEMORY_LIMIT to change)


@dataclass
class IngestResult:
    path: Path
    trace_id: int
    replaced: bool
    detected: Detected
    counts: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0


def configure(con: duckdb.DuckDBPyConnection, temp_dir: Path) -> None:
    con.execute(f"SET memory_limit = '{os.environ.get('TRACEQL_MEMORY_LIMIT', DEFAULT_MEMORY_LIMIT)}'")
    con.execute("SET temp_directory = ?", [str(temp_dir)])
    con.execute("SET preserve_insertion_order = false")
    # DuckDB runs an ASOF join as a nested loop when it expects a small left side; its
    # estimate is far off for the (call, level) pairs of op_range, which made that quadratic.
    con.execute("SET asof_loop_join_threshold = 0")


def create_contract(con: duckdb.DuckDBPyConnection) -> None:
    """Create the contract tables and views in a workspace that lacks them."""
    existing = {r[0] for r in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() "
        "UNION ALL SELECT view_name FROM duckdb_views() WHERE database_name = current_database()").fetchall()}
    for name in CONTRACT_TABLES + CONTRACT_VIEWS:
        if name not in existing:
            con.execute(read_schema(f"contract/{name}.sql"))


def raw_ddl(layout: str) -> str:
    """The source tables a layout reads: <format>/raw.sql plus the layout folder's raw.sql."""
    fmt, _, folder = layout.partition("/")
    ddl = read_schema(f"{fmt}/raw.sql")
    if folder and schema_exists(f"{fmt}/{folder}/raw.sql"):
        ddl += "\n" + read_schema(f"{fmt}/{folder}/raw.sql")
    return ddl


def _adapter_sql(layout: str, name: str) -> str:
    fmt, _, folder = layout.partition("/")
    for rel in (f"{fmt}/{folder}/{name}.sql", f"{fmt}/common/{name}.sql"):
        if folder and schema_exists(rel):
            return read_schema(rel)
    raise RuntimeError(f"no adapter file {name}.sql for layout {layout}")


class _TimedConnection:
    """With TRACEQL_TIMING=1: a connection that prints each statement's wall time to stderr."""

    def __init__(self, con):
        self._con = con

    def execute(self, sql, *args):
        started = time.perf_counter()
        try:
            return self._con.execute(sql, *args)
        finally:
            head = " ".join(sql.split())[:90]
            print(f"[traceql timing] {time.perf_counter() - started:8.3f} s  {head}", file=sys.stderr)

    def __getattr__(self, name):
        return getattr(self._con, name)


@contextlib.contextmanager
def workspace_lock(db: Path):
    """An exclusive lock on the workspace for the duration of one ingest."""
    lock_path = db.with_name(db.name + ".lock")
    try:
        fh = open(lock_path, "a+")
    except OSError as exc:
        raise WorkspaceError(f"{db}: cannot create lock file ({exc.strerror or exc})") from None
    try:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise WorkspaceError(f"{db}: another traceql process is writing this workspace; try again when it ends") from None
        yield
    finally:
        fh.close()


def ingest(paths, db: str | os.PathLike = "traceql.duckdb", progress=None) -> list[IngestResult]:
    """Ingest every file in `paths` into the workspace `db`, all or nothing.

    Every file is detected before anything is written, so one bad file stops the whole
    command with the workspace untouched."""
    db = Path(db)
    paths = [Path(p) for p in paths]
    if not paths:
        raise InputError("no input files given")
    detected = [detect(p) for p in paths]
    if db.exists() and db.is_dir():
        raise WorkspaceError(f"{db}: is a directory, not a workspace file")
    parent = db.resolve().parent
    if not parent.is_dir():
        raise WorkspaceError(f"{db}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise WorkspaceError(f"{db}: directory {parent} is not writable")

    with workspace_lock(db):
        tmp = db.with_name(f".{db.name}.ingest-{os.getpid()}.tmp")
        tmpdir = db.with_name(f".{db.name}.ingest-{os.getpid()}.spill")
        results: list[IngestResult] = []
        try:
            if db.exists():
                shutil.copyfile(db, tmp)
            con = duckdb.connect(str(tmp))
            if os.environ.get("TRACEQL_TIMING"):
                con = _TimedConnection(con)
            try:
                configure(con, tmpdir)
                create_contract(con)
                for det in detected:
                    results.append(_ingest_one(con, det, progress))
                con.execute("CHECKPOINT")
            finally:
                con.close()
            os.replace(tmp, db)
        except duckdb.IOException as exc:
            raise WorkspaceError(f"{db}: cannot write the workspace ({str(exc).splitlines()[0]})") from None
        finally:
            for leftover in (tmp, tmp.with_name(tmp.name + ".wal")):
                with contextlib.suppress(FileNotFoundError):
                    os.remove(leftover)
            shutil.rmtree(tmpdir, ignore_errors=True)
        return results


def _ingest_one(con: duckdb.DuckDBPyConnection, det: Detected, progress) -> IngestResult:
    started = time.perf_counter()
    path = det.path.resolve()
    # No transaction: the whole ingest writes a temporary copy that replaces the workspace
    # only when every file succeeded.
    row = con.execute("SELECT trace_id FROM trace WHERE path = ?", [str(path)]).fetchone()
    if row is not None:
        trace_id, replaced = row[0], True
        for table in CONTRACT_TABLES:
            con.execute(f"DELETE FROM {table} WHERE trace_id = ?", [trace_id])
    else:
        trace_id = con.execute("SELECT coalesce(max(trace_id), 0) + 1 FROM trace").fetchone()[0]
        replaced = False
    result = IngestResult(path, trace_id, replaced, det, warnings=list(det.warnings))

    _drop_temp_objects(con)  # the previous file's adapter views and tables (another format may differ)
    con.execute("ATTACH ':memory:' AS raw")
    try:
        report = stage(con, path, raw_ddl(det.layout), det.tables,
                       progress=(lambda t: progress(det.path, t)) if progress else None)
        prepare_adapters(con, det.layout)
        for name in ADAPTER_FILES:
            con.execute(_adapter_sql(det.layout, name))
        _fill(con, trace_id)
        _add_stats(con, trace_id, det, report, result)
        _add_trace_row(con, trace_id, det, path)
    finally:
        con.execute("DETACH raw")
    for table in CONTRACT_TABLES:
        if table in ("trace", "ingest_stats"):
            continue
        result.counts[table] = con.execute(
            f"SELECT count(*) FROM {table} WHERE trace_id = ?", [trace_id]).fetchone()[0]
    result.seconds = time.perf_counter() - started
    return result


def _drop_temp_objects(con) -> None:
    for name, kind in con.execute(
            "SELECT view_name, 'VIEW' FROM duckdb_views() WHERE temporary AND NOT internal "
            "UNION ALL SELECT table_name, 'TABLE' FROM duckdb_tables() WHERE temporary").fetchall():
        con.execute(f'DROP {kind} IF EXISTS temp.main."{name}"')


def _fill(con: duckdb.DuckDBPyConnection, trace_id: int) -> None:
    offset = 0
    for table, id_col in ID_TABLES:
        if table == "api_call":
            offset = 0
        con.execute(
            f"INSERT INTO {table} BY NAME "
            f"SELECT ?::INTEGER AS trace_id, "
            f"       ?::BIGINT + row_number() OVER (ORDER BY ts, src_row) - 1 AS {id_col}, "
            f"       * EXCLUDE (src_row) "
            f"FROM src_{table}", [trace_id, offset])
        offset += con.execute(f"SELECT count(*) FROM {table} WHERE trace_id = ?", [trace_id]).fetchone()[0]

    con.execute("INSERT INTO thread BY NAME SELECT ?::INTEGER AS trace_id, * FROM src_thread", [trace_id])
    con.execute("INSERT INTO device BY NAME SELECT ?::INTEGER AS trace_id, * FROM src_device", [trace_id])
    con.execute(read_schema("derive/device_seen.sql"))
    con.execute("INSERT INTO device BY NAME SELECT * FROM derived_device_seen WHERE trace_id = ?", [trace_id])

    # Range ids in (start, end descending) order: sort the narrow keys, then join the wide rows
    # back; sorting the rows with their name strings costs three times as much.
    con.execute(
        "CREATE TABLE raw.nvtx_ids AS "
        "SELECT src_row, row_number() OVER (ORDER BY ts, end_ts DESC NULLS FIRST, src_row) - 1 AS range_id "
        "FROM src_nvtx_event WHERE kind = 'range'")
    con.execute(
        "CREATE TABLE raw.nvtx_stage AS "
        "SELECT i.range_id, e.* EXCLUDE (src_row, kind) "
        "FROM src_nvtx_event e JOIN raw.nvtx_ids i ON i.src_row = e.src_row")
    con.execute(read_schema("derive/nvtx_range.sql"))
    con.execute("INSERT INTO nvtx_range BY NAME SELECT ?::INTEGER AS trace_id, * FROM derived_nvtx_range",
                [trace_id])
    con.execute(
        "INSERT INTO nvtx_mark BY NAME "
        "SELECT ?::INTEGER AS trace_id, row_number() OVER (ORDER BY ts, src_row) - 1 AS mark_id, "
        "       pid, tid, ts, name, domain, color, category "
        "FROM src_nvtx_event WHERE kind = 'mark'", [trace_id])

    # correlation: launching calls, enclosing ranges, per-range GPU work (schemas/derive/)
    con.execute("SET VARIABLE trace_id = ?", [trace_id])
    for table in ("launch", "op_range", "range_gpu"):
        con.execute(read_schema(f"derive/{table}.sql"))
        con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM derived_{table}")


def _add_stats(con, trace_id: int, det: Detected, report, result: IngestResult) -> None:
    rows = [("source.reader", None, "info", f"source tables read with {report.reader}")]
    for table, reason in report.fallback_tables.items():
        rows.append((f"source.read_with_sqlite3.{table}", report.rows.get(table), "warning",
                     f"{table} could not be read with sqlite_scanner ({reason}); read with Python sqlite3"))
    if report.missing_tables:
        rows.append(("source.tables_absent", len(report.missing_tables), "info",
                     "tables not in this export (lazy export or older layout), read as empty: "
                     + ", ".join(sorted(report.missing_tables))))
    for warning in det.warnings:
        rows.append(("schema.version_newer_than_known" if "newer" in warning else "schema.note",
                     None, "warning", warning))
    rows += con.execute("SELECT key, value, severity, detail FROM src_stats").fetchall()
    con.execute(read_schema("derive/stats.sql"))
    rows += con.execute("SELECT key, value, severity, detail FROM derived_stats WHERE trace_id = ?",
                        [trace_id]).fetchall()
    con.executemany("INSERT INTO ingest_stats VALUES (?, ?, ?, ?, ?)",
                    [(trace_id, k, v, s, d) for k, v, s, d in rows])
    result.warnings += [d for _, _, s, d in rows if s == "warning" and d not in result.warnings]


def _add_trace_row(con, trace_id: int, det: Detected, path: Path) -> None:
    meta = det.metadata
    utc = con.execute("SELECT min(utcEpochNs) FROM raw.TARGET_INFO_SESSION_START_TIME").fetchone()[0]
    normalize = (meta.get("EXPORT_PARAM_TIME_NORMALIZE") or meta.get("EXPORT_TIME_NORMALIZE") or "").lower()
    shift = meta.get("EXPORT_CONFIG_TIME_SHIFT") or meta.get("EXPORT_PARAM_TIME_SHIFT") or "0"
    try:
        shift = int(shift)
    except ValueError:
        shift = 0
    con.execute(read_schema("derive/trace_span.sql"))
    start_ts, end_ts = con.execute(
        "SELECT start_ts, end_ts FROM derived_trace_span WHERE trace_id = ?", [trace_id]).fetchone() or (None, None)
    if normalize == "true" or (not normalize and start_ts is not None and start_ts > 10**17):
        clock, offset = "epoch", 0
    else:
        clock = "session"
        offset = None if utc is None else utc - shift
    con.execute(
        "INSERT INTO trace BY NAME SELECT "
        "?::INTEGER AS trace_id, ? AS path, ?::BIGINT AS file_size, ? AS source_format, "
        "? AS exporter_version, ? AS schema_version, ? AS layout, ? AS host, NULL AS rank, "
        "? AS clock, ?::BIGINT AS start_utc_ns, ?::BIGINT AS utc_offset_ns, ?::BIGINT AS start_ts, "
        "?::BIGINT AS end_ts, ?::BIGINT - ?::BIGINT AS duration, "
        "?::TIMESTAMP AS ingested_at, ? AS traceql_version",
        [trace_id, str(path), path.stat().st_size, det.source_format, det.exporter_version,
         det.schema_version, det.layout, meta.get("EXPORT_HOST"), clock, utc, offset,
         start_ts, end_ts, end_ts, start_ts,
         datetime.now(timezone.utc).replace(tzinfo=None), __version__])
