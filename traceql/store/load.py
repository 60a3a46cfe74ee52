"""One file into the workspace open on a connection: stage its source tables (traceql.sources),
run its layout's adapters, fill the contract tables and build the derived families an ingest
builds (traceql.store.families), the diagnostics, the trace row and the stored reports.
traceql.store.ingest runs this for each file, in this process or in a worker
(traceql.store.parallel)."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from traceql.core.errors import InputError, WorkspaceError
from traceql.core.faults import first_line
from traceql.core.resources import CONTRACT_TABLES, CONTRACT_VIEWS, TRACE_TABLES, read_schema
from traceql.core.settings import DEFAULT_MEMORY_LIMIT, TIME_LIMIT_NS, hash_right_side, small_input_threads
from traceql.core.version import __version__
from traceql.derive import callstacks, derivation
from traceql.sources.vendor import api_words
from traceql.store import contract, stored
from traceql.store.remove import check_tables
from traceql.store.families import add_stats, derive, drop_temp_objects, free_staging, ingest_families

if TYPE_CHECKING:  # the readers and the PyTorch formulas are imported where they run: a family build
    # (a workspace's first query of a deferred family) needs none of them (0.18 CPU s of imports)
    from traceql.sources import ranks
    from traceql.sources.detect import Detected


# Contract tables filled from an adapter view, with the id column ingest numbers in
# (ts, source row) order. kernel, memcpy and memset share one id space (gpu_op.op_id).
ID_TABLES = (("kernel", "kernel_id"), ("memcpy", "memcpy_id"), ("memset", "memset_id"),
             ("api_call", "api_id"))


@dataclass
class IngestResult:
    path: Path
    trace_id: int
    replaced: bool
    detected: Detected
    counts: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0
    identity: ranks.Identity | None = None  # host, rank, local rank, world size and where each came from
    gpu_api: str | None = None  # 'CUDA' or 'HIP' (trace.gpu_api, schemas/derive/gpu_api.sql)

    def capture_hint(self) -> str | None:
        """What a trace without GPU work was probably captured without, for people: None when
        it holds kernels, copies or memsets."""
        c = self.counts
        if any(c.get(v) for v in ("kernel", "memcpy", "memset")):
            return None
        fmt = self.detected.source_format
        if fmt == "kineto":
            return ("no GPU events (kernels, copies, memsets): was the PyTorch profiler run without "
                    "ProfilerActivity.CUDA in its activities?")
        if c.get("api_call"):
            return (f"{api_words([self.gpu_api])} but no kernel, copy or memset: the program ran no GPU work while it "
                    "was profiled")
        tool = "nsys profile -t cuda,nvtx" if fmt == "nsys" else "nvprof (without --profile-api-trace none)"
        return (f"no CUDA API calls and no GPU work: the file was captured without CUDA tracing (NVTX or "
                f"OS tracing only?); `{tool}` records kernels, copies and memsets")


def existing_objects(con: duckdb.DuckDBPyConnection) -> set[str]:
    """The tables and views of the workspace open on con."""
    return {r[0] for r in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() "
        "UNION ALL SELECT view_name FROM duckdb_views() WHERE database_name = current_database()").fetchall()}


def create_contract(con: duckdb.DuckDBPyConnection, db: Path | None = None) -> None:
    """Create the contract tables and views in a new workspace. An existing workspace must be
    of this traceql's contract version (traceql.store.contract): ingest never changes the rows of an
    older one under rules they were not computed with; `traceql upgrade` does that."""
    existing = existing_objects(con)
    if "trace" in existing:
        contract.check(con, db)
    # one transaction: a DDL statement committed on its own costs twice the CPU (for a new
    # workspace, 28 tables: 0.05 CPU s against 0.025)
    con.execute("BEGIN TRANSACTION")
    try:
        for name in CONTRACT_TABLES:
            if name not in existing:
                con.execute(read_schema(f"contract/{name}.sql"))
        if existing & set(CONTRACT_TABLES):  # (tables made here just now are the contract's)
            check_tables(con, db)  # a contract table turned into a view or lacking columns: before the views read them
        for name in CONTRACT_VIEWS:  # made again: a view changed with sql --write would feed traceql's own SQL
            con.execute(re.sub(r"\bCREATE VIEW\b", "CREATE OR REPLACE VIEW", read_schema(f"contract/{name}.sql"),
                               count=1))
        # the traces of a workspace from before it hold every family
        derivation.create_record(con, new=not existing)
    except BaseException:
        with contextlib.suppress(duckdb.Error):  # (the error said why; an aborted transaction rolls back anyway)
            con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


def _sqlite_errors() -> type[Exception] | tuple:
    """sqlite3's DatabaseError, or nothing when sqlite3 was never imported (then no error of it can
    be raised, and a family build, which reads no export, does not import it)."""
    module = sys.modules.get("sqlite3")
    return module.DatabaseError if module is not None else ()


@contextlib.contextmanager
def errors_of(path: Path):
    """Errors while ingesting one file, as one-line traceql errors naming it.

    A damaged export can fail deep inside DuckDB or sqlite3: values that do not fit the
    contract (an end of 2**63-1, a device id beyond INT32), a NULL where a contract column
    needs a value, a page that is corrupt. Those are input errors. Running out of memory
    or disk is a workspace (environment) error. Anything else is a bug and stays internal."""
    try:
        yield
    except (duckdb.DataError, duckdb.IntegrityError) as exc:
        raise InputError(f"{path}: holds values traceql cannot store ({first_line(exc)}); "
                         "if the export is unmodified, please report this with --debug output") from None
    except _sqlite_errors() as exc:
        raise InputError(f"{path}: damaged SQLite database ({exc})") from None
    except UnicodeDecodeError as exc:
        if path.suffix.lower() in (".json", ".gz"):
            raise InputError(f"{path}: text that is not valid UTF-8 ({exc.reason}, byte {exc.start} of a string)") from None
        raise InputError(f"{path}: damaged SQLite database (an error names undecodable bytes)") from None
    except duckdb.OutOfMemoryException as exc:
        raise WorkspaceError(
            f"{path}: out of memory while ingesting ({first_line(exc)}); TRACEQL_MEMORY_LIMIT sets the limit, "
            f"now {os.environ.get('TRACEQL_MEMORY_LIMIT', DEFAULT_MEMORY_LIMIT)}") from None
    except OSError as exc:
        if exc.filename is not None and Path(exc.filename).resolve() == path.resolve():
            raise InputError(f"{path}: cannot be read ({exc.strerror or exc})") from None
        raise


def ingest_one(con: duckdb.DuckDBPyConnection, det: Detected, progress, user: dict | None = None,
                assigned: tuple[int, bool] | None = None, also=()) -> IngestResult:
    """Ingest one file into the workspace on con. user: the --rank and --host given (ranks.resolve).
    assigned: (trace id, replaced) chosen by the caller (a worker process writing a workspace of
    its own, traceql.store.parallel), instead of looking the path up in con's trace table.
    also: deferred families to build now besides ingest_families() (with those they need)."""
    from traceql.sources import ranks
    from traceql.sources.adapters import ADAPTER_FILES, adapter_sql, raw_ddl
    from traceql.sources.adapters import prepare as prepare_adapters
    from traceql.sources.digest import FileDigest
    from traceql.sources.reader import stage

    started = time.perf_counter()
    path = det.path.resolve()
    # No transaction: the whole ingest writes a temporary copy that replaces the workspace
    # only when every file succeeded.
    # (the trace of this path, and the next free id: one statement)
    known, free = (None, None) if assigned is not None else con.execute(
        "SELECT (SELECT min(trace_id) FROM trace WHERE path = ?), (SELECT coalesce(max(trace_id), 0) + 1 FROM trace)",
        [str(path)]).fetchone()
    if assigned is not None:
        trace_id, replaced = assigned
    elif known is not None:
        trace_id, replaced = known, True
        for table in TRACE_TABLES:
            con.execute(f"DELETE FROM {table} WHERE trace_id = ?", [trace_id])
        stored.delete_trace(con, trace_id)
        derivation.forget(con, trace_id)
    else:
        trace_id, replaced = free, False
    result = IngestResult(path, trace_id, replaced, det, warnings=list(det.warnings))
    progress.start(det.path.name)
    stage_total = [0]

    def staging(table, done, total, rows):
        stage_total[0] = total
        read = f"{rows:,} row{'' if rows == 1 else 's'} read"
        progress.update(done, total + len(FILL_STEPS), f"reading {table} ({read})")

    def deriving(step):
        steps = stage_total[0] + len(FILL_STEPS)
        progress.update(steps if step == "done" else stage_total[0] + FILL_STEPS.index(step), steps,
                        step if step == "done" else f"building {step}")

    hashing = FileDigest(path)  # in a thread, while DuckDB reads the file
    drop_temp_objects(con)  # the previous file's adapter views and tables (another format may differ)
    con.execute("ATTACH ':memory:' AS raw")
    try:
        if det.source_format == "kineto":  # JSON, not SQLite: traceql/kineto.py stages it
            from traceql.sources import kineto

            report = kineto.stage(con, path, raw_ddl(det.layout), progress=staging, det=det)
        elif det.source_format == "rocprofv3_json":  # JSON staged as rocpd tables (sources/rocprof_json.py)
            from traceql.sources import rocprof_json

            report = rocprof_json.stage(con, path, raw_ddl(det.layout), progress=staging)
        elif det.compressed:  # FILE.rpd.gz: a decompressed copy, which the connection may not open itself
            from traceql.sources import gunzip

            with gunzip.decompressed(path) as plain:
                report = stage(con, plain, raw_ddl(det.layout), det.tables, progress=staging,
                               source_names=det.source_names, sqlite3_because="a decompressed copy of a gzip file")
        else:
            report = stage(con, path, raw_ddl(det.layout), det.tables, progress=staging,
                           source_names=det.source_names)
        prepare_adapters(con, det.layout)
        for name in ADAPTER_FILES:
            con.execute(adapter_sql(det.layout, name, report.rows))
        # what needs the source tables, before _fill frees them
        source_stats = con.execute("SELECT key, value, severity, detail FROM src_stats").fetchall()
        utc = con.execute("SELECT min(utcEpochNs) FROM raw.TARGET_INFO_SESSION_START_TIME").fetchone()[0]
        families = ingest_families().union(*(derivation.requires(f) for f in also))
        if _fill(con, trace_id, deriving, families, small=small_input_threads([path]) == 1):
            families |= {derivation.nesting()}
        span = _span(con, trace_id, det, utc)
        check_time_limits(con, trace_id, path, span)  # before any derived table adds or doubles times
        derive(con, trace_id, deriving, families - {derivation.nesting()})
        deriving("diagnostics")
        ident = result.identity = ranks.identify(det, user)  # after staging: Kineto's members are read then
        _count_rows(con, trace_id, result)  # (the contract rows are all there: the warnings name totals)
        _add_stats(con, trace_id, det, report, result, source_stats + ident.stats, families)
        _add_trace_row(con, trace_id, det, path, span, hashing.result(), ident)
        con.execute("SET VARIABLE trace_id = ?", [trace_id])
        con.execute(read_schema("derive/gpu_api.sql"))
        result.gpu_api = con.execute("SELECT gpu_api FROM trace WHERE trace_id = ?", [trace_id]).fetchone()[0]
        deriving("stored reports")
        stored.store(con, trace_id, families=families)
        derivation.record(con, trace_id, families)
        deriving("done")
    finally:
        con.execute("DETACH DATABASE IF EXISTS raw")  # (a Ctrl-C inside free_staging: raw may be gone)
    result.seconds = time.perf_counter() - started
    return result


# Contract tables of what the host waited on, filled from the source (schemas/derive/host.sql).
HOST_TABLES = ("sync_event", "osrt_call", "profiler_overhead", "gpu_metric")


# What _fill and ingest_one tell the progress display after the source tables are read.
FILL_STEPS = ("kernel", "memcpy", "memset", "api_call", "thread and device", "graphs", "host", "call_stack",
              "nvtx_mark", "nvtx_range", "memory_event", "launch", "op_range", "range_gpu", "torch_op", "kernel_op", "device_peak",
              "device_busy", "unattributed_gpu", "op_stack", "diagnostics", "stored reports")


def _fill(con: duckdb.DuckDBPyConnection, trace_id: int, step=lambda name: None, families=(),
          small: bool = False) -> bool:
    """The contract tables read from the source's adapter views (ingest_one derives the rest), and
    nvtx_range_source. The ranges are nested into nvtx_range now when FAMILIES holds the family
    'nesting' (which also places the memory events in them); returns whether they were.
    small: the export is small (traceql.core.settings.small_input_threads): rows are numbered in one
    pass (see below)."""
    offset = 0  # kernel, memcpy and memset share one id space; api_call has its own
    for table, id_col in ID_TABLES:
        step(table)
        if table == "api_call":
            offset = 0
        # number the narrow (ts, src_row) keys, then join the wide rows to them: sorting the
        # rows with their name strings costs twice as much. Not for a small export: there the
        # second reading of the adapter view (its joins planned and run again) costs more than the
        # sort saves (17 k kernels: 0.05 CPU s in two passes, 0.03 in one; 100 k: 0.17 and 0.14).
        # (ts, src_row) is unique: both number the rows alike.
        inserted = con.execute(
            f"INSERT INTO {table} BY NAME "
            f"SELECT ?::INTEGER AS trace_id, ?::BIGINT + row_number() OVER (ORDER BY ts, src_row) - 1 AS {id_col}, "
            f"       * EXCLUDE (src_row) FROM src_{table}"
            if small else
            f"INSERT INTO {table} BY NAME "
            f"SELECT ?::INTEGER AS trace_id, ?::BIGINT + i.n AS {id_col}, s.* EXCLUDE (src_row) "
            f"FROM src_{table} s "
            f"JOIN (SELECT src_row, row_number() OVER (ORDER BY ts, src_row) - 1 AS n FROM src_{table}) i "
            f"  USING (src_row)", [trace_id, offset]).fetchone()[0]
        offset += inserted

    step("thread and device")
    con.execute("INSERT INTO thread BY NAME SELECT ?::INTEGER AS trace_id, * FROM src_thread", [trace_id])
    con.execute("INSERT INTO device BY NAME SELECT ?::INTEGER AS trace_id, * FROM src_device", [trace_id])
    con.execute(read_schema("derive/device_seen.sql"))
    con.execute("INSERT INTO device BY NAME SELECT * FROM derived_device_seen WHERE trace_id = ?", [trace_id])

    present = _present(con)
    step("graphs")  # CUDA graph executions and lifecycle events with their API calls (schemas/derive/graph.sql)
    con.execute("SET VARIABLE trace_id = ?", [trace_id])
    _derive_present(con, "derive/graph.sql", ("graph_exec", "graph_event"), present)

    step("host")  # synchronizations with their API calls, OS runtime calls, profiler overhead, GPU metrics
    _derive_present(con, "derive/host.sql", HOST_TABLES, present)

    step("call_stack")  # recorded call stacks: CUDA backtraces, PyTorch profiler Python stacks (traceql.derive.callstacks)
    if "src_call_stack" in present:
        callstacks.fill(con, trace_id)

    ranges = "src_nvtx_event" in present
    step("nvtx_mark")
    if ranges:
        con.execute(
            "INSERT INTO nvtx_mark BY NAME "
            "SELECT ?::INTEGER AS trace_id, row_number() OVER (ORDER BY ts, src_row) - 1 AS mark_id, "
            "       pid, tid, ts, name, domain, color, category "
            "FROM src_nvtx_event WHERE kind = 'mark'", [trace_id])

    step("nvtx_range")
    # allocations and frees (schemas/derive/memory_event.sql), written below; the nesting places
    # them in the ranges (schemas/derive/memory_range.sql)
    memory = "src_memory_event" in present
    if memory:
        con.execute("CREATE OR REPLACE TEMP TABLE memory_stage AS SELECT * FROM src_memory_event")
    # Nested now when asked for. Then the ranges are staged in a temporary table of the same name,
    # which the nesting reads (DuckDB looks a name up in temp first) and empties: a table of the
    # workspace would write them to disk (3 CPU s more for 3 M ranges), only to delete them.
    nest = derivation.nesting() in families
    source = derivation.RANGE_SOURCE
    if ranges and not nest:
        # Left for the nesting, which numbers them (schemas/derive/nvtx_range.sql): each keeps
        # -1 - its source row as range_id. Numbering them here was a sort and a join of 3 M rows
        # (0.9 s of a 6.6 s first `report --by kernel` at 1 M kernels) that the kernel report
        # does not need.
        con.execute(
            f"INSERT INTO {source} BY NAME SELECT ?::INTEGER AS trace_id, -1 - src_row AS range_id, "
            "* EXCLUDE (src_row, kind) FROM src_nvtx_event WHERE kind = 'range'", [trace_id])
    elif ranges:
        # Range ids in (start, end descending) order: sort the narrow keys, then join the wide rows
        # back; sorting the rows with their name strings costs three times as much (a small
        # export's in one pass, as the ID_TABLES above). The nesting would number them in the same
        # order (schemas/derive/nvtx_range.sql), but there through a view joined in three steps:
        # left to it, an eager ingest cost 5.5 % more CPU at 250 k kernels and 6.2 % at 1 M, with
        # a peak 290 MB higher (2.63 against 2.34 GB; paired runs, 28 Nov).
        range_order = "ORDER BY ts, end_ts DESC NULLS FIRST, src_row"
        con.execute(f"CREATE OR REPLACE TEMP TABLE {source} AS SELECT * FROM {source} LIMIT 0")
        if small:
            con.execute(
                f"INSERT INTO temp.main.{source} BY NAME "
                f"SELECT ?::INTEGER AS trace_id, row_number() OVER ({range_order}) - 1 AS range_id, "
                "* EXCLUDE (src_row, kind) FROM src_nvtx_event WHERE kind = 'range'", [trace_id])
        else:
            con.execute(
                f"CREATE TABLE raw.nvtx_ids AS "
                f"SELECT src_row, row_number() OVER ({range_order}) - 1 AS range_id "
                "FROM src_nvtx_event WHERE kind = 'range'")
            # the narrow ids hashed, not the ranges with their names: DuckDB expects 1/25 of the
            # events after the view's filters (hash_right_side). 4 M kernels (12 M ranges) under a
            # 1.2 GB limit, as 10 M spill under 3 GB: 7.2 against 11.3 CPU s.
            with hash_right_side(con):
                con.execute(
                    f"INSERT INTO temp.main.{source} BY NAME "
                    "SELECT ?::INTEGER AS trace_id, i.range_id, e.* EXCLUDE (src_row, kind) "
                    "FROM src_nvtx_event e JOIN raw.nvtx_ids i ON i.src_row = e.src_row", [trace_id])
    elif nest:  # (the nesting reads the temporary table: empty)
        con.execute(f"CREATE OR REPLACE TEMP TABLE {source} AS SELECT * FROM {source} LIMIT 0")
    free_staging(con)  # every source table has been read: memory for the rest
    step("memory_event")
    if memory:  # (before the nesting, which places them in the ranges)
        con.execute("SET VARIABLE trace_id = ?", [trace_id])
        con.execute(read_schema("derive/memory_event.sql"))
        con.execute("INSERT INTO memory_event BY NAME SELECT * FROM derived_memory_event")
        free_staging(con, "memory_stage")
    if nest:
        derive(con, trace_id, step, {derivation.nesting()})
        con.execute(f"DROP TABLE temp.main.{source}")
    return nest


# Adapter views that many exports leave empty (no CUDA graphs, OS runtime calls, GPU metrics, call
# stacks, NVTX, memory events). _fill asks once which hold a row, and skips the steps that read
# only empty ones: each is a view and an INSERT of 3-10 ms however few rows they move, about a
# fifth of a small export's ingest, where one question costs one statement.
OPTIONAL_SOURCES = ("src_graph_exec", "src_graph_event", "src_sync_event", "src_osrt_call", "src_profiler_overhead",
                    "src_gpu_metric", "src_call_stack", "src_nvtx_event", "src_memory_event")


def _present(con) -> set[str]:
    """The views of OPTIONAL_SOURCES that hold a row (a UNION ALL: DuckDB plans a row of EXISTS
    subqueries three times as slowly)."""
    return {name for (name,) in con.execute(" UNION ALL ".join(
        f"SELECT '{v}' FROM (SELECT 1 FROM {v} LIMIT 1)" for v in OPTIONAL_SOURCES)).fetchall()}


def _derive_present(con, sql_file: str, tables, present: set[str]) -> None:
    """Fill TABLES from the views derived_<table> of SQL_FILE, each read from the adapter view
    src_<table>, whose rows it keeps (no more, no fewer): those whose source holds no row are
    left empty, and the file is not even run when none does."""
    todo = [t for t in tables if f"src_{t}" in present]
    if todo:
        con.execute(read_schema(sql_file))
    for table in todo:
        con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM derived_{table}")


def _count_rows(con, trace_id: int, result: IngestResult) -> None:
    """result.counts: the trace's rows in each contract table (but trace and ingest_stats)."""
    counted = [t for t in CONTRACT_TABLES if t not in ("trace", "ingest_stats")] + [derivation.RANGE_SOURCE]
    # one statement (a small ingest runs about 200: each costs a millisecond or more however little it
    # does); a UNION ALL of the counts, not one row of scalar subqueries, which DuckDB plans as cross products
    rows = con.execute(" UNION ALL ".join(f"SELECT '{t}', count(*) FROM {t} WHERE trace_id = $id" for t in counted),
                       {"id": trace_id}).fetchall()
    result.counts.update(dict(rows))
    result.counts["nvtx_range"] += result.counts.pop(derivation.RANGE_SOURCE)  # (nested or not yet)


