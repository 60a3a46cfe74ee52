"""Settings of traceql's DuckDB work that several layers read: the memory limit
(TRACEQL_MEMORY_LIMIT) and an ingest connection's configuration, the cores a process may use, and the
depth below which NVTX ranges hold no GPU work (NVTX_DEPTH_CAP)."""

from __future__ import annotations

import os
import re
from contextlib import contextmanager
from pathlib import Path

import duckdb

from traceql.core.errors import UsageError, WorkspaceError
from traceql.core.faults import first_line


# DuckDB's buffer pool; it spills beyond it (TRACEQL_MEMORY_LIMIT to change). The process peaks
# about 1 GB above it: what statements allocate outside the pool, DuckDB's and Python's code. On
# the 10 M-kernel PyTorch-shaped export (bench/FIRST.md) the peak RSS under 3GB was 3.94-4.18 M
# KiB, over 4 GB, in the PyTorch family's statements; under 2.6GB 3.45-3.56 M KiB, in three
# alternating pairs 1.007x the CPU time at the median (1.001-1.140x), writing 66 instead of 58 GB
# of spill. The 1 M-kernel Kineto JSON: 2.93-3.03 against 3.34-3.36 M KiB, no slower. At 1 M
# nsys kernels the whole process peaks at 2.2-2.4 GB: such inputs never reach it.
DEFAULT_MEMORY_LIMIT = "2.6GB"
BLOCK_ALLOCATOR_MEMORY = "1.3GB"  # with the default limit: freed blocks kept for reuse (configure)

# Below this many bytes of input (the exports an ingest reads; the workspace a family build, rm or
# upgrade copies) a writing connection runs DuckDB on one thread (small_input_threads). DuckDB
# splits a scan by row groups of 122,880 rows, and such inputs hold about one per table: no
# statement of a 3.8 MB export (17 k kernels) ran faster than its CPU time on 2 threads, and the
# second thread's scheduling cost 24 % more CPU for the same ingest. 32 MB is about 75 k-150 k
# kernels in the exports measured.
SMALL_INPUT_BYTES = 32 * 10**6


# NVTX ranges nested this deep or deeper (depth >= the cap) hold no GPU work in op_range and get
# a shortened path: stacks 20,000 deep would otherwise cost memory quadratic in the depth.
# Counted in ingest_stats ('nvtx_range.beyond_depth_cap'). Real traces stay below 30.
NVTX_DEPTH_CAP = 64


# Times and durations must leave headroom for the 64-bit integer arithmetic of traceql's own SQL
# (a span end - start, a midpoint, the sum of two times, a report's sum of durations). Ingest
# refuses a file (exit 3, traceql.store.load.check_time_limits) in which any ts, ts + dur, or UTC
# time (the session start + ts) lies outside (-TIME_LIMIT_NS, TIME_LIMIT_NS), or whose
# durations, as absolute values, add up to TIME_LIMIT_NS or more; and a file with which the
# durations of the workspace's traces add up to it (check_workspace_limits). 2**62 ns is about 146 years:
# epoch timestamps reach it in the year 2116. docs/errors.md states the rule.
TIME_LIMIT_NS = 2 ** 62

_MEMORY_SIZE = re.compile(r"\s*\d+(\.\d+)?\s*(B|[KMGT]i?B|%)?\s*", re.I)


def memory_limit() -> str:
    """TRACEQL_MEMORY_LIMIT, checked (a number and a unit, bound as a parameter, never SQL
    text), else DEFAULT_MEMORY_LIMIT."""
    limit = os.environ.get("TRACEQL_MEMORY_LIMIT")
    if limit is None or not limit.strip():
        return DEFAULT_MEMORY_LIMIT
    if not _MEMORY_SIZE.fullmatch(limit):
        raise UsageError(f"TRACEQL_MEMORY_LIMIT={limit}: not a memory size (a number and a unit: 3GB, 500MB, 80%)")
    if limit.strip().endswith("%"):  # DuckDB takes no percentage: of this machine's memory, in bytes
        return f"{limit_bytes(limit)}B"
    return limit.strip()


