"""Fuzz ingest with damaged copies of the real exports in ../shared/traces.

Every variant is a mutated copy of a real Nsight Systems or nvprof SQLite file, written
to a temporary folder (never into the repository), and ingested into a copy of a
workspace that already holds one trace. Every outcome must be one of:

  - a clean ingest: exit 0, the workspace opens and holds both traces;
  - a clean error: a TraceqlError subclass (CLI: exit code 2-5 and exactly one line on
    stderr, 'traceql: error: ...', naming the file), the workspace byte for byte as
    before;

and in both cases no temporary files are left next to the workspace and the variant
itself is unchanged (the source is only read). Anything else -- exit 1, a traceback,
a signal, a hang, a changed workspace, a leftover file -- is a failure.

Mutations (the tables and columns they hit are the ones traceql reads, taken from the
layout's raw.sql, so they land where they matter):

  flip      flip 1-64 random bits (sometimes in the 100-byte header)
  truncate  cut the file at a random length, a page boundary or inside page 1
  page      overwrite part or all of a random page with random bytes, zeros or 0xff
  header    damage one field of the SQLite header (page size, page count, encoding...)
  drop_table     drop 1-3 of the tables traceql reads
  drop_column    drop one column traceql reads
  retype_column  redeclare one column as another type and convert its values (text,
                 real, blob, huge or negative integers, invalid UTF-8)
  nulls     NULLs in the columns the exporter declares NOT NULL
  times     end before start, zero and negative durations, negative starts
  strings   invalid UTF-8, 1 MB, empty and NUL-containing names
  meta      odd schema versions in the export metadata / nvprof Version
  dup_rows  duplicated rows (ids that are no longer unique)
  empty     every row of 1-3 tables deleted
  rename    a table renamed: other letter case, a suffix, or swapped with another
  mixed     one SQL mutation followed by a byte-level one

Two more families check the rest of what traceql promises (see the comments above
run_sql_variant and run_fault_variant): SQL-surface variants run `traceql sql` with statement
kinds, EXPLAIN forms, literal syntaxes sqlglot cannot parse and table functions, and must
neither write nor read a file of the machine without --write / --allow-files; workspace-fault
variants run commands through symbolic links and loops, on private modes and groups, under a
file size limit (a full disk), on damaged workspace files, with SIGINT and junk settings.
Five more (run_wave, see the comment above WAVE) cover memory events, the AMD sources, derived
families built on first query, the MCP server's tools and `diff --gate`.

    python -m tests.fuzz                    # 300 + 200 + 100 + 150 variants through the CLI, 2 at a time
    python -m tests.fuzz -n 30 --mode api   # in-process (what the pytest subset runs)
    python -m tests.fuzz --keep out/        # keep the failing variants for a look

Variant i of seed S is always the same file: random.Random(f"{S}:{i}") drives it.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import contextlib
import hashlib
import json
import os
import random
import resource
import shutil
import sqlite3
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TRACES = REPO.parent / "shared" / "traces"

BYTE_MUTATORS = ("flip", "truncate", "page", "header")
SQL_MUTATORS = ("drop_table", "drop_column", "retype_column", "nulls", "times", "strings", "meta",
                "dup_rows", "empty", "rename")
MUTATORS = BYTE_MUTATORS + SQL_MUTATORS + ("mixed",)
EXIT_CLASSES = {2: "UsageError", 3: "InputError", 4: "UnsupportedVersionError", 5: "WorkspaceError"}
FAMILY_CPU: dict[str, float] = {}   # CPU seconds (user + sys) per family: this process and its children


def cpu_seconds() -> float:
    """User + system CPU seconds of this process and of every child it has waited for."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@contextlib.contextmanager
def cpu_of(fam: str):
    """Add the CPU seconds spent in the block to FAMILY_CPU[FAM] (families run one after another)."""
    start = cpu_seconds()
    try:
        yield
    finally:
        FAMILY_CPU[fam] = FAMILY_CPU.get(fam, 0.0) + cpu_seconds() - start


# -- sources --------------------------------------------------------------------------

def sources(max_bytes: int | None = None) -> list[Path]:
    """The real SQLite exports under ../shared/traces (nsys .sqlite and nvprof .nvvp/.sql
    databases), smallest first; [] when the folder is absent."""
    if not TRACES.is_dir():
        return []
    out = []
    for p in sorted(TRACES.rglob("*")):
        if p.suffix.lower() not in (".sqlite", ".nvvp", ".sql") or not p.is_file():
            continue
        with open(p, "rb") as fh:
            if fh.read(16) != b"SQLite format 3\x00":
                continue
        if max_bytes is None or p.stat().st_size <= max_bytes:
            out.append(p)
    return sorted(out, key=lambda p: (p.stat().st_size, str(p)))


_READ_COLUMNS: dict[tuple, dict[str, list[str]]] = {}