def _add_stats(con, trace_id: int, det: Detected, report, result: IngestResult, source_stats,
               families=None) -> None:
    """ingest_stats rows of the trace: the source's, the reader's and those of schemas/derive/stats.sql
    that read no family left for later (FAMILIES: those built; default all; see traceql.store.families.build_families)."""
    rows = [("source.reader", None, "info", f"source tables read with {report.reader}")]
    if det.exported_from is not None:
        rows.append(("source.exported_from", None, "info",
                     f"the SQLite export of the Nsight Systems report {det.exported_from}, written by nsys export"))
    for table, reason in report.fallback_tables.items():
        rows.append((f"source.read_with_sqlite3.{table}", report.rows.get(table), "warning",
                     f"{table} could not be read with sqlite_scanner ({reason}); read with Python sqlite3"))
    for table, n in report.duplicate_keys.items():
        rows.append((f"source.duplicate_keys.{table}", n, "warning",
                     f"{table} repeats ids its schema declares unique (a damaged or edited export): "
                     "the first row of each id was kept"))
    if report.missing_tables:
        rows.append(("source.tables_absent", len(report.missing_tables), "info",
                     "tables not in this export (lazy export or older layout), read as empty: "
                     + ", ".join(sorted(report.missing_tables))))
    rows += report.absent_essentials()
    rows += report.source_stats  # the reader's own rows (rocprofv3 JSON: record kinds not read)
    for warning in det.warnings:
        rows.append(("schema.version_newer_than_known" if "newer" in warning else "schema.note",
                     None, "warning", warning))
    rows += source_stats
    later = set(derivation.families()) - set(families if families is not None else derivation.families())
    if "pytorch" not in later:
        from traceql.derive.pytorch import plugin_stats

        rows += plugin_stats()  # FLOPs plug-ins that raised (traceql.derive.flops_plugins)
    # the diagnostics of the families built, one statement: the parts of stats.sql that read a family
    # left for later are not even planned (they were, in a view filtered by key: 2 statements, 0.01-0.02
    # CPU s of a small export's ingest). nvtx_range_any was made by _span (trace_span.sql).
    sql = derivation.stats_sql(None, set(derivation.families()) - later)
    if sql is not None:
        rows += con.execute(f"SELECT key, value, severity, detail FROM ({sql}) AS s(trace_id, key, value, severity, "
                            "detail) WHERE trace_id = ?", [trace_id]).fetchall()
    add_stats(con, [(trace_id, k, v, s, d) for k, v, s, d in rows])
    from traceql.store.ingest_warnings import warning_text

    c = result.counts  # (_count_rows)
    totals = {"gpu_op": c["kernel"] + c["memcpy"] + c["memset"], "kernel": c["kernel"], "api_call": c["api_call"],
              "nvtx_range": c["nvtx_range"]}
    texts = [warning_text(k, v, d, totals) for k, v, s, d in rows if s == "warning"]
    result.warnings += [t for i, t in enumerate(texts) if t not in result.warnings and t not in texts[:i]]


