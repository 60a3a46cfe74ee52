"""Ingest of several files at once: one worker process per core, each file in a workspace of its own.

`traceql ingest rank*.sqlite` hands each file to a pool of worker processes (multiprocessing,
started fresh with 'spawn': DuckDB's threads do not survive a fork). A worker reads its file
exactly as a single-file ingest does (traceql.store.load.ingest_one: staging, adapters, derived
tables, diagnostics, trace row, stored reports) into a new DuckDB file of its own, under the
trace id the parent chose for it, and returns. The parent meanwhile holds the one temporary
copy of the workspace (ingest.writing_copy) and appends the finished files' rows to it
(ATTACH, INSERT ... SELECT) in the order of their trace ids, replacing the rows of a trace
the file is ingested again for.
So the trace ids are those the files would get one after another, and it stays all or
nothing: the copy is renamed over the workspace only when every file is in it; any failure
(a bad file, Ctrl-C, a killed worker) stops the pool and leaves the workspace as it was.

Files go to the workers largest first (the longest one does not start last). A worker handles
one file at a time; its DuckDB uses its share of the cores (cores / workers threads). Without
--jobs, files that hold less than AUTO_MIN_BYTES together are read in this process, one after
another, as they were before: starting workers costs more than they save on small files.

Memory: TRACEQL_MEMORY_LIMIT (default 2.6GB) bounds the whole ingest, not each process. With W
workers the limit is split in W + 1 equal shares: one per worker's DuckDB and one for the
parent's, which only appends finished files. Workers are only started while a share stays at
least MIN_SHARE: at the default 2.6GB that allows 9 workers; a larger limit allows more. Each
process adds its Python and DuckDB code (about 100 MB) to its share: the peak of the whole
ingest is about the limit plus that per process (bench/RANKS.md measures it).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import shutil
import signal
import sys
import traceback
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import duckdb

from traceql.core.settings import cores, limit_bytes

MIN_SHARE = 256 * 1000 * 1000  # bytes of DuckDB buffer pool a worker gets at least

# Without --jobs, files that hold less than this together are read one after another in this
# process: a worker costs its start (about 0.3 s of CPU to import DuckDB, pyarrow and traceql)
# and a workspace file of its own, which small files do not earn back (the NCCL set's six
# 1 MB files: bench/RANKS.md).
AUTO_MIN_BYTES = 64 * 1000 * 1000


def workers(paths: list[Path], jobs: int | None = None) -> int:
    """How many worker processes ingest the files PATHS: jobs when given, else one per core,
    and only when together they hold AUTO_MIN_BYTES or more; no more than files, and only as
    many as get MIN_SHARE of the memory limit each. 1: ingest in this process."""
    from traceql.core.settings import memory_limit

    if jobs is None:
        if sum(_size(p) for p in paths) < AUTO_MIN_BYTES:
            return 1
        jobs = cores()
    n = min(len(paths), jobs)
    n = min(n, limit_bytes(memory_limit()) // MIN_SHARE - 1)
    return max(1, n)


def ingest_files(con: duckdb.DuckDBPyConnection, db: Path, detected: list, user: dict, n: int,
                 progress) -> list:
    """Ingest the DETECTED files in N worker processes into the workspace copy on con (see the
    module doc); their IngestResults in the order of DETECTED."""
    from traceql.core.errors import WorkspaceError
    from traceql.core.settings import memory_limit
    from traceql.store.transaction import workers_folder

    plan = []  # (index, det, trace_id, replaced), the ids the files would get one after another
    next_id = con.execute("SELECT coalesce(max(trace_id), 0) + 1 FROM trace").fetchone()[0]
    for i, det in enumerate(detected):
        row = con.execute("SELECT trace_id FROM trace WHERE path = ?", [str(det.path.resolve())]).fetchone()
        if row is not None:
            plan.append((i, det, row[0], True))
        else:
            plan.append((i, det, next_id, False))
            next_id += 1
    share = limit_bytes(memory_limit()) // (n + 1)
    threads = max(1, cores() // n)
    folder = workers_folder(db)  # a stale one goes with the others
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    tasks = [(i, det, trace_id, replaced, user, str(folder / f"trace-{trace_id}.duckdb"),
              f"{max(1, share // 10**6)}MB", threads, str(folder / f"spill-{trace_id}"), str(db))
             for i, det, trace_id, replaced in plan]
    by_index = {t[0]: t for t in tasks}
    tasks.sort(key=lambda t: -_size(t[1].path))  # largest first
    results: dict[int, object] = {}
    appended = 0  # files whose rows are in the workspace copy: plan[:appended]
    progress.start(f"{len(tasks)} files, {n} at a time", len(tasks))
    progress.update(0, detail="starting")
    pool = ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("spawn"), initializer=_quiet,
                               initargs=(os.getpid(),))
    try:
        with _main_not_imported():
            running = {pool.submit(_work, task): task for task in tasks}
        for future in as_completed(running):
            try:
                _, outcome = future.result()
            except BrokenProcessPool:
                raise WorkspaceError(
                    f"{db}: a worker process reading the files died (killed, or out of memory?); the workspace is "
                    "unchanged. A lower TRACEQL_MEMORY_LIMIT, or --jobs 1 (one file at a time), needs less memory"
                ) from None
            if isinstance(outcome, BaseException):
                raise outcome
            task = running[future]
            results[task[0]] = outcome
            progress.update(len(results), detail=f"{task[1].path.name} read")
            while appended < len(plan) and appended in results:  # in trace id order: rows as a serial ingest
                _, _, trace_id, replaced = plan[appended]
                dbfile = by_index[appended][5]
                _append(con, dbfile, trace_id, replaced)
                os.remove(dbfile)
                appended += 1
        pool.shutdown()
    except BaseException:
        _stop(pool)
        raise
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return [results[i] for i in range(len(plan))]


@contextlib.contextmanager
def _main_not_imported():
    """While worker processes start: a worker imports the __main__ module of this process
    (multiprocessing's 'spawn' does, to find functions defined there), which runs a user's
    script again when it calls traceql.ingest without `if __name__ == "__main__":`. The
    workers need only traceql: __main__ is shown to them as an interactive session's."""
    main = sys.modules.get("__main__")
    saved = {k: main.__dict__[k] for k in ("__spec__", "__file__") if main is not None and k in main.__dict__}
    try:
        if main is not None:
            main.__spec__ = None
            main.__dict__.pop("__file__", None)
        yield
    finally:
        if main is not None:
            main.__dict__.update(saved)


def _stop(pool: ProcessPoolExecutor) -> None:
    """End the workers now (an error or Ctrl-C): the files they read no longer matter."""
    terminate = getattr(pool, "terminate_workers", None)  # Python 3.14
    if terminate is not None:
        terminate()
    else:
        for process in list((getattr(pool, "_processes", None) or {}).values()):
            process.terminate()
    pool.shutdown(wait=True, cancel_futures=True)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _append(con: duckdb.DuckDBPyConnection, dbfile: str, trace_id: int, replaced: bool) -> None:
    """Add the rows a worker wrote to DBFILE to the workspace on con (trace TRACE_ID)."""
    from traceql.derive import derivation
    from traceql.store import stored
    from traceql.core.resources import TRACE_TABLES

    if replaced:  # the file was in the workspace: its old rows go, as in a single ingest
        for table in TRACE_TABLES:
            con.execute(f"DELETE FROM {table} WHERE trace_id = ?", [trace_id])
        stored.delete_trace(con, trace_id)
        derivation.forget(con, trace_id)
    literal = "'" + dbfile.replace("'", "''") + "'"  # ATTACH takes no parameter; the path is ours, quoted
    con.execute(f"ATTACH {literal} AS traceql_worker (READ_ONLY)")
    try:
        for table in TRACE_TABLES:
            con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM traceql_worker.{table}")
        stored.adopt(con, "traceql_worker", trace_id)
        con.execute(f"INSERT INTO {derivation.BUILT} SELECT * FROM traceql_worker.{derivation.BUILT} "
                    "WHERE trace_id = ?", [trace_id])
    finally:
        con.execute("DETACH traceql_worker")


class WorkerError(RuntimeError):
    """An unexpected error in a worker process, with its traceback there."""


def _quiet(parent: int | None = None) -> None:
    """Workers leave Ctrl-C (and SIGHUP) to the parent, which stops them all, and die
    with it: killed alone (the OOM killer, kill -9), the parent could not stop them, and they
    would hold its standard output (a `| tee`, a CI step waits) and their files for minutes.
    Linux: a parent-death signal; elsewhere the pool notices the broken pipe when it next reads."""
    for sig in (signal.SIGINT, signal.SIGHUP):  # (SIGTERM stays: the parent's _stop() sends it)
        signal.signal(sig, signal.SIG_IGN)
    if parent is None or not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # it died before the signal was set
        os._exit(1)


def _work(task):
    """In a worker process: ingest one file into a workspace file of its own. Returns (index,
    IngestResult), or (index, the error) for the parent to raise."""
    from traceql.core.errors import TraceqlError
    from traceql.core.faults import fault
    from traceql.store.guard import connect
    from traceql.core.settings import configure
    from traceql.store.load import create_contract, errors_of, ingest_one
    from traceql.core.progress import Progress

    i, det, trace_id, replaced, user, dbfile, share, threads, spill, workspace = task
    try:
        con = connect(dbfile, files=[det.path], temp_directory=spill)
        try:
            configure(con, None, share=share, threads=threads)
            create_contract(con)
            with errors_of(det.path):
                result = ingest_one(con, det, Progress(), user, (trace_id, replaced))
            con.execute("CHECKPOINT")
        finally:
            con.close()
        return i, result
    except TraceqlError as exc:
        return i, exc
    except Exception as exc:  # noqa: BLE001 - handed to the parent, which stops the ingest
        if isinstance(exc, duckdb.Error):
            mapped = fault(exc, workspace)
            if isinstance(mapped, TraceqlError):
                return i, mapped
        return i, WorkerError(f"{det.path}: {type(exc).__name__}: {exc}\n(in a worker process)\n"
                              + traceback.format_exc())
