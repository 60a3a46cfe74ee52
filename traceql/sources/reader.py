"""Stage the source tables an adapter reads into DuckDB (the `raw` catalog).

The adapter's raw.sql declares the tables and columns it reads. Each table is read
through DuckDB's sqlite_scanner extension, loaded from the pinned PyPI package; when
the extension cannot load, or a table cannot be read through it (invalid UTF-8, values
that do not fit the declared type), that table is read with Python's sqlite3 into Arrow
batches instead. Columns the file lacks are NULL, tables it lacks are empty.
"""

from __future__ import annotations

import os
import re
import sqlite3
import weakref
from pathlib import Path

import duckdb

from traceql.sources.detect import connect_readonly, is_wal, sqlite_error
from traceql.core.faults import is_interrupt
from traceql.sources.stage_report import StageReport, create_raw_tables

BATCH_ROWS = 100_000


# The connections load_sqlite_scanner loaded sqlite_scanner on (asking DuckDB instead lists every
# function of the catalog, 0.05 s a time).
_LOADED: weakref.WeakSet = weakref.WeakSet()


def load_sqlite_scanner(con: duckdb.DuckDBPyConnection, fresh: bool = False) -> str | None:
    """Load sqlite_scanner without any download. Returns None on success, else the reason.
    fresh: con was just opened by traceql with extension autoloading off (it has none loaded).

    traceql.store.guard.connect opens such a connection with allow_unsigned_extensions for this
    LOAD alone: DuckDB then skips checking the file's signature, a SHA-256 of its 35 MB (0.2 CPU
    s, a tenth of a small export's ingest). The file is the one of the pinned PyPI package
    installed with traceql (trusted as duckdb's own code is); nothing else is loaded, and the
    setting is turned off before the connection runs any other statement."""
    if os.environ.get("TRACEQL_READER", "").lower() == "sqlite3":
        return "TRACEQL_READER=sqlite3"
    con = getattr(con, "untimed", con)  # (TRACEQL_TIMING wraps the connection: no check it would not run)
    try:
        if con in _LOADED:
            return None
    except TypeError:  # not weak-referenceable
        pass
    problem = _load(con, fresh)
    if problem is None:
        try:
            _LOADED.add(con)
        except TypeError:  # asked again next time
            pass
    return problem


def _load(con: duckdb.DuckDBPyConnection, fresh: bool) -> str | None:
    if not fresh and con.execute("SELECT function_name FROM system.main.duckdb_functions() "  # (duckdb_extensions() lists a
                   "WHERE function_name = 'sqlite_scan' AND database_name = 'system' LIMIT 1").fetchall():  # folder)
        return None  # loaded when the connection was opened (traceql.store.guard.connect)
    reasons = []
    try:
        import duckdb_extension_sqlite_scanner as pkg

        ext = (Path(pkg.__file__).parent / "extensions" / f"v{duckdb.__version__}"
               / "sqlite_scanner.duckdb_extension")
        if ext.is_file():
            con.execute("SET autoinstall_known_extensions = false")
            con.execute("SET autoload_known_extensions = false")
            try:
                con.execute(f"LOAD '{ext.as_posix()}'")
            finally:  # (on: guard.connect's, for this file only; never for the fallback's LOAD below)
                con.execute("SET allow_unsigned_extensions = false")
            return None
        reasons.append(f"no extension for duckdb {duckdb.__version__} in the package")
    except Exception as exc:  # noqa: BLE001 - any failure means: use the fallback
        if is_interrupt(exc):  # Ctrl-C while loading: stop the ingest, do not fall back
            raise
        reasons.append(str(exc).splitlines()[0])
    try:
        con.execute("LOAD sqlite_scanner")
        return None
    except Exception as exc:  # noqa: BLE001
        if is_interrupt(exc):
            raise
        reasons.append(str(exc).splitlines()[0])
    return "; ".join(reasons)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _coerce_int(v):
    if v is None or isinstance(v, bool):
        return None if v is None else int(v)
    if isinstance(v, int):
        return v if -(1 << 63) <= v < (1 << 63) else None
    if isinstance(v, float):
        return int(v) if v.is_integer() and abs(v) < 9.2e18 else None
    if isinstance(v, (str, bytes)):
        try:
            return _coerce_int(int(v))
        except ValueError:
            return None
    return None