@dataclass
class Span:
    """A trace's clock: 'session' or 'epoch'; start_utc_ns and utc_offset_ns (None when unknown);
    its earliest ts and latest end (schemas/derive/trace_span.sql)."""
    clock: str
    utc: int | None
    offset: int | None
    start_ts: int | None
    end_ts: int | None


def _span(con, trace_id: int, det: Detected, utc: int | None) -> Span:
    meta = det.metadata
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
        return Span("epoch", utc, 0, start_ts, end_ts)
    return Span("session", utc, None if utc is None else utc - shift, start_ts, end_ts)


def check_time_limits(con, trace_id: int, path: Path, span: Span) -> None:
    """Refuse the file (InputError, exit 3) when its times or durations leave no headroom for
    traceql's 64-bit arithmetic: a ts, ts + dur or UTC time (utc_offset_ns + ts) outside
    (-TIME_LIMIT_NS, TIME_LIMIT_NS), or durations whose absolute values add up to TIME_LIMIT_NS
    or more (traceql.core.settings). Within them a span, a midpoint, the sum of two times and
    the sum of any durations of one trace (or of two traces) fit in a BIGINT."""
    con.execute("SET VARIABLE trace_id = ?", [trace_id])
    con.execute(read_schema("derive/time_limits.sql"))
    rows = con.execute("SELECT tbl, min_ts, max_ts, min_end, max_end, dur_sum FROM derived_time_limits "
                       "ORDER BY tbl").fetchall()
    beyond = f"is beyond traceql's time limit of +-2**62 ns (+-{TIME_LIMIT_NS}: headroom for 64-bit arithmetic, " \
             "see docs/errors.md)"
    times = [(f"{tbl}.ts", v) for tbl, *values in rows for v in values[0:2]] + \
            [(f"{tbl}.ts + dur", v) for tbl, *values in rows for v in values[2:4]]
    times = [(label, v) for label, v in times if v is not None]
    values = [(f"{label} = {v}", v) for label, v in times]  # (what, value in ns)
    if span.utc is not None:
        values.append((f"the UTC start of its session (start_utc_ns) = {span.utc}", span.utc))
    if span.offset:
        values += [(f"the UTC time of {label} (utc_offset_ns {span.offset} + {v}) = {span.offset + v}",
                    span.offset + v) for label, v in times]
    outside = [(what, v) for what, v in values if not -TIME_LIMIT_NS < v < TIME_LIMIT_NS]
    if outside:  # the furthest out
        raise InputError(f"{path}: {max(outside, key=lambda o: abs(o[1]))[0]} ns {beyond}")
    total = sum(r[5] for r in rows if r[5] is not None)
    if total >= TIME_LIMIT_NS:
        raise InputError(f"{path}: its durations add up to {total} ns (abs(dur), every table), beyond traceql's "
                         f"limit of 2**62 ns ({TIME_LIMIT_NS}) for one trace (headroom for 64-bit sums, see "
                         "docs/errors.md)")



