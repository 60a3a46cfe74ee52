"""Ingest: load profiler exports into a workspace through the versioned adapters.

Each ingest builds the new workspace in a temporary file next to the target (a copy of
the current workspace, when there is one) and renames it over the target only when
everything succeeded, so an interrupted or failed ingest leaves the previous workspace
exactly as it was. The source file is opened read-only.
"""

from __future__ import annotations

import os
from pathlib import Path

from traceql.core.errors import InputError, UsageError
from traceql.core.faults import raise_if_signalled
from traceql.core.progress import as_progress
from traceql.core.settings import memory_limit
from traceql.sources import nsys_export
from traceql.sources.detect import detect
from traceql.store.load import IngestResult, check_workspace_limits, create_contract, errors_of, ingest_one
from traceql.store.lock import real_path, workspace_lock
from traceql.store.remove import purge_orphans
from traceql.store.transaction import check_writable, writing_copy

__all__ = ["IngestResult", "ingest"]


def ingest(paths, db: str | os.PathLike = "traceql.duckdb", progress=None,
           on_wait=None, flops=None, rank: int | None = None, host: str | None = None,
           jobs: int | None = None, families=()) -> list[IngestResult]:
    """Ingest every file in `paths` into the workspace `db`, all or nothing.

    progress: a traceql.core.progress.Progress told about each file (one task per file, a step per
    source table read and per derived table), or a function progress(file_name, detail).

    rank, host: the rank and host of the file, given by the user (trace.rank_source and
    host_source 'user'), over what the file records or its name says (traceql.sources.ranks). A rank
    belongs to one file: with several files it is refused; a host applies to every file given
    (the ranks of one machine).

    Several files are read in parallel by worker processes (traceql.store.parallel), jobs at a time
    (default: one per core, when the files hold 64 MB or more together; jobs=1: one after
    another in this process); TRACEQL_MEMORY_LIMIT is shared between them, and the workers use
    the FLOPs plug-ins too.

    Every file is detected before anything is written, so one bad file stops the whole
    command with the workspace untouched. Another ingest into the same workspace is
    waited for (see workspace_lock; on_wait(message) tells that it waits).

    flops: FLOPs plug-ins (module names or .py files, traceql.derive.flops_plugins) used before those
    of $TRACEQL_FLOPS and the 'traceql.flops' entry points.

    families: deferred families of derived tables (traceql.derive.derivation) to build with the
    ingest, in its transaction, rather than on their first use: what a command about to run reads
    (`report --by range FILE` builds attribution here). Files read by worker processes get them
    on first use, as usual."""
    from traceql.derive import flops_plugins

    with flops_plugins.given(flops):  # a plug-in that cannot be loaded: a UsageError, nothing written
        return _ingest(paths, db, progress, on_wait, rank, host, jobs, families)


def _ingest(paths, db, progress, on_wait, rank, host, jobs, families=()) -> list[IngestResult]:
    db = Path(db)
    paths = [Path(p) for p in paths]
    progress = as_progress(progress)
    if not paths:
        raise InputError("no input files given")
    memory_limit()  # a bad TRACEQL_MEMORY_LIMIT is refused before anything is written
    if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < 2**31):
        raise UsageError(f"--rank {rank}: a rank is a whole number from 0")
    if host is not None and not str(host).strip():
        raise UsageError("--host: give a host name")
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
        raise UsageError(f"--jobs {jobs}: the number of files read at a time is a whole number from 1")
    if rank is not None and len({os.path.realpath(p) for p in paths}) > 1:
        raise UsageError(f"--rank gives the rank of one file, and {len(paths)} were given: ingest each with its "
                         "own --rank, or let traceql read the rank from the files (their environment or "
                         "a 'rankN' in their names)")
    user = {"rank": rank, "host": None if host is None else str(host).strip()}
    detected, given = [], {}
    for p in paths:  # the same file twice (by absolute path, symlinks resolved) is read once
        report = p if nsys_export.is_report(p) else None
        p = nsys_export.file_read(p, db)
        key = Path(os.path.realpath(p))  # (a link loop: detect says so)
        given[key] = given.get(key, 0) + 1
        if given[key] == 1:
            det = detect(p)
            if report is not None and det.path != report:
                det.exported_from = Path(os.path.abspath(report))
            detected.append(det)
    check_writable(db)
    with workspace_lock(db, on_wait=on_wait):
        results: list[IngestResult] = []
        fresh = not real_path(db).exists()
        with writing_copy(db, files=[d.path for d in detected]) as con:
            create_contract(con, db)  # also refuses a contract table turned into a view by sql --write, ...
            if not fresh:  # a new workspace holds the contract as create_contract made it
                purge_orphans(con)  # rows of a trace whose trace row was deleted: never absorbed by a new trace
            workers = 1  # one file is read in this process: multiprocessing not even imported (0.02 CPU s)
            if len(detected) > 1:
                from traceql.store import parallel

                workers = parallel.workers([d.path for d in detected], jobs)
            if workers > 1:
                results += parallel.ingest_files(con, db, detected, user, workers, progress)
            for det in detected[len(results):]:
                with errors_of(det.path):
                    results.append(ingest_one(con, det, progress, user, also=families))
                raise_if_signalled()  # (a Ctrl-C that DuckDB swallowed: the next export is not read)
            check_workspace_limits(con, [r.trace_id for r in results])  # sums across traces fit 64 bits
            for det in detected:
                if given[det.path.resolve()] > 1:
                    next(r for r in results if r.detected.path == det.path).warnings.append(
                        f"{det.path} was given {given[det.path.resolve()]} times; ingested once")
        return results