def read_columns(path: Path) -> dict[str, list[str]]:
    """Tables and columns of `path` that traceql reads: the file's own tables that the
    detected layout's raw.sql declares (and their declared columns present in the file).
    Worked out once per version of a file (path, size, mtime): the SQL mutators ask it of the
    same few real exports again and again (0.1 CPU s each: detection and the layout's DDL);
    each caller gets its own copy."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _READ_COLUMNS:
        _READ_COLUMNS[key] = _read_columns(path)
    return {table: list(cols) for table, cols in _READ_COLUMNS[key].items()}


def _read_columns(path: Path) -> dict[str, list[str]]:
    import duckdb

    from traceql.sources.detect import detect
    from traceql.sources.adapters import raw_ddl

    det = detect(path)
    con = duckdb.connect()
    con.execute("ATTACH ':memory:' AS raw")
    con.execute("USE raw")
    con.execute(raw_ddl(det.layout))
    declared: dict[str, list[str]] = {}
    for table, col in con.execute("SELECT table_name, column_name FROM duckdb_columns() "
                                  "WHERE database_name = 'raw' ORDER BY table_name, column_index").fetchall():
        declared.setdefault(table.lower(), []).append(col.lower())
    con.close()
    out = {}
    for table, cols in det.tables.items():
        if table.lower() in declared:
            keep = [c for c in cols if c.lower() in declared[table.lower()]]
            if keep:
                out[table] = keep
    return out


# -- byte-level mutations ----------------------------------------------------------------

def _page_size(data: bytes) -> int:
    size = struct.unpack(">H", data[16:18])[0] if len(data) >= 18 else 4096
    return 65536 if size == 1 else (size or 4096)


def m_flip(data: bytearray, rng: random.Random) -> str:
    n = rng.choice((1, 2, 4, 8, 16, 64))
    low = 0 if rng.random() < 0.1 else 100
    for _ in range(n):
        i = rng.randrange(low, len(data))
        data[i] ^= 1 << rng.randrange(8)
    return f"{n} bits flipped" + (" (header too)" if low == 0 else "")


def m_truncate(data: bytearray, rng: random.Random) -> str:
    page = _page_size(data)
    how = rng.choice(("random", "page", "page", "half", "first_page", "tiny"))
    if how == "random":
        n = rng.randrange(1, len(data))
    elif how == "page":
        n = page * rng.randrange(1, max(2, len(data) // page))
    elif how == "half":
        n = len(data) // 2
    elif how == "first_page":
        n = rng.randrange(100, page)
    else:
        n = rng.randrange(16, 100)
    del data[n:]
    return f"truncated to {n} bytes ({how})"


def m_page(data: bytearray, rng: random.Random) -> str:
    page = _page_size(data)
    pages = max(1, len(data) // page)
    p = 0 if rng.random() < 0.15 else rng.randrange(pages)
    start = p * page + (100 if p == 0 else 0)
    end = min(len(data), (p + 1) * page)
    if rng.random() < 0.5:
        a = rng.randrange(start, end)
        b = min(end, a + rng.choice((1, 8, 64, 512)))
    else:
        a, b = start, end
    fill = rng.choice(("random", "zeros", "ones"))
    if fill == "random":
        data[a:b] = bytes(rng.randrange(256) for _ in range(b - a))
    else:
        data[a:b] = (b"\x00" if fill == "zeros" else b"\xff") * (b - a)
    return f"page {p + 1}: bytes {a}-{b} set to {fill}"


HEADER_FIELDS = {  # offset: (size, name)
    16: (2, "page size"), 18: (1, "write version"), 19: (1, "read version"), 20: (1, "reserved space"),
    28: (4, "page count"), 40: (4, "schema cookie"), 44: (4, "schema format"), 56: (4, "text encoding"),
    52: (4, "largest root page"), 32: (4, "first freelist page"), 36: (4, "freelist count"),
}


def m_header(data: bytearray, rng: random.Random) -> str:
    off = rng.choice(sorted(HEADER_FIELDS))
    size, name = HEADER_FIELDS[off]
    value = rng.choice((0, 1, 2, 3, 5, 255, 1 << (8 * size - 1), (1 << (8 * size)) - 1, rng.randrange(1 << (8 * size))))
    data[off:off + size] = value.to_bytes(size, "big")
    return f"header {name} = {value}"


# -- SQL mutations ---------------------------------------------------------------------

def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _rebuild(con: sqlite3.Connection, table: str, exprs: dict[str, str] | None = None,
             types: dict[str, str] | None = None, drop: str | None = None) -> None:
    """Recreate `table` without its constraints, with column types and values replaced
    (exprs: column -> SQL expression over the old row), or one column dropped."""
    cols = [(r[1], r[2]) for r in con.execute(f"PRAGMA table_info({_q(table)})")]
    exprs, types = exprs or {}, types or {}
    keep = [(c, t) for c, t in cols if c != drop]
    ddl = ", ".join(f"{_q(c)} {types.get(c, t)}" for c, t in keep)
    sel = ", ".join(exprs.get(c, _q(c)) for c, _ in keep)
    tmp = table + "__fuzz"
    con.execute(f"CREATE TABLE {_q(tmp)} ({ddl})")
    con.execute(f"INSERT INTO {_q(tmp)} SELECT {sel} FROM {_q(table)}")
    con.execute(f"DROP TABLE {_q(table)}")
    con.execute(f"ALTER TABLE {_q(tmp)} RENAME TO {_q(table)}")


def _pick_table(read: dict[str, list[str]], rng: random.Random, want=None) -> tuple[str, list[str]] | None:
    names = sorted(t for t, cols in read.items() if want is None or want(t, cols))
    if not names:
        return None
    t = rng.choice(names)
    return t, read[t]


def _time_tables(read):
    return lambda t, cols: {"start", "end"} <= {c.lower() for c in cols}


def s_drop_table(con, read, rng) -> str:
    names = sorted(read)
    picked = rng.sample(names, k=min(len(names), rng.choice((1, 1, 2, 3))))
    for t in picked:
        con.execute(f"DROP TABLE {_q(t)}")
    return "dropped " + ", ".join(picked)


def s_drop_column(con, read, rng) -> str:
    t, cols = _pick_table(read, rng)
    c = rng.choice(cols)
    try:
        con.execute(f"ALTER TABLE {_q(t)} DROP COLUMN {_q(c)}")
    except sqlite3.DatabaseError:
        _rebuild(con, t, drop=c)
    return f"dropped column {t}.{c}"


RETYPES = {
    "text": ("TEXT", "'x' || {c}"),
    "word": ("TEXT", "'garbage'"),
    "empty": ("TEXT", "''"),
    "real": ("REAL", "{c} + 0.5"),
    "blob": ("BLOB", "randomblob(9)"),
    "huge": ("INTEGER", "9223372036854775807"),
    "min": ("INTEGER", "-9223372036854775808"),
    "negative": ("INTEGER", "-abs({c})"),
    "bad_utf8": ("TEXT", "CAST(X'ff' || X'c328' AS TEXT)"),
    "null": ("INTEGER", "NULL"),
}


def s_retype_column(con, read, rng) -> str:
    t, cols = _pick_table(read, rng)
    c = rng.choice(cols)
    kind = rng.choice(sorted(RETYPES))
    typ, expr = RETYPES[kind]
    where = rng.choice((None, "rowid % 2 = 0", "rowid % 7 = 0"))
    value = expr.format(c=_q(c))
    if where:
        value = f"CASE WHEN {where} THEN {value} ELSE {_q(c)} END"
    _rebuild(con, t, exprs={c: value}, types={c: typ})
    return f"{t}.{c} retyped to {typ} ({kind}{', ' + where if where else ''})"


def s_nulls(con, read, rng) -> str:
    notnull = {t: [r[1] for r in con.execute(f"PRAGMA table_info({_q(t)})") if r[3] and r[1] in cols]
               for t, cols in read.items()}
    choice = _pick_table({t: c for t, c in notnull.items() if c}, rng) or _pick_table(read, rng)
    t, cols = choice
    picked = rng.sample(cols, k=min(len(cols), rng.choice((1, 1, 2))))
    where = rng.choice(("1", "rowid % 2 = 0", "rowid = (SELECT min(rowid) FROM {t})"))
    _rebuild(con, t, exprs={c: f"CASE WHEN {where.format(t=_q(t))} THEN NULL ELSE {_q(c)} END" for c in picked})
    return f"NULLs in {t}.{', '.join(picked)} where {where.format(t=t)}"


def s_times(con, read, rng) -> str:
    pick = _pick_table(read, rng, _time_tables(read))
    if pick is None:
        return s_nulls(con, read, rng)
    t = pick[0]
    how = rng.choice(("swap", "zero", "negative_start", "end_before_start", "huge_end"))
    where = rng.choice(("1", "rowid % 3 = 0"))
    sets = {"swap": 'start = "end", "end" = start', "zero": '"end" = start',
            "negative_start": "start = -start - 1", "end_before_start": '"end" = start - 1000',
            "huge_end": '"end" = 9223372036854775807'}[how]
    try:
        con.execute(f"UPDATE {_q(t)} SET {sets} WHERE {where}")
    except sqlite3.DatabaseError:  # a CHECK or NOT NULL constraint: rebuild without them first
        _rebuild(con, t)
        con.execute(f"UPDATE {_q(t)} SET {sets} WHERE {where}")
    return f"{t}: {how} where {where}"


STRINGS = {
    "bad_utf8": "CAST(X'6b65726ee1287829ff' AS TEXT)",
    "long": "CAST(zeroblob(1048576) AS TEXT)",  # placeholder, replaced below
    "empty": "''",
    "nul": "CAST(X'610062' AS TEXT)",
    "surrogate": "CAST(X'eda080' AS TEXT)",
}


def s_strings(con, read, rng) -> str:
    def text_cols(t, cols):
        return [c for c in cols if c.lower() in ("value", "text", "name")]
    pick = _pick_table(read, rng, lambda t, cols: bool(text_cols(t, cols)))
    if pick is None:
        return s_nulls(con, read, rng)
    t, cols = pick
    c = rng.choice(text_cols(t, cols))
    kind = rng.choice(sorted(STRINGS))
    expr = "printf('%.*c', 1048576, 'x')" if kind == "long" else STRINGS[kind]
    where = "rowid % 5 = 0" if kind != "long" else "rowid IN (SELECT rowid FROM {t} LIMIT 3)".format(t=_q(t))
    try:
        con.execute(f"UPDATE {_q(t)} SET {_q(c)} = {expr} WHERE {where}")
    except sqlite3.DatabaseError:
        _rebuild(con, t)
        con.execute(f"UPDATE {_q(t)} SET {_q(c)} = {expr} WHERE {where}")
    return f"{t}.{c}: {kind} strings"


def s_meta(con, read, rng) -> str:
    value = rng.choice(("4.0.0", "99.1", "3.99.99", "2.0", "abc", "", None, "3", "-1", "1.0.0", "3.x"))
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    for meta in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
        if meta in tables:
            con.execute(f"UPDATE {meta} SET value = ? WHERE name = 'EXPORT_SCHEMA_VERSION'", [value])
            return f"{meta} EXPORT_SCHEMA_VERSION = {value!r}"
    if "Version" in tables:
        nv = rng.choice((None, 0, 11, 17, 99, -3, "twelve", 2 ** 62))
        _rebuild(con, "Version")
        col = con.execute("PRAGMA table_info(Version)").fetchone()[1]
        con.execute(f"UPDATE Version SET {_q(col)} = ?", [nv])
        return f"nvprof Version = {nv!r}"
    return s_drop_table(con, read, rng)


def s_dup_rows(con, read, rng) -> str:
    t, _ = _pick_table(read, rng)
    try:
        con.execute(f"INSERT INTO {_q(t)} SELECT * FROM {_q(t)}")
    except sqlite3.DatabaseError:  # a primary key or unique index: rebuild without it
        _rebuild(con, t)
        con.execute(f"INSERT INTO {_q(t)} SELECT * FROM {_q(t)}")
    return f"rows of {t} duplicated"


def s_empty(con, read, rng) -> str:
    names = sorted(read)
    picked = rng.sample(names, k=min(len(names), rng.choice((1, 2, 3))))
    for t in picked:
        con.execute(f"DELETE FROM {_q(t)}")
    return "emptied " + ", ".join(picked)


def s_rename(con, read, rng) -> str:
    t, _ = _pick_table(read, rng)
    how = rng.choice(("lower", "upper", "suffix", "swap"))
    if how == "swap" and len(read) > 1:
        other = rng.choice(sorted(set(read) - {t}))
        con.execute(f"ALTER TABLE {_q(t)} RENAME TO fuzz_swap")
        con.execute(f"ALTER TABLE {_q(other)} RENAME TO {_q(t)}")
        con.execute(f"ALTER TABLE fuzz_swap RENAME TO {_q(other)}")
        return f"tables {t} and {other} swapped"
    new = {"lower": t.lower(), "upper": t.upper()}.get(how, t + "_OLD")
    if new == t:
        new = t + "_OLD"
    con.execute(f"ALTER TABLE {_q(t)} RENAME TO {_q(new + '__tmp')}")
    con.execute(f"ALTER TABLE {_q(new + '__tmp')} RENAME TO {_q(new)}")
    return f"table {t} renamed to {new}"


def mutate_sql(src: Path, dst: Path, name: str, rng: random.Random) -> str:
    read = read_columns(src)
    shutil.copyfile(src, dst)
    con = sqlite3.connect(dst)
    con.execute("PRAGMA legacy_alter_table = ON")  # renames ignore the file's own views
    try:
        views = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'view'")}
        for v in sorted(views & set(read)):  # rocpd's tables are views over per-run tables: made tables here
            con.execute(f"CREATE TABLE {_q(v + '__fuzz')} AS SELECT * FROM {_q(v)}")
            con.execute(f"DROP VIEW {_q(v)}")
            con.execute(f"ALTER TABLE {_q(v + '__fuzz')} RENAME TO {_q(v)}")
        what = globals()[f"s_{name}"](con, read, rng)
        con.commit()
    finally:
        con.close()
    return what


def make_variant(src: Path, dst: Path, mutator: str, rng: random.Random) -> str:
    """Write a mutated copy of `src` to `dst`; returns what was done."""
    if mutator == "mixed":
        first = mutate_sql(src, dst, rng.choice(SQL_MUTATORS), rng)
        data = bytearray(dst.read_bytes())
        second = globals()[f"m_{rng.choice(BYTE_MUTATORS)}"](data, rng)
        dst.write_bytes(bytes(data))
        return f"{first}; then {second}"
    if mutator in SQL_MUTATORS:
        return mutate_sql(src, dst, mutator, rng)
    data = bytearray(src.read_bytes())
    what = globals()[f"m_{mutator}"](data, rng)
    dst.write_bytes(bytes(data))
    return what


# -- running one variant -----------------------------------------------------------------

@dataclass
class Outcome:
    index: int
    source: str
    mutator: str
    what: str
    result: str = ""            # 'ingested', an error class name, or 'FAIL'
    problems: list[str] = field(default_factory=list)
    message: str = ""
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def base_workspace(folder: Path) -> Path:
    """A workspace holding one small trace, which every variant is ingested next to."""
    import traceql

    from tests.util import nsys_stub

    folder.mkdir(parents=True, exist_ok=True)
    db = folder / "base.duckdb"
    if not db.exists():
        traceql.ingest([nsys_stub(folder / "base.sqlite")], db=db)
        with contextlib.suppress(FileNotFoundError):
            os.remove(folder / "base.duckdb.lock")
    return db


def _run_cli(db: Path, variant: Path, timeout: float) -> tuple[int | None, str, str]:
    try:
        proc = subprocess.run([sys.executable, "-m", "traceql", "--db", str(db), "ingest", str(variant)],
                              capture_output=True, text=True, timeout=timeout, cwd=REPO,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
    except subprocess.TimeoutExpired:
        return None, "", ""
    return proc.returncode, proc.stdout, proc.stderr


def _run_api(db: Path, variant: Path) -> tuple[int, str, str]:
    import traceql

    try:
        traceql.ingest([variant], db=db)
    except traceql.TraceqlError as exc:
        return exc.exit_code, "", f"traceql: error: {exc}\n"
    except Exception as exc:  # noqa: BLE001 - what the fuzzer is looking for
        return 1, "", f"{type(exc).__name__}: {exc}\n"
    return 0, "", ""


def run_variant(index: int, src: Path, mutator: str, seed: int, work: Path, base_db: Path,
                mode: str = "cli", timeout: float = 300.0, build=None, queries=(), label: str | None = None,
                rng_key: str = "") -> Outcome:
    """One damaged copy of SRC ingested next to BASE_DB's trace. build(src, dst, rng) -> what makes
    the copy (default: MUTATOR's); after a clean ingest each of QUERIES (CLI arguments after
    --db) must give exit 0 or one 'traceql: error:' line. LABEL names the row in the tables."""
    rng = random.Random(f"{rng_key}{seed}:{index}")
    folder = work / f"v{index:04d}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    variant = folder / f"variant{src.suffix}"
    out = Outcome(index, str(src.relative_to(TRACES)) if src.is_relative_to(TRACES) else str(src), label or mutator, "")
    try:
        out.what = build(src, variant, rng) if build else make_variant(src, variant, mutator, rng)
    except Exception as exc:  # noqa: BLE001 - a mutation that does not apply is a harness bug
        out.result, out.problems = "FAIL", [f"could not build the variant: {type(exc).__name__}: {exc}"]
        return out
    db = folder / "ws.duckdb"
    shutil.copyfile(base_db, db)
    before_ws, before_src = sha256(db), (sha256(variant), variant.stat().st_mtime_ns)
    started = time.perf_counter()
    code, _stdout, stderr = _run_cli(db, variant, timeout) if mode == "cli" else _run_api(db, variant)
    out.seconds = time.perf_counter() - started
    lines = stderr.strip().splitlines()
    out.message = lines[0][:300] if lines else ""
    if code is None:
        out.result = "FAIL"
        out.problems.append(f"no answer within {timeout:.0f} s")
    elif code == 0:
        out.result = "ingested"
        try:
            import traceql

            with traceql.open(db) as ws:
                n = ws.sql("SELECT count(*) AS n FROM trace").to_pylist()[0]["n"]
                ws.info()
            if n != 2:
                out.problems.append(f"workspace holds {n} traces after a successful ingest, not 2")
        except Exception as exc:  # noqa: BLE001
            out.problems.append(f"workspace unusable after ingest: {type(exc).__name__}: {exc}")
        for query in queries:
            qcode, _qout, qerr = _run_args(db, list(query), timeout, folder)
            problem = _one_line_problem(qcode, qerr, ok_codes=(0,), error_codes=(2, 3, 4, 5))
            if problem:
                out.problems.append(f"{' '.join(query)[:80]}: {problem}")
    elif code in EXIT_CLASSES:
        out.result = EXIT_CLASSES[code]
        if len(lines) != 1 or not lines[0].startswith("traceql: error: ") or "Traceback" in stderr:
            out.problems.append(f"error output is not one 'traceql: error:' line: {stderr[:500]!r}")
        if code in (3, 4) and str(variant) not in stderr:
            out.problems.append("the error does not name the file")
        if sha256(db) != before_ws:
            out.problems.append("workspace changed by a failed ingest")
    else:
        out.result = "FAIL"
        out.problems.append(f"exit code {code}: {stderr.strip()[-500:]!r}")
    leftovers = sorted(p.name for p in folder.iterdir()) if folder.exists() else []
    if set(leftovers) - {variant.name, "ws.duckdb"}:
        out.problems.append(f"files left behind: {leftovers}")
    if (sha256(variant), variant.stat().st_mtime_ns) != before_src:
        out.problems.append("the source file was modified")
    if out.problems:
        out.result = "FAIL"
    return out


def plan(n: int, seed: int, srcs: list[Path]) -> list[tuple[int, Path, str]]:
    """Variant i: mutator i mod |MUTATORS|, source chosen by the seeded RNG."""
    rng = random.Random(seed)
    return [(i, rng.choice(srcs), MUTATORS[i % len(MUTATORS)]) for i in range(n)]


def run(n: int = 300, seed: int = 1, jobs: int = 2, mode: str = "cli", work: Path | None = None,
        keep: Path | None = None, max_bytes: int | None = None, verbose: bool = False,
        only: set[int] | None = None, log=print) -> list[Outcome]:
    srcs = sources(max_bytes)
    if not srcs:
        raise SystemExit(f"no SQLite exports under {TRACES}")
    own = work is None
    work = Path(tempfile.mkdtemp(prefix="traceql-fuzz-")) if own else Path(work)
    try:
        base_db = base_workspace(work / "base")
        todo = plan(n, seed, srcs)
        if only:
            todo = [t for t in todo if t[0] in only]
        outcomes: list[Outcome] = []

        def one(item):
            i, src, mutator = item
            o = run_variant(i, src, mutator, seed, work, base_db, mode)
            if not o.ok and keep is not None:
                keep.mkdir(parents=True, exist_ok=True)
                for f in (work / f"v{i:04d}").glob("variant*"):
                    shutil.copyfile(f, keep / f"v{i:04d}-{mutator}{f.suffix}")
            shutil.rmtree(work / f"v{i:04d}", ignore_errors=True)
            return o

        if mode == "api" or jobs <= 1:
            results = map(one, todo)
        else:
            pool = concurrent.futures.ThreadPoolExecutor(jobs)
            results = pool.map(one, todo)
        for o in results:
            outcomes.append(o)
            _log_outcome(o)
            if verbose or not o.ok:
                log(f"{o.index:4d} {o.result:24s} {o.seconds:6.2f}s {o.mutator:13s} {o.source}: {o.what}"
                    + (f"\n     -> {o.message}" if o.message and verbose else "")
                    + "".join(f"\n     !! {p}" for p in o.problems))
        return outcomes
    finally:
        if own:
            shutil.rmtree(work, ignore_errors=True)


# -- the query surface: SQL that must neither write nor read the machine's files ----------------
#
# Each SQL variant is one `traceql sql` (or Workspace.sql) call on a copy of the base workspace,
# from a folder that holds a secret file and a HOME of its own. Its SQL is built from the
# statement kinds DuckDB knows (writes, reads, transactions, settings, extensions), EXPLAIN in
# every form, literal syntaxes sqlglot cannot parse (so that DuckDB's parser alone classifies
# the statement), and table functions that read files, globs or URLs, composed in CTEs,
# subqueries and several statements. A fifth of them run with --write. Every outcome must be
# exit 0 or one 'traceql: error:' line with exit 2 or 5, and: no file created or changed
# anywhere in the folder (HOME included: no extension installed), the secret never printed,
# and without --write the workspace byte for byte as before.

SQL_FAMILIES = ("statement", "explain", "literal", "table_function", "composed")

SQL_STATEMENTS = (
    "CREATE TABLE t AS SELECT 1 AS x", "CREATE VIEW v AS SELECT * FROM kernel", "CREATE MACRO m(a) AS a + 1",
    "CREATE SEQUENCE s", "CREATE TYPE mood AS ENUM ('a', 'b')", "CREATE SCHEMA s2", "CREATE INDEX i ON kernel (name)",
    "DROP TABLE kernel", "DROP VIEW gpu_op", "INSERT INTO kernel SELECT * FROM kernel", "UPDATE kernel SET dur = 0",
    "DELETE FROM kernel", "ALTER TABLE kernel RENAME TO k2", "ALTER TABLE kernel ADD COLUMN z INTEGER",
    "TRUNCATE kernel", "ATTACH '{db2}' AS other", "ATTACH '{secret}' AS other (TYPE sqlite)", "DETACH other",
    "COPY kernel TO '{out}'", "COPY kernel TO '{out}' (FORMAT parquet)", "COPY (SELECT * FROM trace) TO '{out}'",
    "COPY kernel FROM '{secret}'", "EXPORT DATABASE '{outdir}'", "IMPORT DATABASE '{folder}'",
    "PRAGMA enable_profiling", "PRAGMA profiling_output = '{out}'", "PRAGMA database_size", "PRAGMA show_tables",
    "INSTALL httpfs", "FORCE INSTALL spatial", "LOAD httpfs", "LOAD '{secret}'", "INSTALL '{secret}'",
    "SET threads = 1", "SET enable_external_access = true", "SET allowed_directories = ['/']",
    "SET allowed_paths = ['{secret}']", "SET temp_directory = '{outdir}'", "SET profiling_output = '{out}'",
    "SET autoinstall_known_extensions = true", "SET extension_directory = '{outdir}'", "RESET threads",
    "CALL pragma_version()", "CALL checkpoint()", "CHECKPOINT", "FORCE CHECKPOINT", "BEGIN TRANSACTION", "COMMIT",
    "ROLLBACK", "VACUUM", "ANALYZE", "PREPARE p AS SELECT 1", "EXECUTE p", "DEALLOCATE p", "USE memory",
    "CREATE SECRET (TYPE s3, KEY_ID 'a', SECRET 'b')",
    "CREATE PERSISTENT SECRET sec (TYPE s3, KEY_ID 'a', SECRET 'b')", "UPDATE EXTENSIONS", "SUMMARIZE kernel",
    "DESCRIBE kernel", "SHOW TABLES", "PIVOT kernel ON stream_id", "PIVOT kernel ON stream_id IN (7) USING count(*)",
    "UNPIVOT kernel ON dur INTO NAME k VALUE v", "SELECT * INTO t FROM kernel", "FROM kernel", "VALUES (1)",
    "SET VARIABLE v = 1", "CREATE OR REPLACE TABLE trace AS SELECT 1 AS trace_id",
    "INSERT OR REPLACE INTO trace SELECT * FROM trace", "COMMENT ON TABLE kernel IS 'x'",
    "SELECT count(*) FROM kernel", "WITH x AS (SELECT 1 AS a) INSERT INTO kernel SELECT * FROM kernel",
)

EXPLAIN_FORMS = ("EXPLAIN ", "EXPLAIN ANALYZE ", "explain analyse ", "EXPLAIN (ANALYZE) ",
                 "EXPLAIN (ANALYZE, FORMAT json) ", "EXPLAIN (FORMAT json) ", "EXPLAIN /* c */ ANALYZE ",
                 "EXPLAIN -- c\nANALYZE ", "EXPLAIN\n\tANALYZE\n", "EXPLAIN ANALYZE EXPLAIN ANALYZE ",
                 "EXPLAIN (FORMAT 'json', ANALYZE) ", "EXPLAIN ANALYZE /* ( */ ")

# Literal syntaxes, most of which sqlglot cannot parse (DuckDB's parser then classifies alone)
SQL_LITERALS = ("x'00'", "X'DEADBEEF'", "e'\\x41'", "'\\xAA'::BLOB", "$$dollar$$", "$tag$x$tag$", "U&'\\0041'",
                "1_000_000", "0x1F", "0b101", "{'a': 1}", "[1, 2, 3]", "MAP {'k': 1}", "'a' ^@ 'a'",
                "1::HUGEINT", "INTERVAL 1 DAY", "TIMESTAMP '2020-01-01'", "'\\u0000'", "\"weird\"\"ident\"",
                "list_transform([1], x -> x + 1)", "'{secret}'", "COLUMNS('d.*')", "#1")

TABLE_FUNCTIONS = (
    "read_text('{secret}')", "read_blob('{secret}')", "read_csv('{secret}')", "read_csv_auto('{secret}')",
    "read_parquet('{secret}')", "parquet_scan('{secret}')", "parquet_metadata('{secret}')", "read_json('{secret}')",
    "read_json_auto('{secret}')", "read_ndjson('{secret}')", "glob('{home}/*')", "glob('{folder}/*')",
    "sqlite_scan('{secret}', 'x')", "'{secret}'", "'{folder}/*.txt'", "read_text('{folder}/*')",
    "query('SELECT 1')", "query('COPY kernel TO ''{out}''')", "query_table('kernel')", "duckdb_settings()",
    "duckdb_extensions()", "duckdb_secrets()", "range(3)", "generate_series(1, 3)",
    "read_text('https://example.com/')", "read_csv('s3://bucket/x.csv')", "'http://example.com/x.parquet'",
    "read_text('~/.ssh/id_rsa')", "iceberg_scan('{folder}')", "delta_scan('{folder}')",
    "json_execute_serialized_sql('x')", "sniff_csv('{secret}')", "read_text(['{secret}', '{secret}'])",
)

WRAPS = ("SELECT * FROM {f}", "SELECT count(*) FROM {f}", "WITH x AS (SELECT * FROM {f}) SELECT * FROM x",
         "SELECT (SELECT count(*) FROM {f}) AS n", "SELECT * FROM kernel WHERE EXISTS (SELECT 1 FROM {f})",
         "SELECT * FROM kernel, LATERAL (SELECT * FROM {f}) t", "SELECT 1 AS a UNION ALL SELECT count(*) FROM {f}",
         "FROM {f}", "SUMMARIZE SELECT * FROM {f}", "DESCRIBE SELECT * FROM {f}", "CREATE TABLE t AS SELECT * FROM {f}")


def sql_text(family: str, rng: random.Random) -> str:
    if family == "statement":
        return rng.choice(SQL_STATEMENTS)
    if family == "explain":
        inner = rng.choice(SQL_STATEMENTS + tuple(w.format(f=rng.choice(TABLE_FUNCTIONS)) for w in WRAPS[:3]))
        text = rng.choice(EXPLAIN_FORMS) + inner
        return (f"SELECT {rng.choice(SQL_LITERALS)} AS v; " + text) if rng.random() < 0.6 else text
    if family == "literal":
        lit = rng.choice(SQL_LITERALS)
        tail = rng.choice(SQL_STATEMENTS + tuple(f + s for f in EXPLAIN_FORMS[:3] for s in SQL_STATEMENTS[:20]))
        return rng.choice((f"SELECT {lit} AS v; {tail}", f"SELECT {lit} AS v", f"{tail}; SELECT {lit} AS v",
                           f"SELECT {lit} AS v FROM kernel"))
    if family == "table_function":
        return rng.choice(WRAPS).format(f=rng.choice(TABLE_FUNCTIONS))
    parts = [rng.choice(SQL_STATEMENTS), rng.choice(WRAPS).format(f=rng.choice(TABLE_FUNCTIONS)),
             rng.choice(EXPLAIN_FORMS) + rng.choice(SQL_STATEMENTS), f"SELECT {rng.choice(SQL_LITERALS)} AS v"]
    rng.shuffle(parts)
    return rng.choice(("; ", ";\n", " ; -- x\n")).join(parts[:rng.randint(2, 4)])


SECRET = "TRACEQL-FUZZ-SECRET"


def _snapshot(folder: Path) -> dict[str, str]:
    """Every file under folder (links as links): relative path -> content hash or link target."""
    out = {}
    for p in sorted(folder.rglob("*")):
        rel = str(p.relative_to(folder))
        if p.is_symlink():
            out[rel] = "-> " + os.readlink(p)
        elif p.is_file():
            out[rel] = sha256(p)
        else:
            out[rel] = "dir"
    return out


def run_sql_variant(index: int, seed: int, work: Path, base_db: Path, mode: str = "cli",
                    timeout: float = 120.0) -> Outcome:
    rng = random.Random(f"sql:{seed}:{index}")
    family = SQL_FAMILIES[index % len(SQL_FAMILIES)]
    folder = work / f"s{index:04d}"
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "home").mkdir(parents=True)
    secret = folder / "secret.txt"
    secret.write_text(f"id,value\n1,{SECRET}\n")
    db = folder / "ws.duckdb"
    shutil.copyfile(base_db, db)
    places = {"secret": secret, "out": folder / "out.csv", "outdir": folder / "outdir", "db2": folder / "other.duckdb",
              "folder": folder, "home": folder / "home"}
    text = sql_text(family, rng)
    for key, value in places.items():
        text = text.replace("{" + key + "}", str(value))
    write = rng.random() < 0.2
    dialect = "sqlite" if family == "table_function" and rng.random() < 0.1 else None
    out = Outcome(index, "base workspace", f"sql:{family}", ("--write " if write else "") + text[:300])
    before = _snapshot(folder)  # ws.duckdb's sha256 among the rest
    before_ws = before["ws.duckdb"]
    started = time.perf_counter()
    if mode == "cli":
        args = [sys.executable, "-m", "traceql", "--db", str(db), "sql", "--format", "csv"]
        args += ["--write"] if write else []
        args += ["--dialect", dialect] if dialect else []
        try:
            proc = subprocess.run(args + [text], capture_output=True, text=True, timeout=timeout, cwd=folder,
                                  env={**os.environ, "PYTHONPATH": str(REPO), "HOME": str(folder / "home")})
            code, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
        except subprocess.TimeoutExpired:
            code, stdout, stderr = None, "", ""
    else:
        code, stdout, stderr = _sql_api(db, text, write, dialect, folder)
    out.seconds = time.perf_counter() - started
    lines = stderr.strip().splitlines()
    out.message = lines[0][:300] if lines else ""
    if code is None:
        out.problems.append(f"no answer within {timeout:.0f} s")
    elif code == 0:
        out.result = "ran"
    elif code in (2, 5):
        out.result = EXIT_CLASSES[code]
        if len(lines) != 1 or not lines[0].startswith("traceql: error: ") or "Traceback" in stderr:
            out.problems.append(f"error output is not one 'traceql: error:' line: {stderr[:500]!r}")
    else:
        out.problems.append(f"exit code {code}: {stderr.strip()[-500:]!r}")
    if SECRET in stdout or SECRET in stderr:
        out.problems.append("the secret file was read and printed")
    after = _snapshot(folder)
    allowed = {"ws.duckdb", "ws.duckdb.lock", "ws.duckdb.wal"} if write else {"ws.duckdb.lock"}
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k) and k not in allowed)
    if changed:
        out.problems.append(f"files created or changed: {changed}")
    if not write and after.get("ws.duckdb") != before_ws:
        out.problems.append("workspace changed without --write")
    if code is not None and not write:  # with --write the SQL may drop what it likes
        try:
            import traceql

            with traceql.open(db) as ws:
                ws.info()
        except Exception as exc:  # noqa: BLE001
            out.problems.append(f"workspace unusable after a read-only query: {type(exc).__name__}: {exc}")
    out.result = "FAIL" if out.problems else out.result
    return out


def _sql_api(db: Path, text: str, write: bool, dialect: str | None, folder: Path) -> tuple[int, str, str]:
    import traceql

    home, cwd = os.environ.get("HOME"), os.getcwd()
    os.environ["HOME"] = str(folder / "home")
    os.chdir(folder)
    try:
        with traceql.open(db, write=write) as ws:
            table = ws.sql(text, dialect=dialect)
        return 0, str(table.to_pylist())[:100_000], ""
    except traceql.TraceqlError as exc:
        return exc.exit_code, "", f"traceql: error: {exc}\n"
    except Exception as exc:  # noqa: BLE001 - what the fuzzer is looking for
        return 1, "", f"{type(exc).__name__}: {exc}\n"
    finally:
        os.chdir(cwd)
        if home is None:
            os.environ.pop("HOME", None)
        else:
            os.environ["HOME"] = home


# -- workspace faults -------------------------------------------------------------------------
#
# Each fault variant damages the workspace or its surroundings, then runs a command on it:
#
#   symlink       --db names a link (or a chain of links) to the workspace: written through, the
#                 link kept, one lock beside the target
#   symlink_loop  --db or an input file is a link loop, or an input a link to nothing
#   mode          a private or group-shared workspace (600, 640, 660) and its group: kept by ingest
#   full_disk     a file size limit (`ulimit -f`, RLIMIT_FSIZE) smaller than what the command
#                 writes: ingest, sql --write, rm, export, -o
#   corrupt       bytes of the workspace file overwritten (a block, a header, a cut file): info,
#                 sql, report, ingest, rm, export
#   interrupt     SIGINT at a random moment of an ingest
#   env           junk in TRACEQL_MEMORY_LIMIT or TRACEQL_LOCK_TIMEOUT
#
# Every outcome must be exit 0, or 130 after SIGINT, or one 'traceql: error:' line with exit
# 2-5; a command that writes the workspace and fails leaves it byte for byte as it was; no
# temporary file is left; after a success the workspace opens.

FAULTS = ("symlink", "symlink_loop", "mode", "full_disk", "corrupt", "interrupt", "env")
WRITERS = ("ingest", "rm", "sql --write")


def _fault_command(kind: str, rng: random.Random, folder: Path, src: Path) -> tuple[str, list[str]]:
    """(name, arguments after --db DB) of the command a fault variant runs."""
    choices = {
        "ingest": ["ingest", str(src)],
        "rm": ["rm", "1"],
        "sql --write": ["sql", "--write", "CREATE TABLE big AS SELECT range AS x, repeat('x', 200) AS s "
                                          "FROM range(100000)"],
        "info": ["info"],
        "sql": ["sql", "--format", "csv", "SELECT name, count(*), sum(dur) FROM kernel GROUP BY 1"],
        "report": ["report", "--by", rng.choice(("kernel", "range", "gpu", "api")), "--recompute"],
        "export": ["export", "--format", rng.choice(("csv", "parquet")), "-o", str(folder / "export")],
        "sql -o": ["sql", "--format", "csv", "-o", str(folder / "out.csv"), "SELECT * FROM kernel"],
    }
    if kind == "full_disk":
        name = rng.choice(("ingest", "ingest", "rm", "sql --write", "export", "sql -o"))
    elif kind == "corrupt":
        name = rng.choice(("info", "sql", "report", "ingest", "rm", "export"))
    else:
        name = "ingest"
    return name, choices[name]


def run_fault_variant(index: int, seed: int, work: Path, base_db: Path, srcs: list[Path],
                      timeout: float = 300.0, served=None) -> Outcome:
    """SERVED(argv, env, timeout) -> CompletedProcess, when given, runs a command that needs
    neither a file size limit nor a signal instead of a new interpreter (the pytest subset
    passes tests.util.cli, commands forked off a warm server)."""
    rng = random.Random(f"fault:{seed}:{index}")
    kind = FAULTS[index % len(FAULTS)]
    src = rng.choice(srcs)
    folder = work / f"f{index:04d}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    real = folder / "ws.duckdb"
    shutil.copyfile(base_db, real)
    db = real
    env = {**os.environ, "PYTHONPATH": str(REPO), "HOME": str(folder)}
    name, args = _fault_command(kind, rng, folder, src)
    preexec, what, sigint_after = None, "", None
    expect_codes = {0, 2, 3, 4, 5}
    if kind == "symlink":
        depth = rng.choice((1, 1, 2))
        target = real
        for i in range(depth):
            link = folder / f"link{i}.duckdb"
            link.symlink_to(target.name if rng.random() < 0.5 else target)
            target = link
        db = target
        what = f"--db through {depth} link(s)"
    elif kind == "symlink_loop":
        how = rng.choice(("db", "db2", "input", "dangling_input", "dangling_db"))
        loop = folder / "loop.duckdb"
        if how == "db":
            loop.symlink_to(loop.name)
            db = loop
        elif how == "db2":
            (folder / "a.duckdb").symlink_to("b.duckdb")
            (folder / "b.duckdb").symlink_to("a.duckdb")
            db = folder / "a.duckdb"
        elif how == "input":
            (folder / "in.sqlite").symlink_to("in.sqlite")
            args = ["ingest", str(folder / "in.sqlite")]
        elif how == "dangling_input":
            (folder / "in.sqlite").symlink_to("missing.sqlite")
            args = ["ingest", str(folder / "in.sqlite")]
        else:  # a link to a workspace not made yet: the ingest creates it there
            (folder / "new.duckdb").symlink_to("made.duckdb")
            db = folder / "new.duckdb"
        if how in ("db", "db2") and rng.random() < 0.5:
            args = rng.choice((["info"], ["sql", "SELECT 1"], ["rm", "1"]))
        what = f"{how}: {' '.join(args[:1])}"
    elif kind == "mode":
        mode = rng.choice((0o600, 0o640, 0o660, 0o644, 0o400))
        real.chmod(mode)
        if os.geteuid() == 0:
            os.chown(real, -1, rng.choice((0, 65534)))
        what = f"workspace mode {mode:o}, group {real.stat().st_gid}"
    elif kind == "full_disk":
        import resource

        size = real.stat().st_size
        limit = rng.choice((size // 2, size, size + 4096, size + 100_000, 2 * size, 20_000))

        def preexec():
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        what = f"ulimit -f {limit} bytes: {name}"
    elif kind == "corrupt":
        data = bytearray(real.read_bytes())
        how = rng.choice(("block", "block", "header", "truncate", "zero_block", "bits"))
        if how == "block":
            off = rng.randrange(3 * 4096, len(data))
            data[off:off + 512] = bytes(rng.randrange(256) for _ in range(min(512, len(data) - off)))
        elif how == "zero_block":
            off = rng.randrange(3 * 4096, len(data))
            data[off:off + 4096] = b"\x00" * min(4096, len(data) - off)
        elif how == "header":
            off = rng.randrange(0, 3 * 4096)
            data[off:off + 8] = bytes(rng.randrange(256) for _ in range(8))
        elif how == "truncate":
            del data[rng.randrange(0, len(data)):]
        else:
            for _ in range(rng.choice((1, 8, 64))):
                i = rng.randrange(len(data))
                data[i] ^= 1 << rng.randrange(8)
        real.write_bytes(bytes(data))
        what = f"{how}: {name}"
    elif kind == "interrupt":
        sigint_after = rng.uniform(1.0, 4.0)  # after Python's start (an interrupted import is Python's own)
        expect_codes = {0, 130}
        what = f"SIGINT after {sigint_after:.2f} s"
    else:
        var, value = rng.choice((
            ("TRACEQL_MEMORY_LIMIT", rng.choice(("lots", "-1GB", "3GB'; DROP TABLE kernel; --", "", "1", "0.5GB",
                                                  "80%", "1e3MB", "9999999TB"))),
            ("TRACEQL_LOCK_TIMEOUT", rng.choice(("nan", "inf", "-1", "1e309", "soon", "0", "0.5", "")))))
        env[var] = value
        what = f"{var}={value!r}"
    out = Outcome(index, str(src.relative_to(TRACES)) if src.is_relative_to(TRACES) else str(src),
                  f"fault:{kind}", what)
    writes = name in WRITERS
    before_ws = sha256(real) if real.exists() else None
    before_mode = (real.stat().st_mode, real.stat().st_gid) if real.exists() else None
    started = time.perf_counter()
    if served is not None and preexec is None and sigint_after is None:
        try:
            done = served(["--db", str(db), *args], env, timeout)
            stdout, stderr, code = done.stdout, done.stderr, done.returncode
        except subprocess.TimeoutExpired:
            stdout, stderr, code = "", "", None
    else:
        code, stdout, stderr = _run_args(db, args, timeout, REPO, env=env, preexec=preexec, sigint_after=sigint_after)
    out.seconds = time.perf_counter() - started
    lines = stderr.strip().splitlines()
    out.message = (lines[-1] if lines else "")[:300]
    if code is None:
        out.problems.append(f"no answer within {timeout:.0f} s")
    elif code not in expect_codes and code != 130:
        out.problems.append(f"exit code {code}: {stderr.strip()[-500:]!r}")
    elif code == 130:
        out.result = "interrupted"
        if kind != "interrupt":
            out.problems.append("exit 130 without an interrupt")
    elif code == 0:
        out.result = "ok"
    else:
        out.result = EXIT_CLASSES[code]
        if len(lines) != 1 or not lines[0].startswith("traceql: error: ") or "Traceback" in stderr:
            out.problems.append(f"error output is not one 'traceql: error:' line: {stderr[:500]!r}")
    failed = code not in (0, None)
    if failed and writes and before_ws is not None and (not real.exists() or sha256(real) != before_ws):
        if code == 130 and _ingested_whole(real, name):
            pass  # Ctrl-C after the new workspace was renamed into place: the ingest is complete
        else:
            out.problems.append("workspace changed by a failed command")
    if kind == "symlink" and not db.is_symlink():
        out.problems.append("the link was replaced")
    if kind == "mode" and code == 0 and real.exists() and (real.stat().st_mode, real.stat().st_gid) != before_mode:
        out.problems.append(f"mode or group changed: {before_mode} -> {(real.stat().st_mode, real.stat().st_gid)}")
    if code == 0 and writes and kind in ("symlink", "mode", "interrupt", "env"):
        try:
            import traceql

            with traceql.open(real) as ws:
                n = ws.sql("SELECT count(*) AS n FROM trace").to_pylist()[0]["n"]
            expected = {"ingest": 2, "rm": 0}.get(name)
            if expected is not None and n != expected:
                out.problems.append(f"workspace holds {n} traces, not {expected}")
        except Exception as exc:  # noqa: BLE001
            out.problems.append(f"workspace unusable after success: {type(exc).__name__}: {exc}")
    if failed and kind != "corrupt" and real.exists():  # a failure never leaves the workspace unusable
        try:
            import traceql

            with traceql.open(real) as ws:
                ws.info()
        except Exception as exc:  # noqa: BLE001
            out.problems.append(f"workspace unusable after the failure: {type(exc).__name__}: {exc}")
    left = sorted(p.name for p in folder.iterdir() if p.name.startswith(".") or p.name.endswith((".tmp", ".part")))
    left += sorted(str(p.relative_to(folder)) for p in folder.rglob("*.part"))
    if left:
        out.problems.append(f"files left behind: {left}")
    out.result = "FAIL" if out.problems else out.result
    return out


def _ingested_whole(db: Path, command: str) -> bool:
    """True when DB holds the base trace and the one the ingest added, and opens."""
    if command != "ingest":
        return False
    try:
        import traceql

        with traceql.open(db) as ws:
            return ws.sql("SELECT count(*) AS n FROM trace").to_pylist()[0]["n"] == 2
    except Exception:  # noqa: BLE001
        return False


def run_sql(n: int = 200, seed: int = 1, jobs: int = 2, mode: str = "cli", work: Path | None = None,
            verbose: bool = False, log=print) -> list[Outcome]:
    return _run_family(lambda i, w, base: run_sql_variant(i, seed, w, base, mode), n, jobs, mode, work,
                       verbose, log)


def run_faults(n: int = 100, seed: int = 1, jobs: int = 2, work: Path | None = None, max_bytes: int | None = 2_000_000,
               verbose: bool = False, log=print, served=None) -> list[Outcome]:
    srcs = sources(max_bytes)
    if not srcs:
        raise SystemExit(f"no SQLite exports under {TRACES}")
    return _run_family(lambda i, w, base: run_fault_variant(i, seed, w, base, srcs, served=served), n, jobs, "cli",
                       work, verbose, log)


def _run_family(one_variant, n, jobs, mode, work, verbose, log) -> list[Outcome]:
    own = work is None
    work = Path(tempfile.mkdtemp(prefix="traceql-fuzz-")) if own else Path(work)
    try:
        base_db = base_workspace(work / "base")

        def one(i):
            o = one_variant(i, work, base_db)
            for prefix in ("s", "f"):
                shutil.rmtree(work / f"{prefix}{i:04d}", ignore_errors=True)
            return o

        if mode == "api" or jobs <= 1:
            results = map(one, range(n))
        else:
            results = concurrent.futures.ThreadPoolExecutor(jobs).map(one, range(n))
        return _collect(results, verbose, log)
    finally:
        if own:
            shutil.rmtree(work, ignore_errors=True)


# -- this wave's families: memory events, AMD sources, lazily built derived tables, MCP, diff --gate ----
#
#   memory   a damaged copy of a real trace with memory events (a PyTorch profile_memory Kineto trace cut
#            to its first events; the nsys exports with CUDA_GPU_MEMORY_USAGE_EVENTS): extreme, negative,
#            text and missing bytes, totals, devices, addresses and times, duplicated or dropped events,
#            frees first; ingested, then `report --by memory` and a sum over memory_event
#   amd      the damaged-export mutators above on the rocpd, rocprofv1 and rpd databases, then
#            `report --by kernel` and `info`
#   derived  a workspace whose derived families (attribution, busy, pytorch) are built on the first
#            query that reads them, damaged before that query: read-only, a full disk, bytes
#            overwritten, SIGINT, derived_family rows forgotten, claimed, junk or replaced by a view,
#            a derived table dropped. A query that answers gives exactly what an eager workspace
#            gives (unless the damage claims tables built that are not); a failed one leaves the
#            workspace byte for byte as it was, and the same query afterwards answers exactly.
#   mcp      the MCP server's tools called in-process (mcp_server.call) with hostile arguments:
#            every answer a result or a one-line tool error, never an internal error, the
#            workspace and the folder unchanged, no file of the machine read
#   gate     `traceql diff A B --gate PCT` over trace ids, files, damaged files and folders, with odd
#            thresholds: exit 0, 7 (the gate, one 'traceql: diff:' line) or one 'traceql: error:'
#            line; a trace against itself never trips the gate; nothing left in TMPDIR

WAVE = ("memory", "amd", "derived", "mcp", "gate")
AMD_SOURCES = ("rocpd-mi300x-batched-gemm-rocprofv3/21_results.db", "rocprofv1-batched-gemm/results.db",
               "rocprofv1-hip-programming-mi300a/results.db", "rpd-rocmprofiledata/matmul_result.rpd")
MEMORY_NSYS = ("extrap-windows-gtx1060-nsys2022.1/con_kernel.sqlite", "extrap-windows-gtx1060-nsys2022.1/profile1.sqlite")
MEMORY_KINETO = "kineto-tbplugin-resnet50-memory-2021/worker0.1623143089861.pt.trace.json.gz"
DERIVED_SOURCES = ("memfusion-rtx3090-onnx-nvtx-nsys2023.1/report1.sqlite", "kineto-hta-triton/triton_example.json.gz")
EXTREMES = (2 ** 63 - 1, -2 ** 63, 2 ** 63, 2 ** 64, 2 ** 62, -1, 0, 2 ** 31, -2 ** 31, 1e300, -1e300, 1.5, "12", "x",
            None, True)
MEMORY_QUERIES = (("report", "--by", "memory", "--format", "csv"),
                  ("sql", "--format", "csv", "SELECT device_id, mem_kind, count(*) AS n, sum(bytes) AS b, "
                   "min(allocated) AS lo, max(allocated) AS hi, max(ts) - min(ts) AS span FROM memory_event "
                   "GROUP BY ALL ORDER BY ALL"))
AMD_QUERIES = (("report", "--by", "kernel", "--format", "csv"), ("info",))
DERIVED_QUERIES = (("report", "--by", "range", "--format", "csv"),
                   ("sql", "--format", "csv", "SELECT trace_id, count(*) AS n, sum(depth) AS d, count(range_id) AS r FROM op_range "
                    "GROUP BY ALL ORDER BY ALL"),
                   ("sql", "--format", "csv", "SELECT * FROM device_busy ORDER BY ALL"),
                   ("sql", "--format", "csv", "SELECT trace_id, count(*) AS n FROM torch_op GROUP BY ALL ORDER BY ALL"),
                   ("report", "--by", "op", "--format", "csv"),
                   ("sql", "--format", "csv", "SELECT count(*) AS n, sum(gpu_busy_ns) AS t FROM range_gpu"))
DERIVED_DAMAGE = ("fresh", "readonly", "full_disk", "corrupt", "interrupt", "forget", "junk", "claim", "view",
                  "drop_table")
EXACT_DAMAGE = ("fresh", "readonly", "forget", "junk")  # the answer must be the eager workspace's


def _sql_literal(v) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    if isinstance(v, bool):
        return str(int(v))
    return repr(v) if isinstance(v, float) else str(v)


def _run_args(db: Path, args: list[str], timeout: float, cwd: Path, env: dict | None = None,
              preexec=None, sigint_after: float | None = None) -> tuple[int | None, str, str]:
    """`python -m traceql --db DB ARGS`: (exit code or None on a timeout, stdout, stderr)."""
    import signal

    env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    proc = subprocess.Popen([sys.executable, "-m", "traceql", "--db", str(db), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=cwd, env=env, preexec_fn=preexec)
    try:
        if sigint_after is not None:
            try:
                proc.wait(timeout=sigint_after)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return None, "", ""
    return proc.returncode, stdout, stderr


def _one_line_problem(code, stderr: str, ok_codes=(0,), error_codes=(2, 3, 4, 5), prefix="traceql: error: ") -> str:
    """'' when CODE is a success or a clean error (exactly one line starting with PREFIX)."""
    if code is None:
        return "no answer in time"
    if code in ok_codes:
        return ""
    lines = stderr.strip().splitlines()
    if code in error_codes:
        if len(lines) != 1 or not lines[0].startswith(prefix) or "Traceback" in stderr:
            return f"error output is not one {prefix.strip()!r} line: {stderr[:400]!r}"
        return ""
    return f"exit code {code}: {stderr.strip()[-400:]!r}"


@dataclass
class WaveContext:
    work: Path
    base_db: Path               # one small nsys trace (the ingest family's base)
    lazy_db: Path               # DERIVED_SOURCES ingested, derived families not built
    eager_db: Path              # the same with TRACEQL_DERIVE=eager
    memory_kineto: Path | None  # MEMORY_KINETO cut to its first events (a .json)
    reference: dict             # DERIVED_QUERIES index -> the eager workspace's stdout
    small_trace: Path | None    # a trace file for diff


def wave_context(work: Path) -> WaveContext:
    base = work / "base"
    base_db = base_workspace(base)
    lazy, eager = base / "lazy.duckdb", base / "eager.duckdb"
    srcs = [TRACES / s for s in DERIVED_SOURCES if (TRACES / s).exists()]
    for db, mode in ((lazy, "lazy"), (eager, "eager")):
        if not db.exists():
            code, _o, err = _run_args(db, ["ingest", *map(str, srcs)], 900, base, {"TRACEQL_DERIVE": mode})
            if code != 0:
                raise SystemExit(f"could not ingest the derived family's sources: {err}")
    reference = {}
    for i, q in enumerate(DERIVED_QUERIES):
        code, out, err = _run_args(eager, list(q), 300, base)
        reference[i] = out if code == 0 else None
    memory = None
    if (TRACES / MEMORY_KINETO).exists():
        import gzip

        memory = base / "memory.json"
        if not memory.exists():
            with gzip.open(TRACES / MEMORY_KINETO, "rt") as fh:
                doc = json.load(fh)
            timed = sorted((e for e in doc["traceEvents"] if isinstance(e.get("ts"), (int, float))),
                           key=lambda e: e["ts"])
            doc["traceEvents"] = [e for e in doc["traceEvents"] if "ts" not in e] + timed[:5000]
            memory.write_text(json.dumps(doc))
    small = TRACES / DERIVED_SOURCES[1]
    return WaveContext(work, base_db, lazy, eager, memory, reference, small if small.exists() else None)


def _memory_kineto_build(src: Path, dst: Path, rng: random.Random) -> str:
    doc = json.loads(src.read_text())
    events = doc["traceEvents"]
    mem = [e for e in events if e.get("name") == "[memory]"]
    picked = rng.sample(mem, k=min(len(mem), rng.choice((1, 3, 50, len(mem)))))
    how = rng.choice(("Bytes", "Total Allocated", "Total Reserved", "Device Id", "Device Type", "Addr", "ts",
                      "no_args", "dup", "frees_first", "drop_key", "other_ts", "other_dur"))
    value = rng.choice(EXTREMES)
    if how in ("Bytes", "Total Allocated", "Total Reserved", "Device Id", "Device Type", "Addr"):
        for e in picked:
            e.setdefault("args", {})[how] = value
    elif how == "ts":
        for e in picked:
            e["ts"] = value
    elif how == "no_args":
        for e in picked:
            e.pop("args", None)
    elif how == "dup":
        events.extend(json.loads(json.dumps(picked)))
    elif how == "frees_first":
        for e in picked:
            b = e.get("args", {}).get("Bytes")
            if isinstance(b, int):
                e["args"]["Bytes"] = -b
    elif how == "drop_key":
        key = rng.choice(("Bytes", "Device Id", "Device Type", "Addr", "Total Allocated"))
        for e in picked:
            e.get("args", {}).pop(key, None)
        value = key
    else:  # extreme times on the other events (ops, kernels) around the memory events
        others = [e for e in events if e.get("ph") == "X"]
        for e in rng.sample(others, k=min(len(others), rng.choice((1, 10)))):
            e["ts" if how == "other_ts" else "dur"] = value
    dst.write_text(json.dumps(doc))
    return f"{how} = {value!r} on {len(picked)} memory events"


def _memory_nsys_build(src: Path, dst: Path, rng: random.Random) -> str:
    shutil.copyfile(src, dst)
    con = sqlite3.connect(dst)
    try:
        t = "CUDA_GPU_MEMORY_USAGE_EVENTS"
        how = rng.choice(("value", "value", "value", "nulls", "dup", "frees_only", "delete", "drop_column"))
        col = rng.choice(("start", "bytes", "address", "deviceId", "memKind", "memoryOperationType", "contextId",
                          "globalPid", "correlationId"))
        where = rng.choice(("1", "rowid % 2 = 0", "rowid = (SELECT min(rowid) FROM CUDA_GPU_MEMORY_USAGE_EVENTS)"))
        _rebuild(con, t)  # without NOT NULL, so that any value goes in
        if how == "value":
            value = rng.choice(EXTREMES)
            con.execute(f"UPDATE {t} SET {_q(col)} = {_sql_literal(value)} WHERE {where}")
            what = f"{col} = {value!r} where {where}"
        elif how == "nulls":
            con.execute(f"UPDATE {t} SET {_q(col)} = NULL WHERE {where}")
            what = f"{col} NULL where {where}"
        elif how == "dup":
            con.execute(f"INSERT INTO {t} SELECT * FROM {t}")
            what = "rows duplicated"
        elif how == "frees_only":
            con.execute(f"DELETE FROM {t} WHERE memoryOperationType = 0")
            what = "allocations deleted"
        elif how == "delete":
            con.execute(f"DELETE FROM {t}")
            what = "every row deleted"
        else:
            _rebuild(con, t, drop=col)
            what = f"column {col} dropped"
        con.commit()
    finally:
        con.close()
    return what


def _amd_sources() -> list[Path]:
    return [TRACES / s for s in AMD_SOURCES if (TRACES / s).exists()]


def run_memory_variant(index: int, seed: int, ctx: WaveContext) -> Outcome:
    rng = random.Random(f"memory:{seed}:{index}")
    srcs = [TRACES / s for s in MEMORY_NSYS if (TRACES / s).exists()]
    if ctx.memory_kineto is not None:
        srcs.append(ctx.memory_kineto)
    src = rng.choice(srcs)
    build = _memory_kineto_build if src.suffix == ".json" else _memory_nsys_build
    o = run_variant(index, src, "", seed, ctx.work, ctx.base_db, build=build, queries=MEMORY_QUERIES,
                    label="memory:" + ("kineto" if src.suffix == ".json" else "nsys"), rng_key="memory:")
    return o


def run_amd_variant(index: int, seed: int, ctx: WaveContext) -> Outcome:
    rng = random.Random(f"amd:{seed}:{index}")
    src = rng.choice(_amd_sources())
    mutator = MUTATORS[(index // len(WAVE)) % len(MUTATORS)]
    return run_variant(index, src, mutator, seed, ctx.work, ctx.base_db, queries=AMD_QUERIES,
                       label=f"amd:{mutator}", rng_key="amd:")


def _damage_derived(kind: str, db: Path, rng: random.Random) -> str:
    import duckdb

    if kind == "corrupt":
        data = bytearray(db.read_bytes())
        off = rng.randrange(3 * 4096, len(data))
        data[off:off + 512] = bytes(rng.randrange(256) for _ in range(min(512, len(data) - off)))
        db.write_bytes(bytes(data))
        return f"512 bytes at {off} overwritten"
    statements = {
        "forget": ["DELETE FROM derived_family WHERE family <> 'ingest'"],
        "junk": ["INSERT INTO derived_family VALUES (99, 'attribution'), (1, 'no such family'), (-1, 'busy')"],
        "claim": ["INSERT INTO derived_family SELECT trace_id, f FROM trace, (VALUES ('attribution'), ('busy'), "
                  "('pytorch'), ('peak')) v(f) EXCEPT SELECT * FROM derived_family"],
        "view": ["CREATE TABLE df_old AS SELECT * FROM derived_family", "DROP TABLE derived_family",
                 "CREATE VIEW derived_family AS SELECT * FROM df_old"],
        "drop_table": ["DROP TABLE " + rng.choice(("op_range", "device_busy", "torch_op", "range_gpu"))],
    }[kind]
    con = duckdb.connect(str(db))
    try:
        for st in statements:
            con.execute(st)
    finally:
        con.close()
    return "; ".join(statements)[:150]


def run_derived_variant(index: int, seed: int, ctx: WaveContext, timeout: float = 300.0) -> Outcome:
    import resource

    rng = random.Random(f"derived:{seed}:{index}")
    kind = DERIVED_DAMAGE[(index // len(WAVE)) % len(DERIVED_DAMAGE)]
    qi = rng.randrange(len(DERIVED_QUERIES))
    query = list(DERIVED_QUERIES[qi])
    folder = ctx.work / f"v{index:04d}"
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "tmp").mkdir(parents=True)
    db = folder / "ws.duckdb"
    eager_kinds = ("forget", "drop_table")
    shutil.copyfile(ctx.eager_db if kind in eager_kinds else ctx.lazy_db, db)
    out = Outcome(index, "derived sources", f"derived:{kind}", "")
    preexec, sigint_after = None, None
    try:
        if kind == "readonly":
            db.chmod(0o444)
            out.what = "workspace mode 444"
        elif kind == "full_disk":
            limit = rng.choice((db.stat().st_size // 2, db.stat().st_size, db.stat().st_size + 100_000))

            def preexec():
                resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
            out.what = f"ulimit -f {limit} bytes"
        elif kind == "interrupt":
            sigint_after = rng.uniform(1.0, 4.0)
            out.what = f"SIGINT after {sigint_after:.2f} s"
        elif kind != "fresh":
            out.what = _damage_derived(kind, db, rng)
        else:
            out.what = "no damage"
    except Exception as exc:  # noqa: BLE001 - a damage that does not apply is a harness bug
        out.result, out.problems = "FAIL", [f"could not damage the workspace: {type(exc).__name__}: {exc}"]
        return out
    out.what += ": " + " ".join(query)[:100]
    before, before_mode = sha256(db), db.stat().st_mode
    env = {"HOME": str(folder), "TMPDIR": str(folder / "tmp")}
    started = time.perf_counter()
    code, stdout, stderr = _run_args(db, query, timeout, folder, env, preexec, sigint_after)
    out.seconds = time.perf_counter() - started
    lines = stderr.strip().splitlines()
    out.message = (lines[-1] if lines else "")[:300]
    problem = _one_line_problem(code, stderr, ok_codes=(0, 130) if kind == "interrupt" else (0,))
    if problem:
        out.problems.append(problem)
    out.result = ("interrupted" if code == 130 else "ok" if code == 0 else EXIT_CLASSES.get(code, "FAIL"))
    expected = ctx.reference.get(qi)
    if code == 0 and kind in EXACT_DAMAGE + ("full_disk", "interrupt") and stdout != expected:
        out.problems.append(f"answer differs from the eager workspace's: {stdout[:200]!r} vs {str(expected)[:200]!r}")
    if code not in (0, None) and kind != "corrupt" and sha256(db) != before and not _derived_whole(db, ctx):
        out.problems.append("workspace changed by a failed query, and not to one whose derived tables are whole")
    if kind == "readonly" and os.geteuid() != 0 and (sha256(db) != before or db.stat().st_mode != before_mode):
        # (root may write a file of mode 444: then the families are built in place, as for "fresh")
        out.problems.append("a read-only workspace was changed")
    if kind in ("full_disk", "interrupt", "readonly") and code is not None:  # the same query again, unhindered
        db.chmod(0o644)
        again, stdout2, stderr2 = _run_args(db, query, timeout, folder, env)
        if again != 0 or stdout2 != expected:
            out.problems.append(f"after the {kind}, the query gives exit {again}: {(stdout2 or stderr2)[:200]!r}")
    left = sorted(p.name for p in folder.iterdir() if p.name not in ("ws.duckdb", "tmp", "ws.duckdb.lock"))
    left += sorted(str(p.relative_to(folder)) for p in (folder / "tmp").rglob("*"))
    if left:
        out.problems.append(f"files left behind: {left}")
    if out.problems:
        out.result = "FAIL"
    return out


def _derived_whole(db: Path, ctx: WaveContext) -> bool:
    """True when DB answers the derived queries exactly as the eager workspace does."""
    for i, q in enumerate(DERIVED_QUERIES):
        if q[0] == "sql" and ctx.reference.get(i) is not None:
            code, stdout, _err = _run_args(db, list(q), 300, db.parent, {"TMPDIR": str(db.parent / "tmp")})
            if code != 0 or stdout != ctx.reference[i]:
                return False
    return True


class _InternalErrors:
    """Exceptions that mcp_server.call turned into tool errors through faults.first_line, per thread:
    what the fuzzer counts as internal errors (a TraceqlError goes through faults.printable)."""

    def __init__(self):
        import threading

        from traceql.core import faults

        self.local = threading.local()
        self.original = faults.first_line

        def first_line(exc, *a, **k):
            seen = getattr(self.local, "seen", None)
            if seen is not None:
                seen.append(exc)
            return self.original(exc, *a, **k)
        faults.first_line = first_line


_INTERNAL: _InternalErrors | None = None


def mcp_arguments(rng: random.Random, places: dict) -> tuple[str, object]:
    def text(s):
        for key, value in places.items():
            s = s.replace("{" + key + "}", str(value))
        return s
    name = rng.choice(("traces", "schema", "report", "report", "sql", "sql", "analyze", "diff", "nope", ""))
    junk = rng.choice(EXTREMES + ([], {}, "'; DROP TABLE kernel; --", "\x1b]0;title\x07", "((((((((((((((("))
    ids = (1, 2, 99, -1, 0, 2 ** 63, 2 ** 70, "1", None, 1.5)
    if rng.random() < 0.1:
        return name, rng.choice((None, [], "x", 5, {"unknown": 1}))
    if name == "schema":
        args = {"view": rng.choice(("kernel", "memory_event", "nope", "", "KERNEL", junk))}
    elif name == "report":
        from traceql.query.reports import REPORTS

        args = {"by": rng.choice(tuple(REPORTS) + ("nope", "", junk))}
        for key, choices in (("trace", ids), ("per_trace", (True, False, "yes")),
                             ("where", ("dur > 0", "1=1; DROP TABLE kernel", "read_text('{secret}') IS NOT NULL",
                                        "(" * 80 + "1" + ")" * 80, "dur > 1e400", "name LIKE '%'", "no_col = 1",
                                        "dur > 9223372036854775807", junk)),
                             ("sort", ("total_ns:desc", "nope", "name;DROP", "count:asc", "", junk)),
                             ("limit", (0, 1, -1, 2 ** 63, 2 ** 70, "x")),
                             ("columns", ("name,total_ns", ["name"], "", "*", ["nope"], junk)),
                             ("group", ("group", "name", "path", "frame", "stack", "nope")),
                             ("range", ("", "x", "%", ["a", "b"], junk)), ("range_match", ("a", ["%"], junk))):
            if rng.random() < 0.3:
                args[key] = choices[rng.randrange(len(choices))]
    elif name == "sql":
        fam = rng.choice(SQL_FAMILIES)
        args = {"query": text(sql_text(fam, rng)) if rng.random() < 0.7 else rng.choice((
            "SELECT count(*), sum(dur) FROM kernel", "SELECT sum(bytes) FROM memory_event",
            "SELECT $n::BIGINT * 2", "SELECT 9223372036854775807::BIGINT + 1", "SELECT * FROM range(1000000)",
            "SELECT 'infinity'::DATE", "SELECT * FROM op_range", "SELECT * FROM device_busy", ""))}
        if rng.random() < 0.4:
            args["params"] = rng.choice(({"n": 3}, {"n": "١٢٣"}, {"n": 2 ** 70}, {"n": "x" * 5000}, {"x": [1]},
                                         {"n": None}, {}))
        if rng.random() < 0.3:
            args["dialect"] = rng.choice(("sqlite", "spark", "postgres", "nope", ""))
        if rng.random() < 0.3:
            args["max_rows"] = rng.choice((0, 1, 100000, 100001, -1, 2 ** 63))
    elif name == "analyze":
        args = {}
        for key, choices in (("rules", ("gpu_gaps", ["sync_calls", "nope"], [], "", junk)), ("trace", ids),
                             ("params", ({"min_gap_ns": 500000}, {"min_gap_ns": -1}, {"min_gap_ns": 2 ** 70},
                                         {"min_gap_ns": "x"}, {"nope": 1}, {"min_gap_ns": 1e308})),
                             ("limit", (0, 5, -1, 2 ** 63))):
            if rng.random() < 0.4:
                args[key] = choices[rng.randrange(len(choices))]
    elif name == "diff":
        args = {"a": rng.choice(ids), "b": rng.choice(ids)}
        for key, choices in (("alpha", (0.01, 0, 1, 0.5, 1e-300, "x")), ("min_effect_pct", (0, 5, -1, 1e308)),
                             ("sections", (["kernel"], ["nope"], [], "kernel")), ("changed_only", (True, False)),
                             ("limit", (0, 50, -1, 2 ** 63))):
            if rng.random() < 0.3:
                args[key] = choices[rng.randrange(len(choices))]
    else:
        args = {} if rng.random() < 0.7 else {"x": junk}
    return name, args


def run_mcp_variant(index: int, seed: int, ctx: WaveContext) -> Outcome:
    from traceql import mcp_server

    rng = random.Random(f"mcp:{seed}:{index}")
    folder = ctx.work / f"v{index:04d}"
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "home").mkdir(parents=True)
    secret = folder / "secret.txt"
    secret.write_text(f"id,value\n1,{SECRET}\n")
    db = folder / "ws.duckdb"
    shutil.copyfile(ctx.eager_db, db)
    places = {"secret": secret, "out": folder / "out.csv", "outdir": folder / "outdir", "db2": folder / "other.duckdb",
              "folder": folder, "home": folder / "home"}
    name, args = mcp_arguments(rng, places)
    out = Outcome(index, "derived sources (eager)", f"mcp:{name or 'empty'}", json.dumps(args, default=str)[:300])
    before = _snapshot(folder)  # ws.duckdb's sha256 among the rest
    before_ws = before["ws.duckdb"]
    _INTERNAL.local.seen = []
    started = time.perf_counter()
    try:
        content, text, is_error = mcp_server.call(db, name, args)
    except Exception as exc:  # noqa: BLE001 - call() promises a tool error, never an exception
        out.problems.append(f"call raised {type(exc).__name__}: {exc}")
        content, text, is_error = None, "", True
    finally:
        seen, _INTERNAL.local.seen = _INTERNAL.local.seen, None
    out.seconds = time.perf_counter() - started
    out.message = text.splitlines()[0][:300] if text else ""
    for exc in seen:
        out.problems.append(f"internal error behind the tool error: {type(exc).__name__}: {str(exc)[:300]}")
    if is_error:
        out.result = "tool_error"
        if "\n" in text.strip() or not text.startswith("traceql: error: "):
            out.problems.append(f"tool error is not one 'traceql: error:' line: {text[:300]!r}")
    else:
        out.result = "ok"
        try:
            json.dumps(content)
        except (TypeError, ValueError) as exc:
            out.problems.append(f"structured content is not JSON: {exc}")
    if SECRET in text or SECRET in json.dumps(content, default=str):
        out.problems.append("the secret file was read and returned")
    after = _snapshot(folder)
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k) and k != "ws.duckdb.lock")
    if changed:
        out.problems.append(f"files created or changed: {changed}")
    if after.get("ws.duckdb") != before_ws:
        out.problems.append("workspace changed by a tool call")
    if out.problems:
        out.result = "FAIL"
    return out


def run_gate_variant(index: int, seed: int, ctx: WaveContext, timeout: float = 300.0) -> Outcome:
    rng = random.Random(f"gate:{seed}:{index}")
    folder = ctx.work / f"v{index:04d}"
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "tmp").mkdir(parents=True)
    db = folder / "ws.duckdb"
    shutil.copyfile(ctx.eager_db, db)
    damaged = folder / "damaged.json.gz"
    if ctx.small_trace is not None:
        data = bytearray(ctx.small_trace.read_bytes())
        del data[rng.randrange(10, len(data)):]
        damaged.write_bytes(bytes(data))
    (folder / "empty.sqlite").write_bytes(b"")
    sides = ("1", "1", "2", "2", "99", "-5", "1.5", str(db), str(ctx.small_trace or "missing"), str(damaged),
             str(folder / "tmp"), str(folder / "missing.sqlite"), str(folder / "empty.sqlite"))
    a, b = rng.choice(sides), rng.choice(sides)
    pct = rng.choice(("0", "5", "0.0001", "1e308", "inf", "nan", "-1", "abc", "1e-320", "100", "5", "0"))
    args = ["diff", a, b, "--gate", pct]
    for opt, values in (("--alpha", ("0.5", "0", "1", "nan", "1e-300")), ("--min-effect", ("0", "1e308", "-1", "nan")),
                        ("--trim", ("0", "0.49", "0.5")), ("--format", ("json", "markdown", "csv", "parquet")),
                        ("--no-paired", None), ("--per-iteration", None), ("--section", ("kernel", "total")),
                        ("-o", (str(folder / "out.txt"),))):
        if rng.random() < 0.2:
            args += [opt] if values is None else [opt, rng.choice(values)]
    if "--format" in args and args[args.index("--format") + 1] == "parquet" and "-o" not in args:
        args += ["-o", str(folder / "out.txt")]
    out = Outcome(index, "derived sources (eager)", "gate:" + ("same" if a == b else "ids" if a.isdigit() and
                                                             b.isdigit() else "files"), " ".join(args[1:])[:300])
    inputs = {p: sha256(Path(p)) for p in (a, b) if Path(p).is_file()}
    before_ws = sha256(db)
    started = time.perf_counter()
    code, _stdout, stderr = _run_args(db, args, timeout, folder, {"HOME": str(folder), "TMPDIR": str(folder / "tmp")})
    out.seconds = time.perf_counter() - started
    lines = stderr.strip().splitlines()
    out.message = (lines[-1] if lines else "")[:300]
    if code == 7:
        out.result = "gate_tripped"
        if len(lines) != 1 or not lines[0].startswith("traceql: diff: "):
            out.problems.append(f"gate output is not one 'traceql: diff:' line: {stderr[:400]!r}")
        if a == b and a in ("1", "2"):
            out.problems.append("a trace compared with itself trips the gate")
    else:
        problem = _one_line_problem(code, stderr)
        if problem:
            out.problems.append(problem)
        out.result = "ok" if code == 0 else EXIT_CLASSES.get(code, "FAIL")
    if sha256(db) != before_ws:
        out.problems.append("workspace changed by diff")
    if any(sha256(Path(p)) != h for p, h in inputs.items()):
        out.problems.append("an input file was changed")
    left = sorted(str(p.relative_to(folder)) for p in (folder / "tmp").rglob("*"))
    left += sorted(p.name for p in folder.iterdir() if p.name not in ("ws.duckdb", "ws.duckdb.lock", "tmp",
                                                                   "damaged.json.gz", "empty.sqlite", "out.txt"))
    if left:
        out.problems.append(f"files left behind: {left}")
    if out.problems:
        out.result = "FAIL"
    return out


def run_wave(n: int = 150, seed: int = 1, jobs: int = 2, work: Path | None = None, verbose: bool = False,
             only: set[int] | None = None, log=print) -> list[Outcome]:
    """N variants of this wave's families, variant i of WAVE[i % 5]."""
    global _INTERNAL
    if not TRACES.is_dir():
        raise SystemExit(f"no traces under {TRACES}")
    if _INTERNAL is None:
        _INTERNAL = _InternalErrors()
    own = work is None
    work = Path(tempfile.mkdtemp(prefix="traceql-fuzz-")) if own else Path(work)
    try:
        ctx = wave_context(work)
        runners = {"memory": run_memory_variant, "amd": run_amd_variant, "derived": run_derived_variant,
                   "mcp": run_mcp_variant, "gate": run_gate_variant}

        def one(i):
            kind = WAVE[i % len(WAVE)]
            try:
                o = runners[kind](i, seed, ctx)
            except Exception as exc:  # noqa: BLE001 - a harness failure is a failure too
                o = Outcome(i, "", f"{kind}:harness", "", "FAIL", [f"{type(exc).__name__}: {exc}"])
            shutil.rmtree(work / f"v{i:04d}", ignore_errors=True)
            return o

        todo = [i for i in range(n) if only is None or i in only]
        outcomes = []
        for kind in WAVE:   # one family at a time, so that each one's CPU seconds can be measured
            mine = [i for i in todo if WAVE[i % len(WAVE)] == kind]
            with cpu_of(kind):
                results = concurrent.futures.ThreadPoolExecutor(jobs).map(one, mine) if jobs > 1 else map(one, mine)
                outcomes += _collect(results, verbose, log)
        return outcomes
    finally:
        if own:
            shutil.rmtree(work, ignore_errors=True)



