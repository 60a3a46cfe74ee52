"""Benchmarks: traceql ingest and report speed against the baselines, on one input at a time.

    make bench                              # S and M, installs nsys-ai into its own venv, writes bench/RESULTS.md
    make bench SIZES="S M ATTR"             # ATTR: 2 M kernels, 7 M API calls, 16 M NVTX ranges (1.5 GB)
    make bench SIZES="S M ATTR L"           # L: 10 M kernels (several GB, on request)
    python bench/run.py --sizes S --no-real --no-nsys-ai    # no install, nothing written

Per input, in one run and in this order:

1. floor: Python's sqlite3 reads every column that ingest reads (schemas/nsys/raw.sql),
   one `SELECT count(*), total(col), ..., sum(length(textcol))` per table;
2. SQLite baseline: the reports computed by SQL directly over the source file, the way
   `nsys stats` does (cuda_gpu_kern_sum, cuda_api_sum, cuda_gpu_sum + cuda_api_sum for the
   summary, nvtx_gpu_proj_sum's containment join for the range report), with a timeout;
3. traceql ingest as a CLI child process (wall time, peak RSS by os.wait4, and the
   statement profile that TRACEQL_TIMING=1 prints);
4. traceql reports in-process (Workspace API: the query alone, workspace already open)
   and as CLI child processes (Python start-up, imports, opening the workspace, printing);
5. nsys-ai 0.3.0 (from PyPI, in its own venv, bench/data/nsysai-venv): `warm` on a cold
   cache, then the operations it offers, as CLI processes and in-process.

Generated inputs (fixtures/gen_nsys.py) and workspaces are cached in bench/data/
(git-ignored). Before each input the harness waits, for up to --wait-max seconds in all,
until the 1-minute load average is below --wait-load; every measurement records the load."""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "bench" / "data"
TRACES = REPO.parent / "shared" / "traces"
RAW_SQL = REPO / "schemas" / "nsys" / "raw.sql"
INPROC_NSYSAI = Path(__file__).resolve().parent / "nsysai_inproc.py"

# In-process measurements import the traceql of this tree, like the CLI children
# (PYTHONPATH=REPO), not whichever one is installed.
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

NSYSAI_VERSION = "0.3.0"
SIZES = {
    "S": dict(kernels=100_000),
    "M": dict(kernels=1_000_000),
    "ATTR": dict(kernels=2_000_000, nvtx_per_kernel=8, api_per_kernel=3.5),
    "L": dict(kernels=10_000_000),
}
OPS = ("kernel", "api", "range", "summary")
# What traceql runs for each operation (CLI arguments after --db DB).
TRACEQL_CLI = {
    "kernel": ["report", "--by", "kernel"],
    "api": ["report", "--by", "api"],
    "range": ["report", "--by", "range"],
    "summary": ["summary"],
}
# The nearest nsys-ai 0.3.0 operation (CLI arguments before the profile path); None: it has none.
NSYSAI_CLI = {
    "kernel": ["skill", "run", "top_kernels"],
    "api": None,
    "range": ["skill", "run", "nvtx_layer_breakdown"],
    "summary": ["summary"],
}


def load1() -> float:
    return round(os.getloadavg()[0], 2)


# -- child processes ------------------------------------------------------------------------

@dataclass
class Proc:
    secs: float
    rss_mb: float
    rc: int
    out: str
    err: str
    load: float
    timed_out: bool = False
    cpu: float | None = None  # the child's user + system CPU seconds (os.wait4): barely moves with the load


def run_child(args: list[str], env: dict | None = None, timeout: float | None = None,
              cwd: Path = REPO) -> Proc:
    """Run args, return wall time and the child's own peak RSS (os.wait4). Output goes to
    temporary files, so neither pipe can fill; on timeout the process group is killed."""
    load = load1()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        proc = subprocess.Popen(args, stdout=out, stderr=err, stdin=subprocess.DEVNULL, cwd=cwd,
                                env={**os.environ, **(env or {})}, start_new_session=True)
        expired = threading.Event()

        def kill():
            expired.set()
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

        timer = threading.Timer(timeout, kill) if timeout else None
        if timer:
            timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            if timer:
                timer.cancel()
        secs = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here; keep Popen from waiting again
        out.seek(0)
        err.seek(0)
        return Proc(secs, usage.ru_maxrss * 1024 / 1e6, proc.returncode, out.read(), err.read(), load,
                    expired.is_set(), usage.ru_utime + usage.ru_stime)


def best_of(fn, runs: int, budget: float):
    """Call fn() up to `runs` times, stopping early once `budget` seconds are spent; return
    (results, best) where best has the smallest .secs (or ['secs'])."""
    results, spent = [], 0.0
    for _ in range(runs):
        r = fn()
        results.append(r)
        secs = r.secs if isinstance(r, Proc) else r["secs"]
        if secs is None:  # timed out or failed: do not repeat
            break
        spent += secs
        if spent >= budget:
            break
    ok = [r for r in results if (r.secs if isinstance(r, Proc) else r["secs"]) is not None]
    key = (lambda r: r.secs) if isinstance(results[0], Proc) else (lambda r: r["secs"])
    return results, (min(ok, key=key) if ok else results[-1])


# -- inputs ---------------------------------------------------------------------------------

def generated(size: str, data: Path = DATA) -> Path:
    data.mkdir(parents=True, exist_ok=True)
    path = data / f"nsys3_{size}.sqlite"
    if not path.exists():
        opts = SIZES[size]
        part = path.with_name(path.name + ".part")
        cmd = [sys.executable, "-m", "fixtures.gen_nsys", "--layout", "3", "--kernels", str(opts["kernels"]),
               "-q", "--force", "-o", str(part)]
        if "nvtx_per_kernel" in opts:
            cmd += ["--nvtx-per-kernel", str(opts["nvtx_per_kernel"]), "--api-per-kernel", str(opts["api_per_kernel"])]
        log(f"generating {path.name} ...")
        p = run_child(cmd, env={"PYTHONPATH": str(REPO)})
        if p.rc != 0:
            raise SystemExit(f"generating {path.name} failed:\n{p.err}")
        part.rename(path)
    return path


def largest_real() -> Path | None:
    files = sorted(TRACES.glob("*/*.sqlite"), key=lambda p: p.stat().st_size) if TRACES.is_dir() else []
    return files[-1] if files else None


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')} load {load1():.2f}] {msg}", file=sys.stderr, flush=True)


def wait_for_quiet(threshold: float, deadline: float) -> float:
    """Poll until the 1-minute load average is below threshold or the deadline passes;
    return the seconds waited."""
    started = time.time()
    announced = False
    while load1() >= threshold and time.time() < deadline:
        if not announced:
            log(f"waiting for the 1-minute load average to fall below {threshold}")
            announced = True
        time.sleep(min(15.0, max(0.0, deadline - time.time())))
    return time.time() - started


# -- SQLite: the floor and the nsys-stats-style baseline ---------------------------------------

def sqlite_open(src: Path) -> sqlite3.Connection:
    # Read-only and immutable, as nsys stats opens the export.
    return sqlite3.connect(f"file:{src}?mode=ro&immutable=1", uri=True)