def _coerce_str(v):
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return str(v)


def _arrow_column(values: list, duck_type: str) -> pa.Array:
    import pyarrow as pa  # here, not at import: detecting and reading SQLite need no pyarrow

    if duck_type in ("BIGINT", "INTEGER"):
        try:
            return pa.array(values, type=pa.int64())
        except (pa.ArrowException, TypeError, OverflowError):
            return pa.array([_coerce_int(v) for v in values], type=pa.int64())
    if duck_type == "DOUBLE":
        return pa.array([float(v) if isinstance(v, (int, float)) else None for v in values], type=pa.float64())
    if duck_type == "BLOB":
        return pa.array([v if v is None or isinstance(v, bytes) else str(v).encode() for v in values],
                        type=pa.binary())
    try:
        return pa.array(values, type=pa.string())
    except (pa.ArrowException, TypeError):
        return pa.array([_coerce_str(v) for v in values], type=pa.string())


_DDL_TABLE = re.compile(r"CREATE\s+TABLE\s+(\w+)\s*\(([^()]*)\)\s*;?\s*", re.I)
_DDL_COLUMN = re.compile(r'\s*(\w+|"[^"]+")\s+(BIGINT|VARCHAR|DOUBLE|BLOB)\s*', re.I)


def declared_tables(raw_ddl: str) -> dict[str, list[tuple[str, str]]] | None:
    """The tables and columns of RAW_DDL (a layout's raw.sql: CREATE TABLE name (column TYPE, ...)
    statements) as DuckDB's catalog lists them, in table name order; None for DDL of any other
    shape. Read from the text: asking the catalog (duckdb_columns(), which lists every column of
    every database) cost an ingest 0.01-0.02 CPU s."""
    text = "\n".join(line.split("--", 1)[0] for line in raw_ddl.splitlines())
    out: dict[str, list[tuple[str, str]]] = {}
    pos = 0
    for m in _DDL_TABLE.finditer(text):
        if text[pos:m.start()].strip() or m.group(1) in out:
            return None
        pos = m.end()
        cols = []
        for part in m.group(2).split(","):
            c = _DDL_COLUMN.fullmatch(part)
            if c is None:
                return None
            cols.append((c.group(1).strip('"'), c.group(2).upper()))
        out[m.group(1)] = cols
    if text[pos:].strip():
        return None
    return dict(sorted(out.items()))


def _declared_tables(con: duckdb.DuckDBPyConnection, raw_ddl: str) -> dict[str, list[tuple[str, str]]]:
    parsed = declared_tables(raw_ddl)
    if parsed is not None:
        return parsed
    rows = con.execute(
        "SELECT table_name, column_name, data_type FROM duckdb_columns() "
        "WHERE database_name = 'raw' ORDER BY table_name, column_index").fetchall()
    out: dict[str, list[tuple[str, str]]] = {}
    for table, col, typ in rows:
        out.setdefault(table, []).append((col, typ))
    return out


# Tables whose key the exporter declares unique (a PRIMARY KEY) and that the adapters join
# on that key. A damaged or edited file may repeat a key; every join would then multiply rows
# (a kernel's three name joins eight-fold; an nvprof marker's range paired with itself, which
# the NVTX nesting then multiplies again per level), so only the first row of a key is kept.
UNIQUE_KEYS = {"StringIds": "id", "StringTable": "_id_", "CUPTI_ACTIVITY_KIND_MARKER": "_id_"}


def _dedupe_keys(con: duckdb.DuckDBPyConnection, report: StageReport) -> None:
    for table, key in UNIQUE_KEYS.items():
        if not report.rows.get(table):
            continue
        t, k = f"raw.{_quote(table)}", _quote(key)
        extra = con.execute(f"SELECT count({k}) - count(DISTINCT {k}) FROM {t}").fetchone()[0]
        if extra:
            con.execute(f"DELETE FROM {t} WHERE rowid NOT IN (SELECT min(rowid) FROM {t} GROUP BY {k})")
            report.duplicate_keys[table] = extra