# -- the hostile family: issue 37's findings, randomized ---------------------------------------------
#
#   hostile:macro    a macro named like a built-in traceql calls (its default parameter reads a secret file,
#                    or a table macro) stored in a received workspace, then any command: exit 5 naming it, the
#                    workspace unchanged, the secret never printed
#   hostile:output   -o naming the workspace, its WAL or lock, a symbolic link to it, or an existing file,
#                    with or without --overwrite: exit 2 and the workspace unchanged (an existing file kept
#                    unless --overwrite)
#   hostile:view     an export whose table is a view (endless WITH RECURSIVE, a 4-way cross join, a missing
#                    table): ingest ends at once, exit 0 or one error line
#   hostile:bomb     gzip'd Kineto JSON expanding to 1 MB-1 GiB of blanks, zeros or brackets: exit 0 or 3
#                    within the time limit, one line
#   hostile:nesting  parentheses 10-5,000 deep in `sql` and --where, JSON arrays 10-100,000 deep in Kineto
#                    args: exit 0 or one line
#   hostile:numeric  Kineto ts, dur, device, Input Dims and baseTimeNanoseconds at extremes (2**63, 1e300,
#                    -1, text, NaN-free): exit 0 or 3; when ingested, no negative bytes or FLOPs
#   hostile:signal   SIGTERM, SIGHUP or SIGINT at a random moment of an ingest: exit 0 or 130, the
#                    workspace unchanged or whole with the new trace, no temporary file left
#   hostile:escape   control and bidi characters in a column name, a value and --host: table, markdown
#                    and info output hold none of them raw