def raw_columns(raw_sql: Path = RAW_SQL) -> dict[str, list[tuple[str, str]]]:
    """The tables and columns ingest reads: {table: [(column, duckdb type), ...]}."""
    text = re.sub(r"--[^\n]*", "", raw_sql.read_text())
    out = {}
    for table, body in re.findall(r"CREATE TABLE (\w+) \((.*?)\);", text, flags=re.S):
        cols = []
        for part in body.split(","):
            name, typ = part.split()
            cols.append((name.strip('"'), typ))
        out[table] = cols
    return out


def file_columns(con: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in con.execute(f'PRAGMA table_info("{table}")')}


def floor_queries(con: sqlite3.Connection) -> list[str]:
    """One scan per source table ingest reads, touching exactly the columns ingest reads
    that the file has: integers summed with total() (no overflow), text by its length."""
    queries = []
    for table, cols in raw_columns().items():
        have = file_columns(con, table)
        if not have:
            continue
        exprs = ["count(*)"] + [
            (f'sum(length("{c}"))' if t == "VARCHAR" else f'total("{c}")') for c, t in cols if c in have]
        queries.append(f'SELECT {", ".join(exprs)} FROM "{table}"')
    return queries


class QueryTimeout(Exception):
    pass


def sql_timed(con: sqlite3.Connection, sql: str, deadline: float | None) -> list[tuple]:
    """Run sql; abort it (QueryTimeout) once time.perf_counter() passes deadline."""
    if deadline is not None:
        con.set_progress_handler(lambda: 1 if time.perf_counter() > deadline else 0, 20_000)
    try:
        return con.execute(sql).fetchall()
    except sqlite3.OperationalError as exc:
        if deadline is not None and "interrupt" in str(exc):
            raise QueryTimeout from None
        raise
    finally:
        con.set_progress_handler(None, 0)


def _stats_cols(d: str) -> str:
    # nsys stats: count, total, avg, med, min, max, stdev. The median and stdev come from
    # nsys's own SQLite functions; plain SQLite has neither, so the baseline computes the
    # sum of squares (stddev from it in Python) and no median: a lower bound on nsys's work.
    return (f"count(*) AS num, sum({d}) AS total, avg({d}) AS avg, min({d}) AS min, max({d}) AS max, "
            f"total(1.0 * ({d}) * ({d})) AS sq")


def _finish(rows: list[tuple]) -> list[tuple]:
    """(name, num, total, avg, min, max, sq) -> (name, num, total, pct, avg, min, max, stddev)."""
    grand = sum(r[2] or 0 for r in rows) or 1
    out = []
    for name, num, total, avg, mn, mx, sq in rows:
        var = (sq - total * total / num) / (num - 1) if num > 1 else 0.0
        out.append((name, num, total, 100.0 * total / grand, avg, mn, mx, math.sqrt(max(var, 0.0))))
    return out


def baseline_kernel(con, deadline):
    """cuda_gpu_kern_sum: kernels grouped by name id, then named through StringIds."""
    d = '"end" - start'
    return _finish(sql_timed(con, f"""
        WITH summary AS (
            SELECT coalesce(demangledName, shortName) AS nameId, {_stats_cols(d)}
            FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY 1)
        SELECT s.value AS name, num, total, avg, min, max, sq
        FROM summary LEFT JOIN StringIds s ON s.id = summary.nameId
        ORDER BY total DESC""", deadline))


def baseline_api(con, deadline):
    """cuda_api_sum: runtime and driver calls without backtrace duplicates (eventClass 67),
    grouped by name id, named, the _vNNNN suffix stripped."""
    d = '"end" - start'
    where = "WHERE eventClass <> 67" if "eventClass" in file_columns(con, "CUPTI_ACTIVITY_KIND_RUNTIME") else ""
    rows = sql_timed(con, f"""
        WITH summary AS (
            SELECT nameId, {_stats_cols(d)} FROM CUPTI_ACTIVITY_KIND_RUNTIME {where} GROUP BY nameId),
        named AS (
            SELECT CASE WHEN s.value GLOB '*_v[0-9][0-9][0-9][0-9]'
                        THEN substr(s.value, 1, length(s.value) - 6) ELSE s.value END AS name, summary.*
            FROM summary LEFT JOIN StringIds s ON s.id = summary.nameId)
        SELECT name, sum(num), sum(total), sum(total) * 1.0 / sum(num), min(min), max(max), sum(sq)
        FROM named GROUP BY name ORDER BY 3 DESC""", deadline)
    return _finish(rows)


def baseline_memops(con, deadline):
    """cuda_gpu_mem_time_sum: copies by kind ('[CUDA memcpy Host-to-Device]') and memsets."""
    d = '"end" - start'
    parts = []
    if file_columns(con, "CUPTI_ACTIVITY_KIND_MEMCPY"):
        label = "coalesce(e.label, m.copyKind)" if file_columns(con, "ENUM_CUDA_MEMCPY_OPER") else "m.copyKind"
        join = "LEFT JOIN ENUM_CUDA_MEMCPY_OPER e ON e.id = m.copyKind" if "e.label" in label else ""
        parts.append(f"SELECT '[CUDA memcpy ' || {label} || ']' AS name, {_stats_cols(d)} "
                     f"FROM CUPTI_ACTIVITY_KIND_MEMCPY m {join} GROUP BY m.copyKind")
    if file_columns(con, "CUPTI_ACTIVITY_KIND_MEMSET"):
        parts.append(f"SELECT '[CUDA memset]' AS name, {_stats_cols(d)} FROM CUPTI_ACTIVITY_KIND_MEMSET")
    if not parts:
        return []
    return _finish(sql_timed(con, " UNION ALL ".join(parts) + " ORDER BY total DESC", deadline))


def baseline_summary(con, deadline):
    """What an nvprof-style overview costs with nsys stats: cuda_gpu_sum (kernels + memory
    operations) and cuda_api_sum. (No GPU busy time: that needs nsys's own aggregate.)"""
    return baseline_kernel(con, deadline) + baseline_memops(con, deadline) + baseline_api(con, deadline)


