"""`traceql diff`'s two sides: what each argument is (a trace file, a trace id, a workspace), its
statistics per key (queries/_internal/diff_side.sql), its iterations found jointly with the other
side's (analyze's iterations rule, queries/_internal/diff_per_iteration.sql), trace files ingested
into a temporary workspace unless --db holds them already (see diff.py for the whole method)."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from traceql.analysis.diff_rules import DEFAULT_TRIM, MIN_ITERATIONS, VERSIONS
from traceql.core.errors import InputError, UsageError


@dataclass
class Side:
    spec: str           # as given
    kind: str           # 'file', 'trace', 'workspace' or 'export' (a Parquet export, read on Spark)
    db: Path | str | None = None
    trace_id: int | None = None  # None: every trace of db
    path: Path | None = None     # the file, for 'file'
    reused: bool = False         # a file found in the workspace (same path and SHA-256), not ingested again


@dataclass
class SideStats:
    side: Side
    rows: dict              # (section, key) -> the row of queries/_internal/diff_side.sql
    traces: list            # trace rows: trace_id, path, source_format, exporter_version
    iterations: int | None  # None: no iterations detected
    iteration_durs: list = field(default_factory=list)
    iteration_source: str | None = None
    iteration_family: str | None = None
    strata: dict = field(default_factory=dict)  # (section, key) -> {stratum: row}: like-for-like groups
    iteration_note: str | None = None  # why the iterations rule abstained
    per_iter: dict = field(default_factory=dict)  # (section, key) -> {iteration: summed ns}: _internal/diff_per_iteration
    communication: set = field(default_factory=set)  # (section, key) of communication kernels and ops
    anchor: tuple | None = None  # (source, family) of the iterations, the same on both sides when paired
    hardware: dict = field(default_factory=dict)  # what the warnings compare: GPUs, exporter versions
    joint_note: str | None = None  # how the iterations of both sides were matched, or why they were not

    def info(self) -> dict:
        return {"spec": self.side.spec, "kind": self.side.kind,
                "db": None if self.side.kind == "file" and not self.side.reused else str(self.side.db),
                "reused": self.side.reused,
                "trace_id": self.side.trace_id, "traces": self.traces, "iterations": self.iterations,
                "iteration_source": self.iteration_source, "iteration_family": self.iteration_family}


def _is_workspace(path: Path) -> bool:
    """A DuckDB database file (a workspace), by its header: 'DUCK' at byte 8."""
    try:
        with open(path, "rb") as fh:
            return fh.read(12)[8:12] == b"DUCK"
    except OSError:
        return False


def classify(spec, db=None) -> Side:
    """What SPEC names: an int or a number that is no file, a trace id of DB; a workspace file; a
    Parquet export (a directory with its manifest, or a URL: all its traces make one side, read
    on Spark); else a trace file."""
    from traceql.outputs.parquet import MANIFEST

    if isinstance(spec, bool):
        raise UsageError(f"{spec!r}: give a trace file, a trace id or a workspace")
    if isinstance(spec, int):
        return Side(str(spec), "trace", trace_id=spec)
    text = os.fspath(spec)
    if "://" in text and not text.startswith("file://"):
        return Side(text, "export", db=text)
    path = Path(text.removeprefix("file://"))
    if path.exists() or path.is_symlink():
        if path.is_dir() and (path / MANIFEST).is_file():
            return Side(text, "export", db=path)
        if path.is_dir():
            raise InputError(f"{text}: is a directory, not a trace file, a workspace or a Parquet export")
        if _is_workspace(path):
            return Side(text, "workspace", db=path)
        return Side(text, "file", path=path)
    if re.fullmatch(r"\d+", text.strip()):
        return Side(text, "trace", trace_id=int(text))
    raise InputError(f"{text}: no such file (nor a trace id of the workspace)")


def _side_stats(ws, side: Side, kernel_key: str, trim: float) -> SideStats:
    from traceql.analysis.analyze import analyze
    from traceql.query import library
    from traceql.core.results import tidy

    ws.check_trace(side.trace_id)
    q = library.get("_internal/diff_side")
    table = tidy(ws.execute(q.sql, library.bind(q, {"trace_id": side.trace_id, "kernel_key": kernel_key,
                                                                 "trim": trim}))
                 .to_arrow_table())
    rows, strata = {}, {}
    for r in table.to_pylist():
        if r["stratum"] is None:
            rows[(r["section"], r["key"])] = r
        else:
            strata.setdefault((r["section"], r["key"]), {})[r["stratum"]] = r
    traces = ws.execute(
        "SELECT trace_id, path, source_format, exporter_version, driver_version, cuda_driver_version, "
        "cuda_runtime_version, torch_version FROM trace WHERE ? IS NULL OR trace_id = ? "
        "ORDER BY trace_id", [side.trace_id, side.trace_id]).to_arrow_table().to_pylist()
    found = analyze(ws, ["iterations"], trace_id=side.trace_id).evidence["iterations"].to_pylist()
    its = [r for r in found if r["recoverable_ns"] is not None and r["dur_ns"] is not None]
    counts: dict = {}
    for r in its:
        k = (r["trace_id"], r["pid"], r["tid"], r["family"])
        counts[k] = counts.get(k, 0) + 1
    top = max(counts, key=lambda k: (counts[k], str(k))) if counts else None
    source = next((r["source"] for r in its if top and r["family"] == top[3]), None)
    note = next((r["note"] for r in found if r["note"]), None)
    hardware = {
        "gpus": [tuple(r) for r in ws.execute(
            "SELECT coalesce(name, '(unknown GPU)'), count(*) FROM device WHERE ? IS NULL OR trace_id = ? "
            "GROUP BY 1 ORDER BY 1", [side.trace_id, side.trace_id]).fetchall()],
        "exporters": sorted({" ".join(x for x in (t["source_format"], t["exporter_version"]) if x) for t in traces}),
        **{col: sorted({t[col] for t in traces if t[col]}) for col, _ in VERSIONS}}
    comm = {("kernel", k) for (k,) in ws.execute(
        "SELECT DISTINCT coalesce(CASE WHEN ? = 'short_name' THEN k.short_name ELSE k.name END, '(unnamed)') "
        "FROM kernel k JOIN launch l ON l.trace_id = k.trace_id AND l.op_id = k.kernel_id AND l.op_kind = 'kernel' "
        "WHERE l.category = 'communication' AND (? IS NULL OR k.trace_id = ?)",
        [kernel_key, side.trace_id, side.trace_id]).fetchall()}
    return SideStats(side, rows, traces, counts[top] if top else None, [r["dur_ns"] for r in its],
                     source, top[3] if top else None, strata, note, communication=comm, hardware=hardware)


def _per_iteration(ws, side: Side, anchor: tuple, kernel_key: str, leaf: bool = False) -> tuple[dict, set]:
    """queries/_internal/diff_per_iteration.sql on one side for ANCHOR (source, family): {(section, key):
    {iteration: ns}} and the communication keys. leaf: NVTX ranges by their own name."""
    from traceql.query import library

    q = library.get("_internal/diff_per_iteration")
    rows = ws.execute(q.sql, library.bind(q, {"trace_id": side.trace_id, "anchor_source": anchor[0],
                                              "anchor_family": anchor[1], "kernel_key": kernel_key,
                                              "anchor_leaf": leaf})).fetchall()
    out: dict = {}
    comm = set()
    for section, key, iteration, calls, total, is_comm in rows:
        out.setdefault((section, key), {})[iteration] = int(total or 0)
        out.setdefault(("calls", section, key), {})[iteration] = int(calls or 0)
        if is_comm:
            comm.add((section, key))
    return out, comm


def anchor_text(anchor: tuple) -> str:
    from traceql.core.faults import printable

    source, family = anchor
    if source == "ProfilerStep":
        return "ProfilerStep ranges"
    if source == "kernel pace":
        return f"the pace of kernel '{printable(family)}'"
    return f"NVTX range '{printable(family)}'"


def _joint(sides: list, stats: list, kernel_key: str, open_side) -> str | None:
    """Find the iterations of both sides by one rule and one anchor: each side's own anchor
    (analyze/iterations), A's first, tried on both; the first that gives MIN_ITERATIONS or more
    on each side is taken, and both sides' SideStats then hold its iterations (paired). Returns
    a note for the reader: which anchor was taken when a side found another, or why none could be
    matched (then the sides keep what they found)."""
    anchors = []
    for s in stats:
        a = (s.iteration_source, s.iteration_family)
        if s.iteration_source in ("ProfilerStep", "nvtx", "kernel pace") and a not in anchors:
            anchors.append(a)
    if not anchors:
        return None
    found = []
    for anchor in anchors:
        got = []
        for side, s in zip(sides, stats):
            with open_side(side) as ws:
                per = _per_iteration(ws, side, anchor, kernel_key)
                if anchor[0] == "nvtx" and per[0].get(("iteration", "iterations"), {}).get(0, 0) < MIN_ITERATIONS:
                    per = _per_iteration(ws, side, anchor, kernel_key, leaf=True)  # nested otherwise there
                got.append(per)
        counts = [per.get(("iteration", "iterations"), {}).get(0, 0) for per, _ in got]
        found.append((anchor, counts))
        if min(counts) >= MIN_ITERATIONS:
            own = [(s.iteration_source, s.iteration_family) for s in stats]
            for s, (per, comm), n in zip(stats, got, counts):
                durs = per.get(("iteration", "iteration time"), {})
                s.iterations, s.iteration_durs = n, [durs[k] for k in sorted(durs)]
                s.iteration_source, s.iteration_family = anchor
                s.per_iter, s.anchor = per, anchor
                s.communication |= comm
            other = [f"{name} found {anchor_text(o) if o[0] else 'none'}" for name, o in zip("AB", own) if o != anchor]
            return (f"iterations of both sides: {anchor_text(anchor)} ({counts[0]} in A, {counts[1]} in B; "
                    + "; ".join(other) + " on its own)") if other else None
    parts = []
    for anchor, counts in found:
        missing = " and ".join(f"{name} ({n})" for name, n in zip("AB", counts) if n < MIN_ITERATIONS)
        parts.append(f"{anchor_text(anchor)}: fewer than {MIN_ITERATIONS} iterations in {missing}")
    for name, s in zip("AB", stats):
        if not s.iteration_source and s.iteration_note:
            parts.append(f"{name}: {s.iteration_note}")
    return "iterations could not be matched: " + "; ".join(parts)


def _already_ingested(side: Side, db: Path) -> bool:
    """Take a trace file from the workspace DB when it holds it already (the same resolved path and
    the same SHA-256, trace.file_sha256) instead of ingesting it again: side.db and side.trace_id
    then point there. A workspace that is absent, of another contract version or busy is not
    used (the file is ingested as usual)."""
    import duckdb

    from traceql.core.errors import TraceqlError
    from traceql.store.workspace import WorkspaceFile

    if not db.is_file() or not _is_workspace(db):
        return False
    try:
        with WorkspaceFile(db) as ws:
            trace_id = ws.held(side.path)
    except (TraceqlError, duckdb.Error, OSError):
        return False
    if trace_id is None:
        return False
    side.db, side.trace_id, side.reused = db, trace_id, True
    return True


def _opener(open_export):
    """A function that opens a side's workspace: a DuckDB workspace file, or a Parquet export
    through open_export (a function of the export's path, from a layer that knows the engines:
    traceql.engines.spark.ExportOpener)."""
    from traceql.store.workspace import WorkspaceFile

    def open_side(side: Side):
        if side.kind != "export":
            return WorkspaceFile(side.db)
        if open_export is None:
            raise UsageError(f"{side.spec}: a Parquet export is compared on Spark: add --engine spark")
        return open_export(side.db)
    return open_side


def load(a, b, db=None, kernel_key: str = "name", trim: float = DEFAULT_TRIM, progress=None,
         on_wait=None, open_export=None) -> tuple[SideStats, SideStats]:
    """The two sides' statistics. Trace files are ingested together into a temporary workspace,
    removed before this returns. open_export: how a side that is a Parquet export is opened
    (a function of its path returning a workspace, e.g. traceql.engines.spark.ExportOpener)."""
    from traceql.store.workspace import default_db

    open_side = _opener(open_export)
    if kernel_key not in ("name", "short_name"):
        raise UsageError(f"--kernel-key {kernel_key}: expected name or short_name")
    if not 0 <= trim < 0.5:
        raise UsageError(f"--trim {trim}: expected a fraction from 0 to below 0.5")
    sides = [classify(a), classify(b)]
    for s in sides:
        if s.kind == "export" and open_export is None:
            raise UsageError(f"{s.spec}: a Parquet export is compared on Spark: add --engine spark")
    for s in sides:
        if s.kind == "trace":
            s.db = Path(db) if db is not None else default_db()
    files = [s for s in sides if s.kind == "file"]
    files = [s for s in files if not _already_ingested(s, Path(db) if db is not None else default_db())]
    with contextlib.ExitStack() as stack:
        if files:
            from traceql.store.ingest import ingest

            tmp = Path(tempfile.mkdtemp(prefix="traceql-diff-"))
            stack.callback(shutil.rmtree, tmp, True)
            tmp_db = tmp / "diff.duckdb"
            results = ingest([s.path for s in files], db=tmp_db, progress=progress, on_wait=on_wait)
            ids = {os.path.realpath(r.path): r.trace_id for r in results}
            for s in files:
                s.db, s.trace_id = tmp_db, ids[os.path.realpath(s.path)]
        out = []
        for s in sides:
            with open_side(s) as ws:
                out.append(_side_stats(ws, s, kernel_key, trim))
        joint = _joint(sides, out, kernel_key, open_side)
    for s in out:
        s.joint_note = joint
    return out[0], out[1]