HOSTILE = ("macro", "output", "view", "bomb", "nesting", "numeric", "signal", "escape")
# (functions DuckDB resolves by name: not coalesce, which its parser turns into an operator a macro cannot replace)
HOSTILE_MACROS = ("lower", "regexp_replace", "sum", "count_star", "abs", "min", "max", "list",
                  "row_number", "round", "upper", "list_contains", "current_database", "getvariable", "concat")
HOSTILE_TABLE_MACROS = ("duckdb_tables", "duckdb_columns", "range", "read_text", "duckdb_functions")
HOSTILE_COMMANDS = (["ingest", "SRC"], ["upgrade"], ["rm", "1"], ["report", "--by", "kernel"], ["info"],
                    ["sql", "SELECT count(*) FROM kernel"], ["summary"], ["analyze"], ["query", "kernel"],
                    ["export", "--format", "folded", "-o", "OUT"])
OUTPUT_COMMANDS = (["report", "--by", "kernel"], ["sql", "SELECT 1 AS x"], ["summary"], ["analyze"],
                   ["query", "kernel"], ["export", "--format", "perfetto"], ["export", "--format", "folded"],
                   ["plot", "--by", "kernel"], ["diff", "1", "1"])
CONTROLS = ("\x1b[31m", "\x07", "\r", "\n", "\x9b2J", "\u202e", "\x1b]0;owned\x07", "\t", "\x00", "\x7f")