def baseline_range(con, deadline):
    """nvtx_gpu_proj_sum: every GPU operation belongs to every NVTX range (same thread,
    started and ended there) that holds its launching API call; per range the projection,
    then grouped by name and style. The containment join as SQLite runs it (§5.4)."""
    have = {t for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")
            if file_columns(con, t)}
    if not have or not file_columns(con, "NVTX_EVENTS") or not file_columns(con, "CUPTI_ACTIVITY_KIND_RUNTIME"):
        return []
    ops = " UNION ALL ".join(f'SELECT start, "end", correlationId, globalPid FROM {t}' for t in sorted(have))
    text = "coalesce(s.value, n.text)" if "textId" in file_columns(con, "NVTX_EVENTS") else "n.text"
    join = "LEFT JOIN StringIds s ON s.id = n.textId" if "s.value" in text else ""
    return sql_timed(con, f"""
        WITH ops AS ({ops}),
        api AS (SELECT start, "end", correlationId, globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME
                WHERE eventClass IN (0, 1)),
        last AS (SELECT max(max(start, coalesce("end", start))) AS ts FROM NVTX_EVENTS),
        rng AS (SELECT n.rowid AS rid, n.start, coalesce(n."end", (SELECT ts FROM last)) AS "end",
                       n.globalTid, n.eventType, {text} AS txt
                FROM NVTX_EVENTS n {join}
                WHERE n.eventType IN (59, 60, 70, 71) AND n.endGlobalTid IS NULL),
        proj AS (
            SELECT rng.rid, min(rng.txt) AS name, min(rng.eventType) AS style,
                   min(rng."end" - rng.start) AS range_dur,
                   max(ops."end") - min(ops.start) AS proj_dur, count(DISTINCT ops.correlationId) AS n_ops
            FROM ops
            JOIN api ON api.correlationId = ops.correlationId AND ops.globalPid = ((api.globalTid >> 24) << 24)
            JOIN rng ON rng.globalTid = api.globalTid AND rng.start <= api.start AND rng."end" >= api."end"
            GROUP BY rng.rid)
        SELECT name, CASE WHEN style IN (59, 70) THEN 'PushPop' ELSE 'StartEnd' END AS style,
               sum(proj_dur) AS total_proj, sum(range_dur) AS total_range, count(*) AS instances,
               avg(proj_dur), min(proj_dur), max(proj_dur), sum(n_ops) AS gpu_ops
        FROM proj GROUP BY 1, 2 ORDER BY total_proj DESC""", deadline)


def baseline_nvtx_sum(con, deadline):
    """nvtx_sum: NVTX ranges by name and style with their CPU durations (no GPU work), the
    CPU half of the range report: a lower bound for it that always finishes."""
    if not file_columns(con, "NVTX_EVENTS"):
        return []
    d = 'coalesce(n."end", (SELECT ts FROM last)) - n.start'
    text = "coalesce(s.value, n.text)" if "textId" in file_columns(con, "NVTX_EVENTS") else "n.text"
    join = "LEFT JOIN StringIds s ON s.id = n.textId" if "s.value" in text else ""
    return _finish([r[:1] + r[2:] for r in sql_timed(con, f"""
        WITH last AS (SELECT max(max(start, coalesce("end", start))) AS ts FROM NVTX_EVENTS)
        SELECT {text} AS name, n.eventType IN (59, 70) AS pushpop, {_stats_cols(d)}
        FROM NVTX_EVENTS n {join} WHERE n.eventType IN (59, 60, 70, 71)
        GROUP BY 1, 2 ORDER BY total DESC""", deadline)])


BASELINES = {"kernel": baseline_kernel, "api": baseline_api, "range": baseline_range,
             "summary": baseline_summary, "nvtx_sum": baseline_nvtx_sum}


def measure_floor(src: Path) -> dict:
    load = load1()
    con = sqlite_open(src)
    try:
        queries = floor_queries(con)
        started, cpu = time.perf_counter(), time.process_time()
        rows = sum(con.execute(q).fetchone()[0] for q in queries)
        secs, cpu = time.perf_counter() - started, time.process_time() - cpu
    finally:
        con.close()
    return dict(secs=secs, cpu=cpu, rows=rows, tables=len(queries), load=load)


def measure_baseline(src: Path, op: str, timeout: float) -> dict:
    load = load1()
    con = sqlite_open(src)
    try:
        started = time.perf_counter()
        try:
            rows = BASELINES[op](con, started + timeout)
        except QueryTimeout:
            return dict(secs=None, timeout=timeout, rows=None, load=load, checks=None)
        secs = time.perf_counter() - started
    finally:
        con.close()
    checks = None
    if op in ("kernel", "api"):
        checks = dict(groups=len(rows), calls=sum(r[1] for r in rows), total_ns=sum(r[2] or 0 for r in rows))
    return dict(secs=secs, timeout=timeout, rows=len(rows), load=load, checks=checks)


# -- traceql --------------------------------------------------------------------------------

def traceql_cmd(db: Path) -> list[str]:
    return [sys.executable, "-m", "traceql", "--db", str(db)]


def scrub(sql: str) -> str:
    """Quoted absolute paths in a statement (LOAD, ATTACH) shortened to their file name, so
    that no path of this machine lands in RESULTS.md."""
    return re.sub(r"'(/[^']*)('|$)", lambda m: "'.../" + Path(m.group(1)).name + m.group(2), sql)


TIMING_LINE = re.compile(r"\[traceql timing\]\s+([\d.]+) s  (?:cpu\s+([\d.]+) s  )?(.*)")


# Ingest phases, told apart by the start of each statement (TRACEQL_TIMING prints 90 characters).
PHASES = [
    ("read from SQLite (staging through sqlite_scanner)", re.compile(r'^INSERT INTO raw\."')),
    ("Kineto JSON: staged events, typed events, GPU events and calls (raw.kineto_*)", re.compile(r"raw\.kineto_")),
    ("PyTorch ops (torch_op, kernel_op)", re.compile(r"torch|kop_|kernel_op", re.I)),
    ("correlation and attribution (launch, op_range, range_gpu)", re.compile(r"op_range|range_gpu|launch", re.I)),
    ("NVTX ranges: staging, ids, nesting, nvtx_range/nvtx_mark", re.compile(r"nvtx", re.I)),
    ("diagnostics (ingest_stats)", re.compile(r"stats", re.I)),
    ("contract tables (kernel, api_call, memcpy, memset, ...)", re.compile(r"^INSERT INTO ")),
    ("other (extension load, attach, DDL, checkpoint)", re.compile(r"")),
]


def phase_of(sql: str) -> str:
    return next(name for name, rx in PHASES if rx.search(sql))


def parse_timing(stderr: str, top: int = 8) -> dict:
    stmts = [(float(m.group(1)), float(m.group(2) or "nan"), scrub(m.group(3)))
             for m in map(TIMING_LINE.match, stderr.splitlines()) if m]
    total = sum(s for s, _, _ in stmts)
    phases = {name: [0.0, 0, 0.0] for name, _ in PHASES}
    for secs, cpu, sql in stmts:
        phases[phase_of(sql)][0] += secs
        phases[phase_of(sql)][1] += 1
        phases[phase_of(sql)][2] += cpu  # the process's CPU seconds (DuckDB's threads included)
    every = [dict(secs=s, cpu=c, sql=q) for s, c, q in stmts]  # in the order they ran
    stmts.sort(key=lambda s: -s[0])
    return dict(statements=len(stmts), total=total, top=[dict(secs=s, cpu=c, sql=q) for s, c, q in stmts[:top]],
                phases=[dict(phase=k, secs=v[0], statements=v[1], cpu=v[2]) for k, v in phases.items() if v[1]],
                every=every)


def measure_ingest(src: Path, db: Path, runs: int, budget: float) -> dict:
    def once():
        for p in (db, db.with_name(db.name + ".wal")):
            p.unlink(missing_ok=True)
        p = run_child(traceql_cmd(db) + ["ingest", str(src)],
                      env={"PYTHONPATH": str(REPO), "TRACEQL_TIMING": "1"})
        if p.rc != 0:
            raise SystemExit(f"traceql ingest failed ({p.rc}):\n{p.err[-2000:]}")
        return p

    results, best = best_of(once, runs, budget)
    return dict(secs=best.secs, cpu=best.cpu, runs=len(results), rss_mb=max(r.rss_mb for r in results),
                load=best.load, profile=parse_timing(best.err), db_mb=db.stat().st_size / 1e6)