def stage(con: duckdb.DuckDBPyConnection, path: Path, raw_ddl: str,
          source_tables: dict[str, list[str]], progress=None,
          source_names: dict[str, str] | None = None, sqlite3_because: str | None = None) -> StageReport:
    """Create the raw.sql tables in the `raw` catalog and fill them from the source file.

    progress(table, done, total, rows) is called before each table is read: `done` of the
    `total` declared tables are finished, holding `rows` rows. source_names: the file's own name
    of a table staged under another (rocpd's guid-suffixed tables), when they differ."""
    report = StageReport()
    create_raw_tables(con, raw_ddl)
    declared = _declared_tables(con, raw_ddl)
    if sqlite3_because:
        scanner_problem = sqlite3_because
        report.reader = f"sqlite3 ({sqlite3_because})"
    elif is_wal(path):  # sqlite_scanner would create -shm/-wal files next to it: see connect_readonly
        scanner_problem = "a WAL-mode file, read as immutable so that nothing is created next to it"
        report.reader = f"sqlite3 ({scanner_problem})"
    else:
        scanner_problem = load_sqlite_scanner(con)
        if scanner_problem:
            report.reader = f"sqlite3 (sqlite_scanner unavailable: {scanner_problem})"
    lower_tables = {t.lower(): t for t in source_tables}
    sqcon: sqlite3.Connection | None = None
    try:
        for done, (table, cols) in enumerate(declared.items()):
            src_name = table if table in source_tables else lower_tables.get(table.lower())
            if src_name is None:
                report.missing_tables.append(table)
                continue
            src_cols = {c.lower(): c for c in source_tables[src_name]}
            file_table = (source_names or {}).get(src_name, src_name)
            present = [(c, t, src_cols[c.lower()]) for c, t in cols if c.lower() in src_cols]
            absent = [c for c, _ in cols if c.lower() not in src_cols]
            if absent:
                report.missing_columns[table] = absent
            if not present:
                continue
            if progress:
                progress(table, done, len(declared), sum(report.rows.values()))
            target = ", ".join(_quote(c) for c, _, _ in present)
            if not scanner_problem:
                select = ", ".join(_quote(s) for _, _, s in present)
                try:
                    report.rows[table] = con.execute(  # an INSERT returns its row count (raw.TABLE was empty)
                        f"INSERT INTO raw.{_quote(table)} ({target}) "
                        f"SELECT {select} FROM sqlite_scan(?, ?)", [str(path), file_table]).fetchone()[0]
                    continue
                except (duckdb.Error, UnicodeDecodeError) as exc:
                    if is_interrupt(exc):  # Ctrl-C, not a table the extension cannot read
                        raise
                    # (a damaged file can make DuckDB's error message itself undecodable)
                    reason = str(exc).splitlines()[0][:200] if isinstance(exc, duckdb.Error) \
                        else "unreadable text in the table"
                    report.fallback_tables[table] = reason
                    con.execute(f"DELETE FROM raw.{_quote(table)}")
            if sqcon is None:
                import pyarrow as pa  # the fallback reader's batches

                sqcon = connect_readonly(path)
            select = ", ".join(_quote(s) for _, _, s in present)
            cur = sqcon.execute(f"SELECT {select} FROM {_quote(file_table)}")
            n = 0
            while True:
                rows = cur.fetchmany(BATCH_ROWS)
                if not rows:
                    break
                arrays = [_arrow_column([r[i] for r in rows], typ) for i, (_, typ, _) in enumerate(present)]
                batch = pa.Table.from_arrays(arrays, names=[c for c, _, _ in present])
                con.register("_traceql_batch", batch)
                try:
                    con.execute(f"INSERT INTO raw.{_quote(table)} ({target}) SELECT {target} FROM _traceql_batch")
                finally:
                    con.unregister("_traceql_batch")
                n += len(rows)
            report.rows[table] = n
        _dedupe_keys(con, report)
    except sqlite3.DatabaseError as exc:
        if "locked" in str(exc) or "busy" in str(exc).lower():
            raise sqlite_error(path, exc) from None
        from traceql.core.errors import InputError
        raise InputError(f"{path}: damaged SQLite database ({exc})") from None
    finally:
        if sqcon is not None:
            sqcon.close()
    return report