@dataclass
class HostileContext:
    work: Path
    base_db: Path      # one small nsys trace (TRACEQL_DERIVE=eager)
    base_src: Path     # its export
    big_src: Path      # a generated export of 20,000 kernels, for signals mid-ingest


def hostile_context(work: Path) -> HostileContext:
    from fixtures.gen_nsys import generate
    from tests.util import nsys_stub

    base = work / "hostile"
    base.mkdir(parents=True, exist_ok=True)
    src = nsys_stub(base / "base.sqlite")
    db = base / "base.duckdb"
    if not db.exists():
        code, _o, err = _run_args(db, ["ingest", str(src)], 300, base, {"TRACEQL_DERIVE": "eager"})
        if code != 0:
            raise SystemExit(f"could not ingest the hostile family's base: {err}")
    big = base / "big.sqlite"
    if not big.exists():
        generate(big, layout="3", kernels=20000, seed=5)
    return HostileContext(work, db, src, big)


def _leftovers(folder: Path, keep) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name not in keep and not p.name.endswith(".lock"))


def _hostile_run(out: Outcome, db: Path, args: list[str], timeout: float, folder: Path, env: dict | None = None,
                 success: str = "ok", ok_codes=(0,)) -> tuple[int | None, str, str]:
    """Run `traceql --db DB ARGS` for OUT: its result (SUCCESS, or the error's class) and message
    set, a problem added unless it succeeded or failed with one error line."""
    code, stdout, stderr = _run_args(db, args, timeout, folder, {"HOME": str(folder), **(env or {})})
    out.result = success if code == 0 else EXIT_CLASSES.get(code, "FAIL")
    out.message = stderr.strip()[:300]
    problem = _one_line_problem(code, stderr, ok_codes=ok_codes)
    if problem:
        out.problems.append(problem)
    return code, stdout, stderr