def measure_traceql_inproc(db: Path, runs: int, budget: float) -> dict:
    """Each operation through the Workspace API: the query alone. Every run opens the
    workspace afresh (not timed), as the nsys-ai in-process numbers do; the modules the
    reports use are imported first (a one-time ~0.1 s, mostly sqlglot, not a query cost)."""
    import traceql
    import traceql.query.reports  # noqa: F401

    calls = {
        "kernel": lambda ws, **kw: ws.report("kernel", **kw),
        "api": lambda ws, **kw: ws.report("api", **kw),
        "range": lambda ws, **kw: ws.report("range", **kw),
        "summary": lambda ws, **kw: ws.summary(**kw),
    }
    out = {}
    for op in OPS:
        def once(op=op, recompute=False):
            load = load1()
            t0 = time.perf_counter()
            ws = traceql.open(db)
            opened = time.perf_counter() - t0
            try:
                t0 = time.perf_counter()
                result = calls[op](ws, recompute=recompute)
                return dict(secs=time.perf_counter() - t0, open=opened, load=load, result=result)
            finally:
                ws.close()

        results, best = best_of(once, runs, budget)
        # the same report computed from the contract tables, not read from what ingest stored
        computed, best_computed = best_of(lambda op=op: once(op, recompute=True), runs, budget)
        entry = dict(first=results[0]["secs"], secs=best["secs"], runs=len(results), load=results[0]["load"],
                     open=results[0]["open"], computed=best_computed["secs"], computed_runs=len(computed))
        res = best["result"]
        if op in ("kernel", "api"):
            entry["checks"] = dict(groups=res.num_rows, calls=sum(res.column("calls").to_pylist()),
                                   total_ns=sum(res.column("total_ns").to_pylist()))
        out[op] = entry
    return out


def measure_traceql_cli(db: Path, runs: int, budget: float) -> dict:
    out = {}
    env = {"PYTHONPATH": str(REPO)}
    for op, args in [("startup", ["sql", "SELECT 1"])] + [(op, TRACEQL_CLI[op]) for op in OPS]:
        def once(args=args):
            p = run_child(traceql_cmd(db) + args, env=env)
            if p.rc != 0:
                raise SystemExit(f"traceql {' '.join(args)} failed ({p.rc}):\n{p.err[-2000:]}")
            return p

        results, best = best_of(once, runs, budget)
        out[op] = dict(secs=best.secs, cpu=best.cpu, runs=len(results), rss_mb=max(r.rss_mb for r in results), load=best.load)
    return out


# -- nsys-ai --------------------------------------------------------------------------------

@dataclass
class NsysAi:
    venv: Path
    home: Path  # HOME for nsys-ai: DuckDB's autoloader finds sqlite_scanner under it
    version: str = ""
    duckdb: str = ""
    problem: str = ""

    @property
    def exe(self) -> Path:
        return self.venv / "bin" / "nsys-ai"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    def env(self) -> dict:
        return {"HOME": str(self.home), "NO_COLOR": "1", "PYTHONPATH": ""}