def configure(con: duckdb.DuckDBPyConnection, temp_dir: Path | None, share: str | None = None,
              threads: int | None = None) -> None:
    """Settings of an ingest's connection. share and threads: a worker process's part of the
    memory limit and of the cores (traceql.store.parallel), instead of all of them. temp_dir: where
    DuckDB spills, None when the connection was opened with it (traceql.store.guard.connect)."""
    limit = os.environ.get("TRACEQL_MEMORY_LIMIT", "").strip()
    try:
        con.execute("SET memory_limit = ?", [share or memory_limit()])
        if limit:  # DuckDB refuses a limit below what it holds, but holding nothing just then it takes
            # any: one allocation tells (a catalog scan needs a 32 KiB block), before the ingest's statements
            con.execute("SELECT count(*) FROM duckdb_tables()").fetchone()
    except duckdb.OutOfMemoryException as exc:  # a size, but less than DuckDB needs (exit 5, as out of memory)
        raise WorkspaceError(f"TRACEQL_MEMORY_LIMIT={limit}: too small for DuckDB to work in ({first_line(exc)})") from None
    except duckdb.Error as exc:
        raise UsageError(f"TRACEQL_MEMORY_LIMIT={limit}: not a memory size DuckDB takes ({first_line(exc)})") from None
    if threads is not None:
        con.execute("SET threads = ?", [threads])
    if not limit and share is None:
        # Keep up to half the default limit of freed blocks for reuse instead of returning them
        # to the OS and faulting them in again. In four paired ingests of bench's ATTR (16 M
        # ranges) system time fell from 15-29 s to 12-19 s and wall time by 1.4-12.7 s; the peak
        # did not grow (L: 3.51 GB against 3.59 GB). As large as the limit, L's peak passed 4 GB.
        # The memory is this connection's: it is freed when the ingest closes it.
        con.execute(f"SET block_allocator_memory = '{BLOCK_ALLOCATOR_MEMORY}'")
    if temp_dir is not None:
        con.execute("SET temp_directory = ?", [str(temp_dir)])
    con.execute("SET preserve_insertion_order = false")
    # DuckDB's own progress bar would print on stdout, into a report's output when a query
    # builds derived tables (traceql.store.workspace ensure); ingest shows its own progress
    con.execute("SET enable_progress_bar = false")
    # DuckDB runs an ASOF join as a nested loop when it expects a small left side; its
    # estimate is far off for the (call, level) pairs of op_range, which made that quadratic.
    con.execute("SET asof_loop_join_threshold = 0")
    # Likewise an inequality join (start/end ranges holding calls) becomes a nested loop or a
    # piecewise merge join, quadratic, when DuckDB expects one side to be small: always IEJoin.
    con.execute("SET nested_loop_join_threshold = 0")
    con.execute("SET merge_join_threshold = 0")
    con.execute("SET VARIABLE nvtx_depth_cap = ?", [NVTX_DEPTH_CAP])


@contextmanager
def hash_right_side(con: duckdb.DuckDBPyConnection):
    """Within it, each hash join on CON builds its hash table from its right side as written: DuckDB's
    optimizer 'build_side_probe_side', which swaps the sides to hash the one it expects to be
    smaller, is off. DuckDB expects a fifth of a table's rows after each filter it cannot size, so
    an adapter view or a trace's rows of a contract table look five or 25 times smaller than a
    staging table of the same size, and it hashed the wide rows, names and all, to probe them with
    narrow ids (see where it is used). Not for a statement whose output order later steps rely
    on: the order follows the probe side (schemas/derive/nvtx_range.sql, the INSERT's note).
    Optimizers already off stay off, inside and after."""
    before = con.execute("SELECT current_setting('disabled_optimizers')").fetchone()[0]
    con.execute("SET disabled_optimizers = ?", [",".join(filter(None, (before, "build_side_probe_side")))])
    try:
        yield
    finally:
        con.execute("SET disabled_optimizers = ?", [before])


def small_input_threads(paths) -> int | None:
    """1 when the files PATHS (missing ones count as empty) hold fewer than SMALL_INPUT_BYTES
    together, else None (DuckDB's default: every core). A gzip file counts as what it holds
    (its trailer's size, modulo 4 GiB; a PyTorch trace compresses about 10x)."""
    total = 0
    for p in paths:
        try:
            size = os.stat(p).st_size
            if str(p).lower().endswith(".gz") and size >= 4:
                with open(p, "rb") as fh:
                    fh.seek(-4, os.SEEK_END)
                    size = max(size, int.from_bytes(fh.read(4), "little"))
            total += size
        except OSError:
            pass
    return 1 if total < SMALL_INPUT_BYTES else None


_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}


def cores() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def limit_bytes(limit: str) -> int:
    """A memory size as TRACEQL_MEMORY_LIMIT takes it ('3GB', '500MiB', '80%') in bytes; a
    percentage is of this machine's physical memory, as DuckDB reads it."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B|B|%)?\s*", limit, re.I)
    if not m:
        raise ValueError(limit)
    number, unit = float(m.group(1)), (m.group(2) or "").upper()
    if unit == "%":
        return int(number / 100 * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    return int(number * _UNITS[unit])