def _hostile_macro(rng, folder, ctx, out) -> None:
    import duckdb

    secret = folder / "secret.txt"
    secret.write_text(SECRET)
    db = folder / "ws.duckdb"
    shutil.copyfile(ctx.base_db, db)
    table = rng.random() < 0.3
    name = rng.choice(HOSTILE_TABLE_MACROS if table else HOSTILE_MACROS)
    body = (f"TABLE SELECT content AS x FROM read_text('{secret}')" if table
            else "(SELECT content FROM read_text(y))")
    con = duckdb.connect(str(db))
    try:
        con.execute(f'CREATE MACRO "{name}"(a := 0, b := 0, c := 0, d := 0, y := \'{secret}\') AS {body}')
    finally:
        con.close()
    command = [str(ctx.base_src) if a == "SRC" else str(folder / "out.txt") if a == "OUT" else a
               for a in rng.choice(HOSTILE_COMMANDS)]
    out.what = f"{name} ({'table ' if table else ''}macro) then {' '.join(command)[:120]}"
    before = sha256(db)
    problems = len(out.problems)
    code, stdout, stderr = _hostile_run(out, db, command, 120, folder, success="ok", ok_codes=())
    if len(out.problems) == problems and (code != 5 or f'"{name}"' not in stderr):
        out.problems.append(f"not refused naming the macro (exit {code}): {stderr[:300]!r}")
    if SECRET in stdout or SECRET in stderr:
        out.problems.append("the secret file's content was printed")
    if sha256(db) != before:
        out.problems.append("workspace changed")