def setup_nsysai(venv: Path, home: Path) -> str:
    """Create venv with nsys-ai NSYSAI_VERSION from the package index. The machine has no
    access to DuckDB's extension server, so nsys-ai's DuckDB is pinned to traceql's version
    and gets the same sqlite_scanner build from PyPI, placed where DuckDB's autoloader looks
    ($HOME/.duckdb/extensions/...; HOME is a folder next to the venv). Returns a problem or ''."""
    import duckdb

    stamp = venv / ".installed"
    if stamp.exists():
        return ""
    shutil.rmtree(venv, ignore_errors=True)
    ver = duckdb.__version__
    steps = [
        [sys.executable, "-m", "venv", str(venv)],
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", f"nsys-ai=={NSYSAI_VERSION}",
         f"duckdb=={ver}", f"duckdb-extension-sqlite-scanner=={ver}"],
    ]
    for cmd in steps:
        log(" ".join(cmd[-4:]))
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            return f"`{' '.join(cmd[2:4])}` failed: {(p.stderr.strip().splitlines() or ['?'])[-1]}"
    probe = subprocess.run(
        [str(venv / "bin" / "python"), "-c",
         "import duckdb, duckdb_extension_sqlite_scanner as e, pathlib;"
         "print(duckdb.connect().execute('PRAGMA platform').fetchone()[0]);"
         "print(pathlib.Path(e.__file__).parent / 'extensions' / ('v' + duckdb.__version__)"
         " / 'sqlite_scanner.duckdb_extension')"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"probing the venv's DuckDB failed: {probe.stderr.strip()[-300:]}"
    plat, ext = probe.stdout.split()
    target = home / ".duckdb" / "extensions" / f"v{ver}" / plat
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy2(ext, target / "sqlite_scanner.duckdb_extension")
    stamp.write_text(f"nsys-ai=={NSYSAI_VERSION} duckdb=={ver}\n")
    return ""


def find_nsysai(venv: Path, home: Path) -> NsysAi:
    n = NsysAi(venv, home)
    if not n.exe.exists():
        n.problem = f"not installed (no {n.exe.relative_to(REPO) if n.exe.is_relative_to(REPO) else n.exe}; `make bench` installs it)"
        return n
    p = subprocess.run([str(n.python), "-c", "import importlib.metadata as m, duckdb;"
                        "print(m.version('nsys-ai'), duckdb.__version__)"],
                       capture_output=True, text=True, env={**os.environ, **n.env()})
    if p.returncode != 0:
        n.problem = f"broken venv: {p.stderr.strip()[-200:]}"
        return n
    n.version, n.duckdb = p.stdout.split()
    return n


def nsysai_input(src: Path, data: Path) -> Path:
    """nsys-ai writes its cache next to the profile (X.nsys-cache). Generated inputs live in
    data/ already; a real trace is linked into data/nsysai-inputs/ so that its read-only
    folder is never written."""
    if src.parent.resolve() == data.resolve():
        return src
    link_dir = data / "nsysai-inputs"
    link_dir.mkdir(parents=True, exist_ok=True)
    link = link_dir / src.name
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(src.resolve())
    return link


def _failure(p: Proc) -> str:
    if p.timed_out:
        return f"did not finish in {p.secs:.0f} s"
    lines = [ln for ln in (p.err + p.out).strip().splitlines() if ln.strip()]
    return f"exit {p.rc}: {lines[-1][:200] if lines else 'no output'}"


def measure_nsysai(n: NsysAi, src: Path, data: Path, runs: int, budget: float, timeout: float) -> dict:
    if n.problem:
        return dict(problem=n.problem)
    path = nsysai_input(src, data)
    cache = path.with_suffix(".nsys-cache")
    shutil.rmtree(cache, ignore_errors=True)
    out: dict = dict(version=n.version, duckdb=n.duckdb)
    # warm: build the Parquet cache and the NVTX kernel map (its analogue of ingest), cold.
    p = run_child([str(n.exe), "warm", str(path)], env=n.env(), timeout=timeout, cwd=data)
    prep = dict(secs=p.secs, cpu=p.cpu, rss_mb=p.rss_mb, load=p.load)
    if p.rc != 0:
        prep["problem"] = _failure(p)
    m = re.search(r"base tables:.*?in ([\d.]+)s", p.out)
    k = re.search(r"nvtx kernel map:.*?, ([\d.]+)s\)", p.out)
    prep["parquet_s"] = float(m.group(1)) if m else None
    prep["nvtx_map_s"] = float(k.group(1)) if k else None
    out["prepare"] = prep
    cli = {}
    for op in OPS:
        args = NSYSAI_CLI[op]
        if args is None:
            cli[op] = dict(problem="no equivalent operation")
            continue

        def once(args=args):
            q = run_child([str(n.exe)] + args + [str(path)], env=n.env(), timeout=timeout, cwd=data)
            return q if q.rc == 0 else Proc(None, q.rss_mb, q.rc, q.out, q.err, q.load, q.timed_out)

        results, best = best_of(once, runs, budget)
        if best.secs is None:
            cli[op] = dict(problem=_failure(best), load=best.load)
        else:
            cli[op] = dict(secs=best.secs, cpu=best.cpu, runs=len(results), rss_mb=max(r.rss_mb for r in results),
                           load=best.load)
    out["cli"] = cli
    q = run_child([str(n.python), str(INPROC_NSYSAI), str(path), "--runs", str(runs), "--budget", str(budget)],
                  env=n.env(), timeout=timeout * 3, cwd=data)
    if q.rc == 0:
        out["inproc"] = json.loads(q.out.strip().splitlines()[-1])
    else:
        out["inproc"] = dict(problem=_failure(q))
    return out


# -- one input ------------------------------------------------------------------------------

def source_counts(src: Path) -> dict:
    con = sqlite_open(src)
    out = {}
    try:
        for key, table in [("kernels", "CUPTI_ACTIVITY_KIND_KERNEL"), ("api", "CUPTI_ACTIVITY_KIND_RUNTIME"),
                           ("nvtx", "NVTX_EVENTS"), ("memcpy", "CUPTI_ACTIVITY_KIND_MEMCPY"),
                           ("memset", "CUPTI_ACTIVITY_KIND_MEMSET")]:
            out[key] = con.execute(f"SELECT count(*) FROM {table}").fetchone()[0] if file_columns(con, table) else 0
    finally:
        con.close()
    return out


def measure(name: str, src: Path, *, data: Path = DATA, nsysai: NsysAi | None = None, runs: int = 3,
            budget: float = 20.0, timeout: float = 60.0, nsysai_timeout: float = 1800.0) -> dict:
    """Every measurement on one input, in a fixed order (see the module docstring)."""
    data.mkdir(parents=True, exist_ok=True)
    db = data / f"{src.stem}.duckdb"
    r: dict = dict(name=name, file=src.name, size_mb=src.stat().st_size / 1e6, counts=source_counts(src),
                   started=time.strftime("%H:%M:%S"), load_start=load1())
    log(f"{name}: floor")
    _, r["floor"] = best_of(lambda: measure_floor(src), runs, budget)
    r["baseline"] = {}
    for op in ("kernel", "api", "summary", "nvtx_sum", "range"):
        log(f"{name}: SQLite baseline {op}")
        results, best = best_of(lambda op=op: measure_baseline(src, op, timeout), runs, budget)
        r["baseline"][op] = {**best, "runs": len(results)}
    log(f"{name}: traceql ingest")
    r["ingest"] = measure_ingest(src, db, runs, budget)
    log(f"{name}: traceql reports in-process")
    r["inproc"] = measure_traceql_inproc(db, runs, budget)
    log(f"{name}: traceql reports as CLI processes")
    r["cli"] = measure_traceql_cli(db, runs, budget)
    if nsysai is not None:
        log(f"{name}: nsys-ai")
        r["nsysai"] = measure_nsysai(nsysai, src, data, runs, budget, nsysai_timeout)
    r["load_end"] = load1()
    return r


# -- the report -----------------------------------------------------------------------------

def fs(x: float | None, digits: int = 2) -> str:
    if x is None:
        return "—"
    if x < 0.01:
        return f"{x * 1000:.1f} ms"
    return f"{x:.{digits}f}"


def fsu(x: float | None, digits: int = 2) -> str:
    """fs with its unit: '8.4 ms' or '0.23 s'."""
    text = fs(x, digits)
    return text if text.endswith("ms") or text == "—" else text + " s"


def fx(num: float | None, den: float | None, at_least: bool = False) -> str:
    """A ratio num/den as 'N×' ('≥ N×' when num is a lower bound)."""
    if num is None or den is None or den <= 0:
        return "—"
    v = num / den
    text = f"{v:.0f}×" if v >= 20 else f"{v:.1f}×" if v >= 1 else f"{v:.2f}×"
    return ("≥ " + text) if at_least else text


def base_secs(b: dict) -> tuple[float | None, bool]:
    """(seconds, is_lower_bound): a baseline that timed out counts as its timeout, at least."""
    if b.get("secs") is not None:
        return b["secs"], False
    return b.get("timeout"), True


def base_text(b: dict) -> str:
    if b.get("secs") is not None:
        return fs(b["secs"])
    return f"did not finish in {b['timeout']:.0f} s"


def nsysai_secs(entry: dict | None) -> float | None:
    return entry.get("secs") if entry and "problem" not in entry else None


def end_to_end(r: dict) -> tuple[float | None, float | None, list[str]]:
    """traceql ingest + the operations nsys-ai also offers (CLI) vs nsys-ai warm + those."""
    n = r.get("nsysai") or {}
    if "problem" in n or not n:
        return None, None, []
    common = [op for op in OPS if nsysai_secs(n["cli"].get(op)) is not None]
    if "problem" in n["prepare"]:
        return None, None, common
    t = r["ingest"]["secs"] + sum(r["cli"][op]["secs"] for op in common)
    a = n["prepare"]["secs"] + sum(n["cli"][op]["secs"] for op in common)
    return t, a, common


def missed(got: float, limit: float) -> str:
    """How far got is over limit: a percentage when close, else a factor."""
    return f"{100 * (got / limit - 1):.0f}%" if got / limit < 1.5 else f"{got / limit:.1f}×"


def targets(results: list[dict]) -> list[tuple[str, str, str, str]]:
    """(target, input, measured, verdict) rows."""
    rows = []
    for r in results:
        name = r["name"]
        ratio = r["ingest"]["secs"] / r["floor"]["secs"]
        rows.append(("ingest ≤ 4× the floor", name, f"{fs(r['ingest']['secs'])} s = {ratio:.1f}× the floor "
                     f"({fs(r['floor']['secs'])} s)", "met" if ratio <= 4 else f"missed by {missed(ratio, 4)}"))
        if r["name"].endswith(" L"):
            s, mb = r["ingest"]["secs"], r["ingest"]["rss_mb"]
            rows.append(("L: ingest ≤ 60 s", name, f"{s:.1f} s", "met" if s <= 60 else f"missed by {missed(s, 60)}"))
            rows.append(("L: ingest peak ≤ 4 GB", name, f"{mb / 1000:.2f} GB",
                         "met" if mb <= 4000 else f"missed by {missed(mb, 4000)}"))
        if any(r["name"].endswith(s) for s in (" M", " L", " ATTR")):
            for op in OPS:
                b, lower = base_secs(r["baseline"][op])
                t = r["inproc"][op]["secs"]
                speed = b / t
                verdict = ("met" if speed >= 20 else
                           ("not shown (baseline timed out: at least this)" if lower else
                            f"missed: {speed:.1f}× (needs {20 / speed:.1f}× more)"))
                cp = r["inproc"][op].get("computed")
                rows.append((f"report --by {op} ≥ 20× faster than the SQLite baseline" if op != "summary"
                             else "summary ≥ 20× faster than the SQLite baseline", name,
                             f"{fx(b, t, lower)} ({fsu(t)} in-process vs {base_text(r['baseline'][op])}); "
                             f"computed: {fx(b, cp, lower)} ({fsu(cp)})", verdict))
        if r["name"].endswith(" L"):
            for op in OPS:
                t = r["inproc"][op]["secs"]
                rows.append((f"{op}: under 0.5 s", name, f"{fsu(t)} in-process, {fsu(r['cli'][op]['secs'])} CLI, "
                             f"computed {fsu(r['inproc'][op].get('computed'))}",
                             "met" if t < 0.5 else f"missed by {missed(t, 0.5)}"))
        t, a, common = end_to_end(r)
        if t is not None:
            rows.append(("faster than nsys-ai end to end", name,
                         f"{fs(t)} s vs {fs(a)} s ({', '.join(common)}; nsys-ai ÷ traceql = {fx(a, t)})",
                         "met" if t < a else f"missed by {missed(t, a)}"))
        elif r.get("nsysai"):
            why = r["nsysai"].get("problem") or r["nsysai"].get("prepare", {}).get("problem")
            rows.append(("faster than nsys-ai end to end", name, f"nsys-ai could not run: {why}", "n/a"))
    return rows


def render(results: list[dict], meta: dict) -> str:
    L: list[str] = []
    add = L.append
    add("# Benchmark results")
    add("")
    add(f"Written by `{meta['command']}` on {meta['date']}, measuring traceql {meta.get('rev', '?')}. "
        f"Machine: {meta['machine']}. "
        f"Python {meta['python']}, DuckDB {meta['duckdb']}, SQLite {meta['sqlite']}"
        + (f", nsys-ai {meta['nsysai']} (DuckDB {meta['nsysai_duckdb']})" if meta.get("nsysai") else "") + ".")
    add("")
    if not meta.get("wait_max"):
        waiting = "The harness did not wait for a quiet machine (no --wait-load)."
    elif meta["waited"] >= meta["wait_max"] - 1:
        waiting = (f"Before each input the harness waited for the 1-minute load average to fall below "
                   f"{meta['wait_load']}; it did not within the cap of {meta['wait_max']:.0f} s, so these "
                   "measurements ran while other work kept the machine busy.")
    else:
        waiting = (f"Before each input the harness waited until the 1-minute load average was below "
                   f"{meta['wait_load']} (waited {meta['waited']:.0f} s in all, cap {meta['wait_max']:.0f} s).")
    add(f"Load: the 2 cores are shared with other work. {waiting} The `load` columns give "
        "`os.getloadavg()[0]` when each measurement started; the benchmark itself accounts for about 1, "
        "anything above that is other work sharing the CPU and slowing that number.")
    add("")
    add("All times are wall seconds; `first` is the first call, other times the best of up to "
        f"{meta['runs']} runs (fewer when the runs took over {meta['budget']:.0f} s). "
        "In-process = the call alone on an open connection (traceql: `traceql.open(db).report(...)`; "
        "SQLite: Python's sqlite3 on the open file); CLI = a fresh child process (Python start-up, "
        "imports, opening the workspace, printing the table), peak RSS from `os.wait4`. "
        "Files are in the page cache (generated or read just before).")
    add("")
    add("## Inputs")
    add("")
    add("| input | file | size (MB) | kernels | API calls | NVTX events | memcpy | memset |")
    add("|---|---|---:|---:|---:|---:|---:|---:|")
    for r in results:
        c = r["counts"]
        add(f"| {r['name']} | {r['file']} | {r['size_mb']:.0f} | {c['kernels']:,} | {c['api']:,} | {c['nvtx']:,} "
            f"| {c['memcpy']:,} | {c['memset']:,} |")
    add("")
    add("## Ingest")
    add("")
    add("Floor = Python's sqlite3 scanning every column ingest reads (a count, `total()` of each "
        "number column, `sum(length())` of each text column, one query per table of "
        "`schemas/nsys/raw.sql`). traceql ingest = `traceql ingest FILE` into a new workspace "
        "(staging, normalizing, NVTX nesting, correlation and attribution, writing the workspace). "
        "nsys-ai warm = `nsys-ai warm FILE` on a cold cache (Parquet cache + NVTX kernel map), its "
        "preparation step.")
    add("")
    add("| input | floor (s) | traceql ingest (s) | ingest ÷ floor | peak RSS (MB) | workspace (MB) "
        "| nsys-ai warm (s) | nsys-ai peak RSS (MB) | nsys-ai ÷ traceql | load (floor / ingest / warm) |")
    add("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in results:
        i, f = r["ingest"], r["floor"]
        n = r.get("nsysai") or {}
        prep = n.get("prepare") or {}
        ok = prep and "problem" not in prep
        warm = fs(prep["secs"]) if ok else (n.get("problem") or prep.get("problem") or "—")
        warm_rss = f"{prep['rss_mb']:.0f}" if ok else "—"
        warm_load = f"{prep['load']:.2f}" if prep else "—"
        add(f"| {r['name']} | {fs(f['secs'])} | {fs(i['secs'])} | {fx(i['secs'], f['secs'])} | {i['rss_mb']:.0f} "
            f"| {i['db_mb']:.0f} | {warm} | {warm_rss} | {fx(prep['secs'], i['secs']) if ok else '—'} "
            f"| {f['load']:.2f} / {i['load']:.2f} / {warm_load} |")
    add("")
    add("The same runs in CPU seconds (user + system of the process and its threads; wall time follows "
        "the load of other jobs on the machine, CPU time barely does). The floor is one thread; traceql and "
        "nsys-ai use DuckDB's threads (two here).")
    add("")
    add("| input | floor CPU (s) | traceql ingest CPU (s) | CPU ÷ floor | nsys-ai warm CPU (s) | nsys-ai ÷ traceql (CPU) |")
    add("|---|---:|---:|---:|---:|---:|")
    for r in results:
        i, f = r["ingest"], r["floor"]
        prep = (r.get("nsysai") or {}).get("prepare") or {}
        ok = prep.get("cpu") is not None and "problem" not in prep
        if i.get("cpu") is None or f.get("cpu") is None:
            continue  # figures of a run before CPU time was recorded
        add(f"| {r['name']} | {fs(f['cpu'])} | {fs(i['cpu'])} | {fx(i['cpu'], f['cpu'])} "
            f"| {fs(prep['cpu']) if ok else '—'} | {fx(prep['cpu'], i['cpu']) if ok else '—'} |")
    add("")
    add("## Reports")
    add("")
    add("SQLite baseline = the report computed by SQL directly over the source file with Python's "
        "sqlite3, the way `nsys stats` does it (see *Baselines* below). Speed-up = baseline ÷ traceql. "
        "nsys-ai: `skill run top_kernels` (kernel), `skill run nvtx_layer_breakdown` (range), `summary`; "
        "it has no API-call summary. nsys-ai ÷ traceql > 1 means traceql is faster.")
    add("")
    add("traceql's kernel, api and range reports and the summary's sections are stored at ingest "
        "(`traceql/stored.py`): the default columns read those rows. *Computed* is the same call with "
        "`recompute=True` (`--recompute`), which runs the report's SQL over the contract tables, as "
        "every call with `--where` or non-default options does.")
    add("")
    add("| input | report | traceql in-process first / best (s) | computed in-process (s) | traceql CLI (s) "
        "| SQLite baseline (s) | speed-up in-process | speed-up computed | speed-up CLI | nsys-ai CLI (s) "
        "| nsys-ai in-process first / best (s) | nsys-ai ÷ traceql (CLI) | load (traceql / baseline) |")
    add("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in results:
        n = r.get("nsysai") or {}
        for op in OPS:
            ip, cl, b = r["inproc"][op], r["cli"][op], r["baseline"][op]
            bs, lower = base_secs(b)
            ncl = (n.get("cli") or {}).get(op)
            nin = (n.get("inproc") or {}).get(op) if "problem" not in (n.get("inproc") or {}) else None
            ncl_text = (fs(ncl["secs"]) if ncl and "problem" not in ncl else (ncl or {}).get("problem", "—")) \
                if n and "problem" not in n else "—"
            nin_text = f"{fs(nin['first'])} / {fs(nin['secs'])}" if nin and "secs" in nin else "—"
            label = f"`report --by {op}`" if op != "summary" else "`summary`"
            cp = ip.get("computed")
            add(f"| {r['name']} | {label} | {fs(ip['first'])} / {fs(ip['secs'])} | {fs(cp)} | {fs(cl['secs'])} "
                f"| {base_text(b)} | {fx(bs, ip['secs'], lower)} | {fx(bs, cp, lower)} | {fx(bs, cl['secs'], lower)} "
                f"| {ncl_text} | {nin_text} "
                f"| {fx(nsysai_secs(ncl), cl['secs'])} | {ip['load']:.2f} / {b['load']:.2f} |")
        nvs = r["baseline"]["nvtx_sum"]
        add(f"| {r['name']} | (range, CPU half only: `nvtx_sum`) | | | | {base_text(nvs)} "
            f"| {fx(base_secs(nvs)[0], r['inproc']['range']['secs'])} "
            f"| {fx(base_secs(nvs)[0], r['inproc']['range'].get('computed'))} "
            f"| {fx(base_secs(nvs)[0], r['cli']['range']['secs'])} | | | | {nvs['load']:.2f} |")
        st = r["cli"]["startup"]
        add(f"| {r['name']} | (CLI start-up: `traceql sql 'SELECT 1'`) | | | {fs(st['secs'])} | | | | | | | "
            f"| {st['load']:.2f} |")
    add("")
    add("Same answers: the traceql kernel and API reports were checked against the SQLite baseline "
        "(number of names, calls, summed time): " + "; ".join(
            f"{r['name']}: " + ", ".join(f"{op} {check(r, op)}" for op in ("kernel", "api")) for r in results) + ".")
    add("")
    add("## End to end against nsys-ai")
    add("")
    add("A fresh file to answers, as CLI processes: traceql ingest + each report nsys-ai also offers, "
        "against nsys-ai warm (cold cache) + its operations.")
    add("")
    add("| input | operations | traceql (s) | nsys-ai (s) | nsys-ai ÷ traceql |")
    add("|---|---|---:|---:|---:|")
    for r in results:
        t, a, common = end_to_end(r)
        n = r.get("nsysai") or {}
        if t is None:
            why = n.get("problem") or (n.get("prepare") or {}).get("problem") or "not measured"
            add(f"| {r['name']} | — | {fs(r['ingest']['secs'])} (ingest) | {why} | — |")
        else:
            add(f"| {r['name']} | prepare + {', '.join(common)} | {fs(t)} | {fs(a)} | {fx(a, t)} |")
    add("")
    add("## Targets")
    add("")
    add("| target | input | measured | verdict |")
    add("|---|---|---|---|")
    for row in targets(results):
        add("| " + " | ".join(row) + " |")
    add("")
    add("## Where ingest time goes")
    add("")
    add("`TRACEQL_TIMING=1 traceql ingest FILE` prints each statement's wall time (the measured run "
        "above had it on). The slowest statements per input, with their share of the summed "
        "statement time:")
    for r in results:
        p = r["ingest"]["profile"]
        add("")
        add(f"**{r['name']}**: {p['statements']} statements, {p['total']:.2f} s of {r['ingest']['secs']:.2f} s "
            f"wall (the rest: Python start-up, detection, renaming).")
        add("")
        if p.get("phases"):
            add("| phase | statements | s | share | ÷ floor |")
            add("|---|---:|---:|---:|---:|")
            for ph in p["phases"]:
                add(f"| {ph['phase']} | {ph['statements']} | {ph['secs']:.2f} | "
                    f"{100 * ph['secs'] / (p['total'] or 1):.0f}% | {fx(ph['secs'], r['floor']['secs'])} |")
            add("")
        add("| s | share | statement (start) |")
        add("|---:|---:|---|")
        for s in p["top"]:
            sql = s["sql"].replace("|", "\\|")
            add(f"| {s['secs']:.2f} | {100 * s['secs'] / (p['total'] or 1):.0f}% | `{sql[:80]}` |")
    n_pre = [(r["name"], r["nsysai"]["prepare"]) for r in results
             if r.get("nsysai") and "prepare" in r["nsysai"] and "problem" not in r["nsysai"]["prepare"]]
    if n_pre:
        add("")
        add("nsys-ai warm, split as it reports it: " + "; ".join(
            f"{name}: Parquet cache {fs(p['parquet_s'])} s, NVTX kernel map {fs(p['nvtx_map_s'])} s" for name, p in n_pre)
            + ".")
    add("")
    add(BASELINE_NOTES)
    return "\n".join(L) + "\n"


def check(r: dict, op: str) -> str:
    b = r["baseline"][op].get("checks")
    t = r["inproc"][op].get("checks")
    if not b or not t:
        return "not compared"
    same = (b["calls"] == t["calls"] and int(b["total_ns"]) == int(t["total_ns"]))
    return ("agrees" if same else f"DIFFERS (traceql {t}, baseline {b})") + f" ({t['groups']} names)"


BASELINE_NOTES = """## Baselines

- **Floor**: what SQLite alone needs to read the input ingest reads; nothing can ingest faster
  through SQLite. Python's `sqlite3` (the SQLite C library), file opened `mode=ro&immutable=1`.
- **SQLite baseline**, the `nsys stats` reports as SQL over the export (nsys runs its report
  scripts on the SQLite file, `../shared/reference/nsys-sqlite-schema.md` §5):
  - `report --by kernel` ↔ `cuda_gpu_kern_sum`: KERNEL grouped by `demangledName`, named through
    `StringIds`;
  - `report --by api` ↔ `cuda_api_sum`: RUNTIME without `eventClass` 67 (backtrace duplicates),
    grouped by `nameId`, `_vNNNN` stripped;
  - `summary` ↔ `cuda_gpu_sum` (kernels, and memory operations by copy kind) + `cuda_api_sum`;
    traceql's summary also computes each GPU's busy time (the union of its intervals), which
    nsys does with its own `unique_duration` aggregate: left out of the baseline;
  - `report --by range` ↔ `nvtx_gpu_proj_sum`: the containment join of §5.4 (each GPU operation
    ⨝ its launching call on correlation id and process, ⨝ every NVTX range on that thread that
    holds the call), projected per range and grouped by name. It runs under a timeout; when it
    does not finish the speed-up is a lower bound (`≥`). `nvtx_sum` (ranges by name with CPU
    times only) is listed as the part that always finishes.
  - Every baseline computes count, sum, mean, min, max and the sum of squares (for the standard
    deviation) but no median: nsys gets `median` and `stdev` from its own SQLite functions, plain
    SQLite has neither. So the baseline does less than nsys stats does; the speed-ups are
    conservative.
- **nsys-ai** 0.3.0 from PyPI, in its own venv (`bench/data/nsysai-venv`, made by `make bench`).
  This machine cannot reach DuckDB's extension server, from which nsys-ai's DuckDB would download
  `sqlite_scanner`; so the venv pins DuckDB to traceql's version and installs the same
  `sqlite_scanner` build from PyPI where DuckDB's autoloader looks (`$HOME/.duckdb/extensions`,
  with HOME set to `bench/data/nsysai-home` for nsys-ai's processes). Operations: `warm` (Parquet
  cache + NVTX kernel map; its own docs call it the step that takes the work off the first
  query), `skill run top_kernels` (kernels by name), `skill run nvtx_layer_breakdown` (GPU time
  per NVTX region, its NVTX attribution), `summary` (per-GPU kernel summary). In-process = the
  same through its Python API (`bench/nsysai_inproc.py`) on a warm cache."""


def traceql_revision() -> str:
    """The measured traceql: TRACEQL_BENCH_REV if set (a tree exported with git archive),
    else the commit of REPO, and whether traceql's code differs from it."""
    if os.environ.get("TRACEQL_BENCH_REV"):
        return os.environ["TRACEQL_BENCH_REV"]
    try:
        rev = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--", "traceql", "schemas",
                                "queries"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{rev}" + (f" plus uncommitted changes in {len(dirty.splitlines())} files" if dirty else "")


def machine() -> str:
    mem = ""
    try:
        kb = int(re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text()).group(1))
        mem = f", {kb / 1e6:.0f} GB RAM"
    except (OSError, AttributeError):
        pass
    cpu = platform.processor() or platform.machine()
    try:
        m = re.search(r"model name\s*:\s*(.*)", Path("/proc/cpuinfo").read_text())
        cpu = m.group(1).strip() if m else cpu
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores{mem}, {platform.system()} {platform.release()}"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", nargs="*", default=["S", "M"], choices=list(SIZES))
    ap.add_argument("--no-real", action="store_true", help="skip the largest real trace in ../shared/traces")
    ap.add_argument("--out", type=Path, default=None, help="write the Markdown report here")
    ap.add_argument("--json", type=Path, default=None, help="write the raw results here")
    ap.add_argument("--runs", type=int, default=3, help="best of this many runs per measurement")
    ap.add_argument("--budget", type=float, default=20.0, help="stop repeating a measurement after this many s")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds before a SQLite baseline query is stopped")
    ap.add_argument("--nsys-ai-timeout", type=float, default=1800.0, help="seconds per nsys-ai process")
    ap.add_argument("--no-nsys-ai", action="store_true", help="do not measure nsys-ai")
    ap.add_argument("--setup-nsys-ai", action="store_true",
                    help=f"create the nsys-ai {NSYSAI_VERSION} venv from the package index if it is missing")
    ap.add_argument("--nsys-ai-venv", type=Path, default=DATA / "nsysai-venv")
    ap.add_argument("--wait-load", type=float, default=None,
                    help="before each input, wait until the 1-minute load average is below this")
    ap.add_argument("--wait-max", type=float, default=1200.0, help="wait at most this many seconds in all")
    ap.add_argument("--render", type=Path, default=None, metavar="JSON",
                    help="measure nothing: write the report again from the --json file of a run "
                         "(after editing bench/ANALYSIS.md or the report's layout)")
    args = ap.parse_args(argv)
    if args.render:
        saved = json.loads(args.render.read_text())
        write(render(saved["results"], saved["meta"]), args.out)
        return

    import duckdb

    nsysai = None
    if not args.no_nsys_ai:
        home = args.nsys_ai_venv.with_name("nsysai-home")
        problem = setup_nsysai(args.nsys_ai_venv, home) if args.setup_nsys_ai else ""
        nsysai = find_nsysai(args.nsys_ai_venv, home)
        if nsysai.problem and problem:
            nsysai.problem = f"could not be installed: {problem}"
        if nsysai.problem:
            log(f"nsys-ai: {nsysai.problem}")

    inputs = []
    real = None if args.no_real else largest_real()
    if real is not None:
        inputs.append((f"real: {real.parent.name}", real))
    for size in args.sizes:
        inputs.append((f"generated {size}", generated(size)))

    cmd = "make bench" if os.environ.get("MAKELEVEL") else "python bench/run.py"
    meta = dict(command=f"{cmd} (python bench/run.py {' '.join(argv if argv is not None else sys.argv[1:])})",
                date=time.strftime("%Y-%m-%d %H:%M"), machine=machine(), rev=traceql_revision(),
                python=platform.python_version(), duckdb=duckdb.__version__, sqlite=sqlite3.sqlite_version,
                nsysai=nsysai.version if nsysai and not nsysai.problem else "",
                nsysai_duckdb=nsysai.duckdb if nsysai and not nsysai.problem else "",
                wait_load=args.wait_load if args.wait_load is not None else "(no wait)",
                wait_max=args.wait_max if args.wait_load is not None else 0, waited=0.0,
                runs=args.runs, budget=args.budget)
    deadline = time.time() + args.wait_max
    results = []
    for name, src in inputs:
        if args.wait_load is not None:
            meta["waited"] += wait_for_quiet(args.wait_load, deadline)
        results.append(measure(name, src, nsysai=nsysai, runs=args.runs, budget=args.budget,
                               timeout=args.timeout, nsysai_timeout=args.nsys_ai_timeout))
        meta["date"] = time.strftime("%Y-%m-%d %H:%M")
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(dict(meta=meta, results=results), indent=1, default=str))
    write(render(results, meta), args.out)


def write(text: str, out: Path | None) -> None:
    print(text)
    if out:
        out.write_text(text)


if __name__ == "__main__":
    main()