def check_workspace_limits(con, trace_ids) -> None:
    """Refuse the ingest (InputError, exit 3) when, with its traces TRACE_IDS, the durations of
    the workspace's traces (abs(dur), every table) add up to TIME_LIMIT_NS or more, or their
    spans (trace.duration) to 2**63 or more: a report's sum across traces is then exact in a
    BIGINT, never a blank cell. The file named is the first of TRACE_IDS (in trace id order,
    after the traces already there) with which the sum reaches the limit."""
    new = set(trace_ids)
    try:  # the views check_time_limits made for the last file read here (4 statements less)
        found = con.execute("SELECT trace_id, path, dur_sum, span FROM derived_workspace_limits").fetchall()
    except duckdb.CatalogException:  # files read by workers only, or a connection without them
        con.execute(read_schema("derive/time_limits.sql"))
        found = con.execute("SELECT trace_id, path, dur_sum, span FROM derived_workspace_limits").fetchall()
    rows = sorted(found, key=lambda r: (r[0] in new, r[0]))
    first_new = next((i for i, r in enumerate(rows) if r[0] in new), None)
    if first_new is None:
        return
    durations = spans = 0
    for i, (_, path, dur_sum, span) in enumerate(rows):
        durations, spans = durations + dur_sum, spans + span
        named = rows[max(i, first_new)][1]
        if durations >= TIME_LIMIT_NS:
            raise InputError(f"{named}: with it the durations of the workspace's {i + 1} traces add up to "
                             f"{durations} ns (abs(dur), every table), beyond traceql's limit of 2**62 ns "
                             f"({TIME_LIMIT_NS}) for one workspace (headroom for 64-bit sums across traces, see "
                             "docs/errors.md); ingest it into another workspace")
        if spans >= 2 ** 63:
            raise InputError(f"{named}: with it the spans of the workspace's {i + 1} traces add up to {spans} ns "
                             "(trace.duration), beyond 2**63-1, the largest 64-bit sum (see docs/errors.md); "
                             "ingest it into another workspace")