def _hostile_output(rng, folder, ctx, out) -> None:
    db = folder / "ws.duckdb"
    shutil.copyfile(ctx.base_db, db)
    (folder / "link.duckdb").symlink_to(db)
    keep = folder / "keep.txt"
    keep.write_text("keep me")
    target = rng.choice((db, Path(str(db) + ".wal"), Path(str(db) + ".lock"), folder / "link.duckdb", keep))
    overwrite = rng.random() < 0.5
    command = list(rng.choice(OUTPUT_COMMANDS)) + ["-o", str(target)] + (["--overwrite"] if overwrite else [])
    out.what = " ".join(command)[:200]
    before = sha256(db)
    code, _stdout, stderr = _hostile_run(out, db, command, 180, folder, success="ok")
    if target != keep:
        if code != 2 or "is the workspace" not in stderr:
            out.problems.append(f"-o naming the workspace was not refused (exit {code})")
    elif not overwrite and (code != 2 or keep.read_text() != "keep me"):
        out.problems.append(f"an existing file was replaced without --overwrite (exit {code})")
    if sha256(db) != before:
        out.problems.append("workspace changed")
    if target == keep and overwrite and code == 0 and keep.read_text() == "keep me":
        out.problems.append("--overwrite wrote nothing")


def _hostile_view(rng, folder, ctx, out) -> None:
    src = folder / "v.sqlite"
    shutil.copyfile(ctx.base_src, src)
    con = sqlite3.connect(src)
    tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    table = rng.choice(tables)
    cols = [r[1] for r in con.execute(f"PRAGMA table_info({_q(table)})")]
    kind = rng.choice(("recursive", "cross", "missing"))
    con.execute(f"DROP TABLE {_q(table)}")
    if kind == "recursive":
        sel = ", ".join(f"n AS {_q(c)}" for c in cols)
        con.execute(f"CREATE VIEW {_q(table)} AS WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) "
                    f"SELECT {sel} FROM r")
    elif kind == "cross":
        other = rng.choice([t for t in tables if t != table] or tables)
        con.execute(f"CREATE VIEW {_q(table)} AS SELECT a.* FROM {_q(other)} a, {_q(other)} b, {_q(other)} c, "
                    f"{_q(other)} d")
    else:
        con.execute(f"CREATE VIEW {_q(table)} AS SELECT * FROM no_such_table")
    con.commit()
    con.close()
    out.what = f"{table} as a {kind} view"
    db = folder / "ws.duckdb"
    shutil.copyfile(ctx.base_db, db)
    before, src_before = sha256(db), sha256(src)
    code, _stdout, stderr = _hostile_run(out, db, ["ingest", str(src)], 120, folder, success="ingested")
    if code != 0 and sha256(db) != before:
        out.problems.append("workspace changed by a failed ingest")
    if sha256(src) != src_before:
        out.problems.append("the source was changed")


def _hostile_bomb(rng, folder, ctx, out) -> None:
    import gzip

    mb = rng.choice((1, 16, 70, 300, 1024))
    fill = rng.choice((b" ", b"\n", b"0", b"[", b'{"ph":"X"},'))
    path = folder / "bomb.json.gz"
    with gzip.open(path, "wb", compresslevel=6) as fh:
        fh.write(b'{"traceEvents":[')
        block = fill * ((1 << 20) // len(fill))
        for _ in range(mb):
            fh.write(block)
        fh.write(b"]}")
    out.what = f"{mb} MB of {fill!r} in {path.stat().st_size:,} bytes of gzip"
    db = folder / "ws.duckdb"
    code, _stdout, stderr = _hostile_run(out, db, ["ingest", str(path)], 240, folder, success="ingested")
    if code != 0 and db.exists():
        out.problems.append("a workspace was created by a failed ingest")


def _hostile_nesting(rng, folder, ctx, out) -> None:
    db = folder / "ws.duckdb"
    shutil.copyfile(ctx.base_db, db)
    depth = rng.choice((10, 49, 50, 51, 60, 200, 1000, 5000))
    where = rng.choice(("sql", "sql_param", "where", "json"))
    if where == "json":
        depth = rng.choice((10, 999, 1000, 1001, 5000, 100_000))
        path = folder / "deep.json"
        path.write_text('{"traceEvents":[{"ph":"X","cat":"kernel","name":"k","ts":1,"dur":1,"pid":1,"tid":1,"args":'
                        + "[" * depth + "]" * depth + "}]}")
        args = ["ingest", str(path)]
        db = folder / "new.duckdb"
    elif where == "where":
        args = ["report", "--by", "kernel", "--where", "(" * depth + "dur > 0" + ")" * depth]
    else:
        args = ["sql", "SELECT " + "(" * depth + "1" + ")" * depth + " AS x" + (", $v AS v" if where == "sql_param"
                                                                                  else "")]
        args += ["--param", "v=1"] if where == "sql_param" else []
    out.what = f"{depth} levels in {where}"
    before = sha256(db) if db.exists() else None
    code, _stdout, stderr = _hostile_run(out, db, args, 120, folder, success="ok")
    if before is not None and sha256(db) != before:
        out.problems.append("workspace changed")


def _hostile_numeric(rng, folder, ctx, out) -> None:
    def extreme():
        return rng.choice(EXTREMES[:9] + (1e300, -1e300, 1.5, "12", "x", None, 2 ** 40, 10 ** 30))

    where = rng.choice(("ts", "dur", "device", "dims", "base"))
    op = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 100, "dur": 50,
          "args": {"External id": 1, "Input Dims": [[64, 64], [64, 64]], "Input type": ["float", "float"]}}
    launch = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 110, "dur": 10,
              "args": {"External id": 1, "correlation": 7}}
    kernel = {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 200, "dur": 30,
              "args": {"External id": 1, "device": 0, "stream": 7, "correlation": 7}}
    doc = {"schemaVersion": 1, "traceEvents": [op, launch, kernel]}
    value = extreme()
    if where in ("ts", "dur"):
        rng.choice((op, launch, kernel))[where] = value
    elif where == "device":
        kernel["args"]["device"] = value
    elif where == "dims":
        op["args"]["Input Dims"] = [[value, 64], [64, extreme()]]
    else:
        doc["baseTimeNanoseconds"] = value
    out.what = f"{where} = {value!r}"[:200]
    path = folder / "n.json"
    path.write_text(json.dumps(doc))
    db = folder / "ws.duckdb"
    code, _stdout, stderr = _hostile_run(out, db, ["ingest", str(path)], 120, folder, success="ingested")
    if code == 0:
        code, stdout, stderr = _run_args(db, ["sql", "--format", "csv", "SELECT count(*) FILTER (WHERE bytes < 0 OR "
                                              "flops < 0) AS negative FROM kernel_op"], 120, folder)
        if code != 0 or stdout.splitlines()[1:] != ["0"]:
            out.problems.append(f"negative bytes or FLOPs, or the check failed: {stdout!r} {stderr[:200]!r}")
        code, _o, stderr = _run_args(db, ["report", "--by", "op"], 120, folder)
        problem = _one_line_problem(code, stderr)
        if problem:
            out.problems.append("report --by op: " + problem)
    elif db.exists():
        out.problems.append("a workspace was created by a failed ingest")


def _hostile_signal(rng, folder, ctx, out) -> None:
    import signal

    db = folder / "ws.duckdb"
    shutil.copyfile(ctx.base_db, db)
    sig = rng.choice(("SIGTERM", "SIGHUP", "SIGINT"))
    after = round(rng.uniform(0.3, 6.0), 2)
    out.what = f"{sig} after {after} s"
    before = sha256(db)
    env = {**os.environ, "PYTHONPATH": str(REPO), "HOME": str(folder)}
    proc = subprocess.Popen([sys.executable, "-m", "traceql", "--db", str(db), "ingest", "-j", "1", str(ctx.big_src)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=folder, env=env)
    try:
        proc.wait(timeout=after)
    except subprocess.TimeoutExpired:
        proc.send_signal(getattr(signal, sig))
    try:
        _stdout, stderr = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        out.problems.append("no answer in time after the signal")
        out.result = "FAIL"
        return
    code = proc.returncode
    out.result = "ok" if code == 0 else "interrupted" if code == 130 else EXIT_CLASSES.get(code, "FAIL")
    out.message = stderr.strip()[-300:]
    lines = stderr.strip().splitlines()
    if code == 130:
        if not lines or not lines[-1].startswith("traceql: interrupted") or "Traceback" in stderr:
            out.problems.append(f"interrupted without its line: {stderr[-300:]!r}")
        if sha256(db) != before:
            out.problems.append("workspace changed by an interrupted ingest")
    elif code == 0:
        if not _ingested_whole(db, "ingest"):
            out.problems.append("the ingest that answered left no whole workspace")
    elif code == -getattr(signal, sig) and not stderr.strip():  # before Python ran traceql's first line
        out.result = "killed_at_start"
        if sha256(db) != before:
            out.problems.append("workspace changed by an ingest killed at its start")
    else:
        out.problems.append(f"exit {code}: {stderr[-300:]!r}")
    left = _leftovers(folder, ("ws.duckdb",))
    if left:
        out.problems.append(f"files left behind: {left}")


def _hostile_escape(rng, folder, ctx, out) -> None:
    text = "".join(rng.choice(CONTROLS + ("a", "é", "日", " ", "|")) for _ in range(rng.randrange(2, 12)))
    db = folder / "ws.duckdb"
    fmt = rng.choice(("table", "markdown", "info"))
    out.what = f"{text!r} in {fmt}"
    if fmt == "info":
        code, stdout, stderr = _hostile_run(out, db, ["ingest", str(ctx.base_src), "--host", "h" + text], 120, folder)
        if code == 0:
            code, stdout, stderr = _hostile_run(out, db, ["info"], 120, folder)
    else:
        shutil.copyfile(ctx.base_db, db)
        clean = text.replace("\x00", "")
        code, stdout, stderr = _hostile_run(out, db, ["sql", 'SELECT $v AS "' + clean.replace('"', '""') + '"',
                                                      "--param", "v=" + clean, "--format", fmt], 120, folder,
                                            {"COLUMNS": "200"})
    raw = sorted({c for c in stdout + stderr if c in "\x1b\x07\r\x9b\u202e\x00\x7f"})
    if raw:
        out.problems.append(f"raw control characters printed: {raw!r}")
    if fmt == "markdown" and code == 0:
        rows = stdout.splitlines()
        if len(rows) != 3:
            out.problems.append(f"a markdown table of one row in {len(rows)} lines")


def run_hostile_variant(index: int, seed: int, ctx: HostileContext) -> Outcome:
    kind = HOSTILE[index % len(HOSTILE)]
    rng = random.Random(f"hostile:{seed}:{index}")
    folder = ctx.work / f"h{index:04d}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    out = Outcome(index, "self-made", f"hostile:{kind}", "")
    started = time.perf_counter()
    try:
        {"macro": _hostile_macro, "output": _hostile_output, "view": _hostile_view, "bomb": _hostile_bomb,
         "nesting": _hostile_nesting, "numeric": _hostile_numeric, "signal": _hostile_signal,
         "escape": _hostile_escape}[kind](rng, folder, ctx, out)
    except Exception as exc:  # noqa: BLE001 - a harness failure is a failure too
        out.problems.append(f"harness: {type(exc).__name__}: {exc}")
    out.seconds = time.perf_counter() - started
    if out.problems:
        out.result = "FAIL"
    shutil.rmtree(folder, ignore_errors=True)
    return out


def run_hostile(n: int = 160, seed: int = 1, jobs: int = 2, work: Path | None = None, verbose: bool = False,
                only: set[int] | None = None, log=print) -> list[Outcome]:
    """N variants of the hostile family, variant i of HOSTILE[i % 8]; each kind's CPU measured apart."""
    own = work is None
    work = Path(tempfile.mkdtemp(prefix="traceql-fuzz-")) if own else Path(work)
    try:
        ctx = hostile_context(work)
        todo = [i for i in range(n) if only is None or i in only]
        outcomes = []
        for kind in HOSTILE:
            mine = [i for i in todo if HOSTILE[i % len(HOSTILE)] == kind]
            with cpu_of(f"hostile:{kind}"):
                one = lambda i: run_hostile_variant(i, seed, ctx)  # noqa: E731
                results = concurrent.futures.ThreadPoolExecutor(jobs).map(one, mine) if jobs > 1 else map(one, mine)
                outcomes += _collect(results, verbose, log)
        return outcomes
    finally:
        if own:
            shutil.rmtree(work, ignore_errors=True)


OUTCOME_LOG: list[Path] = []  # --log FILE: every outcome appended as it comes (a long run stopped keeps them)


def _log_outcome(o: Outcome) -> None:
    """Append O to the --log files, with this process's CPU seconds so far (a family's CPU from the log alone)."""
    for path in OUTCOME_LOG:
        with open(path, "a") as fh:
            fh.write(json.dumps({**asdict(o), "cpu": round(cpu_seconds(), 2)}) + "\n")


def _collect(results, verbose: bool, log) -> list[Outcome]:
    """The outcomes as they come, each failing one (every one with VERBOSE) logged."""
    outcomes = []
    for o in results:
        outcomes.append(o)
        _log_outcome(o)
        if verbose or not o.ok:
            log(f"{o.index:4d} {o.result:24s} {o.seconds:6.2f}s {o.mutator:20s} {o.what[:150]!r}"
                + (f"\n     -> {o.message}" if o.message and verbose else "")
                + "".join(f"\n     !! {p}" for p in o.problems))
    return outcomes


def family(o: Outcome) -> str:
    return o.mutator.split(":")[0] if ":" in o.mutator else "ingest"


def summary(outcomes: list[Outcome], seconds: float) -> dict:
    by = collections.Counter(o.result for o in outcomes)
    per_mutator = collections.defaultdict(collections.Counter)
    per_family = collections.defaultdict(collections.Counter)
    for o in outcomes:
        per_mutator[o.mutator][o.result] += 1
        per_family[family(o)][o.result] += 1
    return {
        "variants": len(outcomes),
        "clean_ingests": by.get("ingested", 0),
        "clean_errors": {k: v for k, v in sorted(by.items()) if k not in ("ingested", "ran", "ok", "FAIL")},
        "failures": by.get("FAIL", 0),
        "seconds": round(seconds, 1),
        "per_family": {f: dict(c) for f, c in per_family.items()},
        "cpu_seconds": {**{f: round(v, 1) for f, v in FAMILY_CPU.items()},
                        **({"hostile": round(sum(v for f, v in FAMILY_CPU.items() if f.startswith("hostile:")), 1)}
                           if "hostile" in per_family else {})},
        "per_mutator": {m: dict(c) for m, c in sorted(per_mutator.items())},
    }


FAMILY_TITLES = {"ingest": "damaged exports ingested", "sql": "SQL surface (`traceql sql`)",
                 "fault": "workspace faults", "memory": "memory events (damaged exports, then report --by memory)",
                 "amd": "AMD sources (damaged rocpd, rocprofv1, rpd databases)",
                 "derived": "derived families built on first query (damaged workspaces)",
                 "mcp": "MCP server tools (in-process)", "gate": "diff --gate",
                 "hostile": "hostile input (issue 37: macros, -o, views, bombs, nesting, extremes, signals, escapes)"}


def markdown(s: dict, args) -> str:
    lines = [
        "# Fuzz run",
        "",
        f"`python -m tests.fuzz --variants {args.variants} --sql {args.sql} --faults {args.faults} --wave {args.wave} "
        f"--hostile {args.hostile} "
        f"--seed {args.seed} "
        f"--mode {args.mode} --jobs {args.jobs}` (what `make fuzz` runs), traceql at the commit that added this "
        "file's last change.",
        "",
        f"- variants: {s['variants']}",
        f"- failures (crash, exit 1, traceback, hang, workspace changed, leftovers, source changed, a file written or "
        f"read without asking): {s['failures']}",
        f"- wall time: {s['seconds']} s on {os.cpu_count()} CPUs (1-minute load average "
        f"{os.getloadavg()[0]:.1f} at the end: other jobs share the machine)",
    ]
    for fam, counts in s["per_family"].items():
        cpu = s.get("cpu_seconds", {}).get(fam)
        lines.append(f"- {FAMILY_TITLES.get(fam, fam)}: {sum(counts.values())} ("
                     + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) + ")"
                     + (f", {cpu} CPU s" if cpu is not None else ""))
    for fam in s["per_family"]:
        rows = {m: c for m, c in s["per_mutator"].items() if (m.split(":")[0] if ":" in m else "ingest") == fam}
        classes = sorted({k for c in rows.values() for k in c}, key=lambda k: (k == "FAIL", k))
        cpu = {m: s["cpu_seconds"][m] for m in rows if m in s.get("cpu_seconds", {})}  # measured per mutator
        lines += ["", f"## {FAMILY_TITLES.get(fam, fam)}", "",
                  "| mutator | " + " | ".join(classes) + " |" + (" CPU s |" if cpu else ""),
                  "|---|" + "---|" * (len(classes) + bool(cpu))]
        for m, c in rows.items():
            lines.append(f"| {m} | " + " | ".join(str(c.get(k, 0)) for k in classes) + " |"
                         + (f" {cpu.get(m, '')} |" if cpu else ""))
    return "\n".join(lines) + "\n"


def from_logs(paths: list[Path]) -> tuple[list[Outcome], dict[str, float]]:
    """The outcomes of --log files (one process each, its families run one after another), and
    the CPU seconds of each family or wave/hostile kind: the process's CPU at its last outcome
    minus that at the last outcome of the kind before (the first kind includes the set-up)."""
    outcomes, cpu = [], {}
    for path in paths:
        last, previous = {}, 0.0
        for line in Path(path).read_text().splitlines():
            row = json.loads(line)
            spent = row.pop("cpu")
            o = Outcome(**row)
            outcomes.append(o)
            kind = o.mutator if family(o) == "hostile" else family(o)
            last[kind] = spent
        for kind, spent in last.items():  # in the order the kinds ran
            cpu[kind] = round(spent - previous, 1)
            previous = spent
    if any(k.startswith("hostile:") for k in cpu):
        cpu["hostile"] = round(sum(v for k, v in cpu.items() if k.startswith("hostile:")), 1)
    return outcomes, cpu


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", "--variants", type=int, default=300, help="damaged exports to ingest")
    ap.add_argument("--sql", type=int, default=200, help="SQL-surface variants (traceql sql)")
    ap.add_argument("--faults", type=int, default=100, help="workspace-fault variants")
    ap.add_argument("--wave", type=int, default=150,
                    help="variants of the memory, AMD, derived-family, MCP and diff --gate families")
    ap.add_argument("--hostile", type=int, default=160,
                    help="variants of the hostile family (issue 37's findings: macros, -o, views, bombs, ...)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("-j", "--jobs", type=int, default=2, help="variants run at once (cli mode)")
    ap.add_argument("--mode", choices=("cli", "api"), default="cli",
                    help="cli: 'python -m traceql ingest' per variant (exit code and stderr checked); "
                         "api: traceql.ingest() in this process")
    ap.add_argument("--max-bytes", type=int, default=None, help="only sources up to this size")
    ap.add_argument("--keep", type=Path, default=None, help="copy failing variants here")
    ap.add_argument("--json", type=Path, default=None, help="write the summary and every outcome here")
    ap.add_argument("--only", default=None, help="comma-separated variant numbers to run (reproduce one)")
    ap.add_argument("--markdown", type=Path, default=None, help="write the summary as a Markdown table here")
    ap.add_argument("-v", "--verbose", action="store_true", help="one line per variant")
    ap.add_argument("--log", type=Path, default=None, help="append every outcome to this JSON-lines file as it comes")
    ap.add_argument("--summarize", type=Path, nargs="+", default=None,
                    help="no run: the summary (and --markdown) of these --log files, e.g. families run apart")
    args = ap.parse_args(argv)
    if args.summarize:
        outcomes, cpu = from_logs(args.summarize)
        FAMILY_CPU.update(cpu)
        s = summary(outcomes, 0.0)
        s["cpu_seconds"].update(cpu)
        print(f"variants {s['variants']}: failures {s['failures']}")
        if args.markdown:
            args.markdown.write_text(markdown(s, args))
        return 1 if s["failures"] else 0
    if args.log:
        OUTCOME_LOG.append(args.log)
    started = time.perf_counter()
    only = {int(i) for i in args.only.split(",")} if args.only else None
    outcomes = []
    if args.variants:
        with cpu_of("ingest"):
            outcomes += run(args.variants, args.seed, args.jobs, args.mode, keep=args.keep,
                            max_bytes=args.max_bytes, verbose=args.verbose, only=only)
    if args.sql:
        with cpu_of("sql"):
            outcomes += run_sql(args.sql, args.seed, args.jobs, args.mode, verbose=args.verbose)
    if args.faults:
        with cpu_of("fault"):
            outcomes += run_faults(args.faults, args.seed, args.jobs, verbose=args.verbose)
    if args.wave:
        outcomes += run_wave(args.wave, args.seed, args.jobs, verbose=args.verbose, only=only)
    if args.hostile:
        outcomes += run_hostile(args.hostile, args.seed, args.jobs, verbose=args.verbose, only=only)
    s = summary(outcomes, time.perf_counter() - started)
    print(f"variants {s['variants']}: failures {s['failures']}; {s['seconds']} s ({args.mode} mode, seed {args.seed})")
    for fam, counts in s["per_family"].items():
        print(f"  {FAMILY_TITLES.get(fam, fam)}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
              + (f"; {s['cpu_seconds'][fam]} CPU s" if fam in s["cpu_seconds"] else ""))
    for m, c in s["per_mutator"].items():
        print(f"    {m:24s} " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())))
    if args.markdown:
        args.markdown.write_text(markdown(s, args))
    if args.json:
        args.json.write_text(json.dumps({**s, "outcomes": [asdict(o) for o in outcomes]}, indent=1))
    return 1 if s["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