def _add_trace_row(con, trace_id: int, det: Detected, path: Path, span: Span, sha256: str | None,
                   ident: ranks.Identity) -> None:
    from traceql.sources import ranks

    con.execute(
        "INSERT INTO trace BY NAME SELECT "
        "?::INTEGER AS trace_id, ? AS path, ?::BIGINT AS file_size, ? AS file_sha256, ? AS source_format, "
        "? AS exporter_version, ? AS schema_version, ? AS layout, "
        "? AS host, ? AS host_source, ?::INTEGER AS rank, ? AS rank_source, "
        "?::INTEGER AS local_rank, ? AS local_rank_source, ?::INTEGER AS world_size, ? AS world_size_source, "
        "? AS clock, ?::BIGINT AS start_utc_ns, ?::BIGINT AS utc_offset_ns, ?::BIGINT AS start_ts, "
        "?::BIGINT AS end_ts, ?::BIGINT - ?::BIGINT AS duration, "
        "?::TIMESTAMP AS ingested_at, ? AS traceql_version, ? AS driver_version, ? AS cuda_driver_version, "
        "? AS cuda_runtime_version, ? AS torch_version",
        [trace_id, str(path), path.stat().st_size, sha256, det.source_format, det.exporter_version,
         det.schema_version, det.layout, *(f(name) for name in ranks.FIELDS for f in (ident.value, ident.source)),
         span.clock, span.utc, span.offset,
         span.start_ts, span.end_ts, span.end_ts, span.start_ts,
         datetime.now(timezone.utc).replace(tzinfo=None), __version__,
         *(det.versions.get(k) for k in ("driver_version", "cuda_driver_version", "cuda_runtime_version",
                                         "torch_version"))])
