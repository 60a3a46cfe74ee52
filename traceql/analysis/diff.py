"""`traceql diff A B`: what changed between two runs, and whether it is more than run-to-run noise.

Sides. A and B are each a trace file (nsys, nvprof or PyTorch profiler), ingested into a temporary
workspace that is removed afterwards; a trace id of the workspace (--db); or a workspace file, all
of whose traces make one side (the ranks of one job). The two sides may be of different formats:
they meet in the contract's views, aligned by names.

Alignment. queries/_internal/diff_side.sql runs on each side where its rows live and gives, per key, the
count, sum, mean, variance, median, min and max of its instances' durations: kernels by name (or
short name), PyTorch ops by name and direction (GPU time per op call), NVTX ranges by path (CPU time
per instance, and the GPU busy time of the work launched inside), API calls by name, copies by
kind, memsets by memory kind; and the totals (summed GPU operation time, busy time and its
breakdown per GPU, span). Only these aggregates leave a side, so the two sides may live in
different workspaces and each may hold millions of instances. A trace file that the workspace
(--db) holds already, at the same path with the same SHA-256, is taken from there, not ingested
again.

Iterations, found jointly. Each side's own iterations come from analyze's `iterations` rule
(ProfilerStep, a repeating NVTX range, or a kernel's pace). Both sides then take ONE anchor: each
side's own (A's first) is tried on both (queries/_internal/diff_per_iteration.sql; an NVTX family that is
nested differently on the other side is matched by its own range name), and the first that gives
3 or more iterations on each side is used for both. When none does, the note says why (which
anchor has how many iterations where) and whole traces are compared.

Paired. With one anchor on both sides the two are iterations of one program: iteration k of A
is compared with iteration k of B (the first, warm-up, left out when both have 4 or more), up to
the shorter side. Per row of the headline (iteration time, GPU operation time per iteration) and
per kernel, PyTorch op and NVTX range, its time in each iteration (_internal/diff_per_iteration: GPU work
by the iteration its launching call started in) gives differences B - A, tested by the
one-sample trimmed t-test (stats.paired; a key absent in an iteration counts 0 there). Those rows
take this test (t, df, p_value, q_value) and read as one estimate: time_a_ns A's trimmed mean time
per paired iteration, delta_ns the trimmed mean difference, time_b_ns their sum, effect_pct and
delta_pct delta_ns of time_a_ns, calls_delta_pct the calls over the paired iterations; a row whose
calls moved by min_effect_pct or more while its trimmed mean per call did not reads 'more calls'
or 'fewer calls'. The instance columns (tmean, strata) stay as below. Where no pairing exists
(or paired=False, --no-paired), Yuen's tests below are the rows' tests.

Per iteration. When both sides have iterations, every time and count is divided by the side's
number of iterations (the largest count of one family on one thread: two processes stepping
together make one iteration each step) before it is compared: runs of different lengths compare.

Statistics unpaired, per row present on both sides (compare(); the formulas are in traceql/stats.py):
- kernels, ops, ranges, API calls, copies, memsets: Yuen's test on the instances' durations,
  Welch's t-test on their 20 % trimmed means (`trim`) with winsorized variances. The instances of
  one trace give the noise. Trimming keeps a warm-up iteration or a rare slow instance from hiding
  a change (with raw means, one 3x warm-up call among 40 hid a 20 % slowdown: q = 0.25) and from
  making one; trim 0 gives the plain Welch's test. With one instance on one side the other side's
  variance stands for both; with one on each side there is no noise estimate ('untested').
  Kernels, op calls, copies and memsets are tested within strata (launch configuration, input
  sizes and dtypes, bytes: queries/_internal/diff_side.sql), the strata both sides have combined, each
  weighted by its share of the key's calls on the two sides (stats.yuen_stratified): one name
  at several shapes varies far more across shapes than run to run, and pooled, a slowdown of
  one shape would drown in that spread. effect_pct is that weighted change.
- totals (GPU operations, kernels, copies, memsets): the summed time per iteration, compared by a
  z-test whose variance is the sum over their keys of n times the winsorized variance (instances
  independent, counts as observed).
- iteration time: Yuen's test on the iterations' durations (the warm-up iteration trimmed).
- GPU busy time, its breakdown and the span are one number per side: no noise estimate, 'untested'
  when they moved by the minimum effect or more.
The p-values of a section are adjusted by Benjamini-Hochberg (q, the false discovery rate among
its rows). A row changed when q < alpha (default 0.01) AND its relative change (effect_pct: of the
trimmed mean, within strata, for instance rows; of the time per iteration for totals) is at least min_effect_pct (default 5 %):
the instances of one trace cannot show the drift of clocks, temperature and placement between two
runs, so a significant change smaller than that is not called one. Calls per iteration that moved
by min_effect_pct or more, with an unchanged trimmed mean, make 'more calls' / 'fewer calls'. A key
on one side only is 'added' or 'removed'.

Wording: Δ = B - A everywhere. 'slower' and 'faster' only when the tested change and the time
per iteration (delta_ns) move the same way; a change of min_effect_pct or more that is not
significant reads 'not significant' (without a noise estimate 'untested'), never 'unchanged'.

The gate, gate(PCT) and the CLI's --gate PCT (exit GATE_EXIT = 7): the run is slower beyond the
noise (gate_q < alpha, Benjamini-Hochberg within the section) by more than PCT percent in
(a) the iteration time, (b) the GPU operation time per iteration, or (c) the time any kernel,
PyTorch op or NVTX range adds per iteration, as a percentage of A's iteration time (gate_pct).
Paired, each is the paired test's trimmed mean change; unpaired, (a) and (b) are the rows' own
tests, and (c) is the key's per-call change (effect_pct) applied to A's time of the key, as a
percentage of A's GPU operation time. Communication kernels and ops (launch.category) are not
read by (c): their time holds waits for other ranks. NVTX ranges on one side only are not read
(instrumentation changed, not work). min_effect_pct plays no part in the gate.

Verdict: 'regression' when iteration time or GPU operation time (per iteration) is 'slower' or
a key adds min_effect_pct or more of the iteration beyond the noise (the gate at min_effect_pct),
'improvement' when a headline row is 'faster' and nothing is slower, else 'no significant
change'. Warnings name what makes the sides unlike: other GPU models or counts, other profiler
versions (PyTorch profiler traces carry their CUDA runtime and driver versions in it),
another NVIDIA driver, CUDA driver or runtime or PyTorch version (trace columns, where both
sides record them), iterations of another kind.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from traceql.core.errors import InputError, UsageError
from traceql.analysis.stats import benjamini_hochberg, paired, trimmed, yuen, yuen_stratified, z_test

GATE_EXIT = 7  # exit code of `traceql diff --gate PCT` when the gate fails
DEFAULT_ALPHA = 0.01
DEFAULT_MIN_EFFECT_PCT = 5.0
DEFAULT_TRIM = 0.2
SECTIONS = ("total", "kernel", "op", "range", "range_gpu", "api", "memcpy", "memset")
HEADLINE = ("iteration time", "GPU operations")  # the rows the verdict and the gate read
SUMS = ("GPU operations", "kernels", "copies", "memsets")  # totals that are sums of instances
CHANGED = ("slower", "faster", "added", "removed", "more calls", "fewer calls")
TITLES = {"total": "Totals", "kernel": "Kernels", "op": "PyTorch ops (GPU time per op call)",
          "range": "NVTX ranges (CPU time per instance)",
          "range_gpu": "NVTX ranges (GPU busy time of the work launched inside)", "api": "API calls",
          "memcpy": "Copies", "memset": "Memsets"}


# ------------------------------------------------------------------------------ sides

@dataclass
class Side:
    spec: str           # as given
    kind: str           # 'file', 'trace' or 'workspace'
    db: Path | None = None
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
    """What SPEC names: an int or a number that is no file, a trace id of DB; a workspace file;
    else a trace file."""
    if isinstance(spec, bool):
        raise UsageError(f"{spec!r}: give a trace file, a trace id or a workspace")
    if isinstance(spec, int):
        return Side(str(spec), "trace", trace_id=spec)
    text = os.fspath(spec)
    path = Path(text)
    if path.exists() or path.is_symlink():
        if path.is_dir():
            raise InputError(f"{text}: is a directory, not a trace file or a workspace")
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


MIN_ITERATIONS = 3  # fewest iterations of the joint anchor on each side (analyze/iterations' min_iterations)


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


def _what(anchor: tuple) -> str:
    from traceql.core.faults import printable

    source, family = anchor
    if source == "ProfilerStep":
        return "ProfilerStep ranges"
    if source == "kernel pace":
        return f"the pace of kernel '{printable(family)}'"
    return f"NVTX range '{printable(family)}'"


def _joint(sides: list, stats: list, kernel_key: str) -> str | None:
    """Find the iterations of both sides by one rule and one anchor: each side's own anchor
    (analyze/iterations), A's first, tried on both; the first that gives MIN_ITERATIONS or more
    on each side is taken, and both sides' SideStats then hold its iterations (paired). Returns
    a note for the reader: which anchor was taken when a side found another, or why none could be
    matched (then the sides keep what they found)."""
    from traceql.store.workspace import WorkspaceFile

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
            with WorkspaceFile(side.db) as ws:
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
            other = [f"{name} found {_what(o) if o[0] else 'none'}" for name, o in zip("AB", own) if o != anchor]
            return (f"iterations of both sides: {_what(anchor)} ({counts[0]} in A, {counts[1]} in B; "
                    + "; ".join(other) + " on its own)") if other else None
    parts = []
    for anchor, counts in found:
        missing = " and ".join(f"{name} ({n})" for name, n in zip("AB", counts) if n < MIN_ITERATIONS)
        parts.append(f"{_what(anchor)}: fewer than {MIN_ITERATIONS} iterations in {missing}")
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
    from traceql.sources.digest import file_sha256
    from traceql.store.workspace import WorkspaceFile

    if not db.is_file() or not _is_workspace(db):
        return False
    try:
        with WorkspaceFile(db) as ws:
            found = ws.execute("SELECT trace_id, file_sha256 FROM trace WHERE path = ? ORDER BY trace_id",
                               [str(side.path.resolve())]).fetchall()
            if not found:
                return False
            digest = file_sha256(side.path)
            for trace_id, sha in found:
                if sha == digest:
                    side.db, side.trace_id, side.reused = db, trace_id, True
                    return True
    except (TraceqlError, duckdb.Error, OSError):
        return False
    return False


def load(a, b, db=None, kernel_key: str = "name", trim: float = DEFAULT_TRIM, progress=None,
         on_wait=None) -> tuple[SideStats, SideStats]:
    """The two sides' statistics. Trace files are ingested together into a temporary workspace,
    removed before this returns."""
    from traceql.store.workspace import WorkspaceFile, default_db

    if kernel_key not in ("name", "short_name"):
        raise UsageError(f"--kernel-key {kernel_key}: expected name or short_name")
    if not 0 <= trim < 0.5:
        raise UsageError(f"--trim {trim}: expected a fraction from 0 to below 0.5")
    sides = [classify(a), classify(b)]
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
            with WorkspaceFile(s.db) as ws:
                out.append(_side_stats(ws, s, kernel_key, trim))
        joint = _joint(sides, out, kernel_key)
    for s in out:
        s.joint_note = joint
    return out[0], out[1]


# ------------------------------------------------------------------------------ comparing

def _kind(section: str, key: str) -> str:
    if section != "total":
        return "instances"
    if key == "iteration time":
        return "iteration"
    return "sum" if key in SUMS else "single"


def _iteration_row(s: SideStats, trim: float) -> dict | None:
    d = s.iteration_durs
    if not d:
        return None
    import statistics

    _, tmean, wvar = trimmed(d, trim)
    return {"calls": len(d), "total_ns": sum(d), "mean_ns": statistics.fmean(d),
            "var_ns": statistics.variance(d) if len(d) > 1 else None, "tmean_ns": tmean, "wvar_ns": wvar,
            "med_ns": float(statistics.median(d))}


def compare(a: SideStats, b: SideStats, alpha: float = DEFAULT_ALPHA,
            min_effect_pct: float = DEFAULT_MIN_EFFECT_PCT, per_iteration: bool | None = None,
            trim: float = DEFAULT_TRIM, paired: bool | None = None) -> tuple[list, bool]:
    """The rows of a diff (module doc), and whether times are per iteration."""
    if not 0 < alpha < 1:
        raise UsageError(f"--alpha {alpha}: expected a number between 0 and 1")
    if not min_effect_pct >= 0:
        raise UsageError(f"--min-effect {min_effect_pct}: expected a percentage of 0 or more")
    both = bool(a.iterations and b.iterations)
    if per_iteration and not both:
        which = " and ".join(x for x, s in (("A", a), ("B", b)) if not s.iterations)
        raise UsageError(f"--per-iteration: no iterations detected in {which} (traceql analyze --rule iterations "
                         "says why)")
    unlike = _unlike_iterations(a, b) if both else None
    if unlike and per_iteration is None:
        both = False  # neither per iteration nor an iteration time: the two count different things
    norm = both if per_iteration is None else bool(per_iteration)
    ia, ib = (a.iterations, b.iterations) if norm else (1, 1)
    ra_all, rb_all = _align_devices(dict(a.rows), dict(b.rows))
    for s, rows in ((a, ra_all), (b, rb_all)):
        it = _iteration_row(s, trim)
        if it is not None and both:
            rows[("total", "iteration time")] = it
    rows = []
    for section, key in sorted(set(ra_all) | set(rb_all), key=lambda k: (SECTIONS.index(k[0]), k[1])):
        ra, rb = ra_all.get((section, key)), rb_all.get((section, key))
        rows.append(_row(section, key, ra, rb, ia, ib, trim, a.strata.get((section, key)),
                         b.strata.get((section, key))))
    paired = paired is not False and norm and a.anchor is not None and a.anchor == b.anchor \
        and bool(a.per_iter) and bool(b.per_iter)
    if paired:
        _pair(rows, a, b, trim)
    else:
        _unpaired_gate(rows, a, b)
    for section in SECTIONS:
        tested = [r for r in rows if r["section"] == section and r["p_value"] is not None]
        for r, q in zip(tested, benjamini_hochberg([r["p_value"] for r in tested])):
            r["q_value"] = q
    for r in rows:
        if r["gate_pct"] is not None:
            r["gate_p"], r["gate_q"] = r["p_value"], r["q_value"]
    for r in rows:
        r["verdict"] = _verdict(r, alpha, min_effect_pct)
        r["changed"] = r["verdict"] in CHANGED
    return rows, norm


GATED = ("kernel", "op", "range")  # the sections whose keys the gate reads, besides the headline rows


def _gated(r: dict) -> bool:
    """Whether the gate reads the row: an NVTX range only when both sides have it (a range added
    or removed is instrumentation that changed, not work; a kernel or op added is work)."""
    return r["section"] != "range" or (r["present_a"] and r["present_b"])


def _paired_iterations(a: SideStats, b: SideStats) -> list[int]:
    """The iterations compared pairwise: k on A against k on B, from the second (the first is
    warm-up) when both sides have 4 or more, up to the shorter side's count (at most the first
    max_iterations of _internal/diff_per_iteration)."""
    n = min(len(a.iteration_durs), len(b.iteration_durs))
    return list(range(2 if n >= 4 else 1, n + 1))


def _pair(rows: list, a: SideStats, b: SideStats, trim: float) -> None:
    """The paired comparison (module doc): per row of the headline and of the gated sections, the
    differences B - A of its time in iteration k, tested by stats.paired; gate_pct: that change
    as a percentage of A's iteration time (of A's own time for the headline rows)."""
    its = _paired_iterations(a, b)
    if not its:
        return
    base_iter = a.per_iter.get(("iteration", "iteration time"), {})
    _, base, _ = trimmed([base_iter.get(k, 0) for k in its], trim)
    for r in rows:
        section, key = r["section"], r["key"]
        where = ("iteration", key) if (section, key) == ("total", "iteration time") else (section, key)
        if not (section in GATED or (section == "total" and key in HEADLINE)) or not _gated(r):
            continue
        xa, xb = a.per_iter.get(where, {}), b.per_iter.get(where, {})
        if not xa and not xb:
            continue
        va, vb = [xa.get(k, 0) for k in its], [xb.get(k, 0) for k in its]
        t, df, p, tm = paired([y - x for x, y in zip(va, vb)], trim)
        r["pairs"], r["iter_delta_ns"] = len(its), tm
        r["communication"] = (section, key) in a.communication or (section, key) in b.communication
        # the row's test is the paired one; A, B, Δ and Δ% one estimate: A's trimmed mean over the
        # paired iterations and the paired change
        own = trimmed(va, trim)[1]
        r["t"], r["df"], r["p_value"] = t, df, p
        r["effect_pct"] = r["delta_pct"] = None if not own or tm is None else 100.0 * tm / own
        r["time_a_ns"], r["delta_ns"] = own, tm
        r["time_b_ns"] = None if tm is None else own + tm
        if section == "total":
            r["gate_pct"] = r["effect_pct"]
        else:
            r["gate_pct"] = None if not base or tm is None else 100.0 * tm / base
            ca, cb = a.per_iter.get(("calls", *where), {}), b.per_iter.get(("calls", *where), {})
            na, nb = sum(ca.get(k, 0) for k in its), sum(cb.get(k, 0) for k in its)
            r["calls_delta_pct"] = 100.0 * (nb - na) / na if na else None


def _unpaired_gate(rows: list, a: SideStats, b: SideStats) -> None:
    """Without paired iterations: the headline rows gate on their own change and test; a key on
    the time its per-call change (effect_pct, tested by Yuen's test) adds at A's calls, as a
    percentage of A's GPU operation time."""
    ops = next((r for r in rows if r["section"] == "total" and r["key"] == "GPU operations"), None)
    base = ops["time_a_ns"] if ops else None
    for r in rows:
        key = (r["section"], r["key"])
        r["communication"] = key in a.communication or key in b.communication
        if r["section"] == "total" and r["key"] in HEADLINE:
            r["gate_pct"] = r["delta_pct"] if r["key"] != "iteration time" else r["effect_pct"]
        elif r["section"] in GATED and _gated(r) and r["effect_pct"] is not None and r["time_a_ns"] and base:
            r["gate_pct"] = r["effect_pct"] * r["time_a_ns"] / base


_DEVICE_ROW = re.compile(r"GPU (\S+) (busy|compute|exposed communication|memory only)")


def _align_devices(ra: dict, rb: dict) -> tuple[dict, dict]:
    """Each side on one GPU, but not the same (another rank, CUDA_VISIBLE_DEVICES): their GPU rows
    align as 'GPU 0 / GPU 1 busy' (A's id, B's id) instead of one removed and one added."""
    def ids(rows):
        return {m.group(1) for section, key in rows if section == "total" and (m := _DEVICE_ROW.fullmatch(key))}

    ia, ib = ids(ra), ids(rb)
    if len(ia) != 1 or len(ib) != 1 or ia == ib:
        return ra, rb
    both = f"GPU {next(iter(ia))} / GPU {next(iter(ib))}"

    def renamed(rows):
        out = {}
        for (section, key), row in rows.items():
            m = _DEVICE_ROW.fullmatch(key) if section == "total" else None
            out[(section, f"{both} {m.group(2)}" if m else key)] = row
        return out

    return renamed(ra), renamed(rb)


def _unlike_iterations(a: SideStats, b: SideStats) -> str | None:
    """Why the two sides' iterations do not count the same thing (found by other means, or other
    NVTX ranges), else None. Two kernel paces may follow different kernels of one loop."""
    if a.iteration_source == b.iteration_source and (a.iteration_source == "kernel pace"
                                                     or a.iteration_family == b.iteration_family):
        return None

    def what(s):
        return s.iteration_source if s.iteration_source == "ProfilerStep" else \
            f"{s.iteration_source} '{s.iteration_family}'"

    return f"the iterations of A ({what(a)}) and of B ({what(b)}) are not the same kind"


# trace columns the warnings compare, with what they are called there
VERSIONS = (("driver_version", "NVIDIA driver"), ("cuda_driver_version", "CUDA driver version"),
            ("cuda_runtime_version", "CUDA runtime"), ("torch_version", "PyTorch"))


def warnings(a: SideStats, b: SideStats) -> list[str]:
    """Why the two sides may not be like with like: other GPU models or counts, other profiler
    versions (for PyTorch profiler traces with their CUDA runtime and driver versions), other
    formats, another NVIDIA driver, CUDA driver or runtime version or PyTorch version (the trace
    columns of VERSIONS, where both sides record them), iterations of another kind."""
    from traceql.core.faults import printable

    out = []

    def gpus(s):
        return ", ".join(f"{n} x {printable(name)}" for name, n in s.hardware.get("gpus", [])) or "no GPU described"

    if a.hardware.get("gpus") != b.hardware.get("gpus"):
        out.append(f"other GPUs: A ran on {gpus(a)}, B on {gpus(b)}")
    ea, eb = a.hardware.get("exporters"), b.hardware.get("exporters")
    if ea != eb:
        out.append(f"other profilers or versions (CUDA runtime and driver where the trace records them): A "
                   f"{'; '.join(map(printable, ea or ['unknown']))}, B {'; '.join(map(printable, eb or ['unknown']))}")
    for col, label in VERSIONS:  # only where both sides record it: an unknown is not a difference
        va, vb = a.hardware.get(col), b.hardware.get(col)
        if va and vb and va != vb:
            out.append(f"other {label}: A {', '.join(map(printable, va))}, B {', '.join(map(printable, vb))}")
    if a.anchor is None and a.iteration_source and b.iteration_source and \
            (a.iteration_source, a.iteration_family) != (b.iteration_source, b.iteration_family):
        out.append(f"iterations of another kind: A {_what((a.iteration_source, a.iteration_family))}, "
                   f"B {_what((b.iteration_source, b.iteration_family))}")
    return out


def notes(a: SideStats, b: SideStats, per_iteration: bool | None, norm: bool) -> list[str]:
    """What a reader of the diff should know about how it was computed."""
    out = []
    if a.joint_note:
        out.append(a.joint_note)
    if a.anchor is not None and a.anchor == b.anchor and norm:
        n = len(_paired_iterations(a, b))
        out.append(f"paired: iteration k of A against iteration k of B, {n} pairs"
                   + (" (the first, warm-up, left out)" if n and _paired_iterations(a, b)[0] == 2 else ""))
    unlike = _unlike_iterations(a, b) if a.iterations and b.iterations else None
    if unlike and a.joint_note and not norm:
        out[-1] += ": whole traces compared (--per-iteration compares per iteration anyway)"
    elif unlike:
        out.append(f"{unlike}: " + ("compared per iteration as asked (--per-iteration)" if norm else
                                    "whole traces compared (--per-iteration compares per iteration anyway)"))
    elif per_iteration is None and not norm and a.joint_note and not (a.anchor and a.anchor == b.anchor):
        out[-1] += ": whole traces compared"
    elif per_iteration is None and not norm and (a.iterations or b.iterations):
        which = "A" if not a.iterations else "B"
        out.append(f"no iterations detected in {which}: whole traces compared (traceql analyze --rule iterations "
                   "says why)")
    return out


def _stratified(sa: dict | None, sb: dict | None, trim: float):
    """Yuen's test within the strata both sides have (yuen_stratified), each weighted by its share
    of the key's calls on the two sides: (t, df, p, effect in percent), or None when no stratum is
    common to both sides with a noise estimate (then the key's instances are compared as one)."""
    if not sa or not sb:
        return None
    na, nb = sum(r["calls"] for r in sa.values()), sum(r["calls"] for r in sb.values())
    groups = [(sa[s]["calls"], sa[s]["tmean_ns"], sa[s]["wvar_ns"], sb[s]["calls"], sb[s]["tmean_ns"], sb[s]["wvar_ns"],
               sa[s]["calls"] / na + sb[s]["calls"] / nb)
              for s in sorted(set(sa) & set(sb)) if sa[s]["calls"] > 1 or sb[s]["calls"] > 1]
    return yuen_stratified(groups, trim) if groups else None


def _row(section: str, key: str, ra: dict | None, rb: dict | None, ia: int, ib: int, trim: float,
         sa: dict | None = None, sb: dict | None = None) -> dict:
    kind = _kind(section, key)
    g = (lambda r, k: None if r is None else r.get(k))
    calls_a, calls_b = g(ra, "calls"), g(rb, "calls")
    total_a, total_b = g(ra, "total_ns"), g(rb, "total_ns")
    mean_a, mean_b = g(ra, "mean_ns"), g(rb, "mean_ns")
    var_a, var_b = g(ra, "var_ns"), g(rb, "var_ns")
    tmean_a, tmean_b = g(ra, "tmean_ns"), g(rb, "tmean_ns")
    if kind == "iteration":
        time_a, time_b = tmean_a, tmean_b
    else:
        time_a = None if total_a is None else total_a / ia
        time_b = None if total_b is None else total_b / ib
    pct = (lambda x, y: None if x is None or y is None or x == 0 else 100.0 * (y - x) / x)
    t = df = p = None
    effect = pct(tmean_a, tmean_b) if kind in ("instances", "iteration") else pct(time_a, time_b)
    if ra is not None and rb is not None:
        by_stratum = _stratified(sa, sb, trim) if kind == "instances" else None
        if by_stratum is not None:
            t, df, p, effect = by_stratum
        elif kind in ("instances", "iteration") and calls_a and calls_b:
            t, df, p = yuen(calls_a, tmean_a, g(ra, "wvar_ns"), calls_b, tmean_b, g(rb, "wvar_ns"), trim)
        elif kind == "sum":
            tv_a, tv_b = g(ra, "total_var"), g(rb, "total_var")
            var = None if tv_a is None or tv_b is None else tv_a / ia ** 2 + tv_b / ib ** 2
            t, df, p = z_test(time_b - time_a, var)
    per_a = None if calls_a is None else calls_a / ia
    per_b = None if calls_b is None else calls_b / ib
    sd = (lambda v: None if v is None else math.sqrt(v))
    return {
        "section": section, "key": key, "kind": kind,
        "calls_a": calls_a, "calls_b": calls_b, "total_a_ns": total_a, "total_b_ns": total_b,
        "time_a_ns": time_a, "time_b_ns": time_b,
        "delta_ns": None if time_a is None and time_b is None else (time_b or 0) - (time_a or 0),
        "delta_pct": pct(time_a, time_b),
        "mean_a_ns": mean_a, "mean_b_ns": mean_b, "tmean_a_ns": tmean_a, "tmean_b_ns": tmean_b,
        "med_a_ns": g(ra, "med_ns"), "med_b_ns": g(rb, "med_ns"), "stddev_a_ns": sd(var_a), "stddev_b_ns": sd(var_b),
        "mean_delta_pct": pct(mean_a, mean_b), "tmean_delta_pct": pct(tmean_a, tmean_b),
        "calls_delta_pct": pct(per_a, per_b), "effect_pct": effect,
        "strata": len(set(sa or ()) | set(sb or ())) or None,
        "t": t, "df": df, "p_value": p, "q_value": None,
        "pairs": None, "iter_delta_ns": None, "gate_pct": None, "gate_p": None, "gate_q": None, "communication": False,
        "present_a": ra is not None and (kind == "single" or bool(calls_a)),
        "present_b": rb is not None and (kind == "single" or bool(calls_b)),
    }


def _verdict(r: dict, alpha: float, min_effect: float) -> str:
    """The row's verdict, worded so that it never contradicts its numbers: 'slower' and 'faster'
    only when the tested change (effect_pct) and the time per iteration (delta_ns, B - A) move the
    same way; a change at least min_effect that is not significant says so ('not significant'),
    one without a noise estimate 'untested'; 'unchanged' only below min_effect."""
    if r["present_a"] and not r["present_b"]:
        return "removed"
    if r["present_b"] and not r["present_a"]:
        return "added"
    if not r["present_a"]:
        return "unchanged"
    effect, delta = r["effect_pct"], r["delta_ns"]
    big = effect is not None and abs(effect) >= min_effect
    significant = r["q_value"] is not None and r["q_value"] < alpha
    calls = r["calls_delta_pct"] if r["kind"] == "instances" else None
    per_call = r["tmean_delta_pct"]
    if r["pairs"] and calls is not None and abs(calls) >= min_effect and (per_call is None or
                                                                         abs(per_call) < min_effect):
        return "more calls" if calls > 0 else "fewer calls"  # paired: the time moved with the calls
    if significant and big and (not delta or (delta > 0) == (effect > 0)):
        return "slower" if effect > 0 else "faster"
    if calls is not None and abs(calls) >= min_effect:
        return "more calls" if calls > 0 else "fewer calls"
    if significant and big:
        return "mixed"  # per call one way, per iteration the other, the calls moved by less than min_effect
    if big:
        return "untested" if r["p_value"] is None else "not significant"
    return "unchanged"


# ------------------------------------------------------------------------------ the result

COLUMNS = [  # name, Arrow type, description (README and `traceql diff --help` repeat the essentials)
    ("section", "string", "what the row aligns: total, kernel, op, range, range_gpu, api, memcpy, memset"),
    ("key", "string", "the alignment key: kernel name, 'op (direction)', NVTX path, API call, copy kind, memory "
                      "kind; for totals the metric"),
    ("verdict", "string", "slower, faster (the tested change and delta_ns both up, both down), added, removed, more "
                          "calls, fewer calls, mixed (the time per call and the time per iteration moved in opposite "
                          "directions), not significant (moved by the minimum effect or more, q not below alpha), "
                          "untested (moved by the minimum effect or more, no noise estimate) or unchanged (moved by "
                          "less than the minimum effect)"),
    ("changed", "bool", "the verdict is a change (slower, faster, added, removed, more or fewer calls)"),
    ("calls_a", "int64", "instances on side A (iterations for 'iteration time', operations for GPU rows)"),
    ("calls_b", "int64", "instances on side B"),
    ("time_a_ns", "float64", "side A's summed time, per iteration when per_iteration (for 'iteration time' the "
                             "trimmed mean iteration, for 'span' the span; paired 'iteration time' and 'GPU "
                             "operations': the trimmed mean over the paired iterations)"),
    ("time_b_ns", "float64", "side B's, the same way (paired 'iteration time' and 'GPU operations': time_a_ns + "
                             "iter_delta_ns, A's typical iteration changed by the paired change)"),
    ("delta_ns", "float64", "time_b_ns - time_a_ns"),
    ("delta_pct", "float64", "delta_ns as a percentage of time_a_ns"),
    ("mean_a_ns", "float64", "mean instance duration on side A"),
    ("mean_b_ns", "float64", "mean instance duration on side B"),
    ("mean_delta_pct", "float64", "change of the mean in percent"),
    ("tmean_a_ns", "float64", "trimmed mean instance duration on side A (the trim shortest and longest left out): "
                              "what the test compares"),
    ("tmean_b_ns", "float64", "trimmed mean instance duration on side B"),
    ("tmean_delta_pct", "float64", "change of the trimmed mean in percent"),
    ("effect_pct", "float64", "the change the verdict reads, in percent: for kernels, op calls, copies and memsets "
                              "the change of the trimmed mean within each stratum (launch configuration, input sizes, "
                              "bytes) both sides have, weighted by its share of calls; for other instance rows and "
                              "the iteration time the change of the trimmed mean; for totals delta_pct"),
    ("strata", "int64", "kernels, op calls, copies, memsets: the strata of the key on either side (launch "
                        "configurations, input sizes and dtypes, byte counts)"),
    ("calls_delta_pct", "float64", "change of the calls (per iteration when per_iteration) in percent"),
    ("med_a_ns", "float64", "median instance duration on side A"),
    ("med_b_ns", "float64", "median instance duration on side B"),
    ("stddev_a_ns", "float64", "sample standard deviation of the instance durations on side A"),
    ("stddev_b_ns", "float64", "on side B"),
    ("total_a_ns", "int64", "side A's summed time, whole trace(s)"),
    ("total_b_ns", "int64", "side B's summed time, whole trace(s)"),
    ("t", "float64", "paired rows: t of the one-sample trimmed t-test on the per-iteration differences; else "
                     "Yuen's t on trimmed means (Welch's with trim 0; within strata, combined, for rows with strata; "
                     "z for the summed totals); NULL when untested or infinite (no spread)"),
    ("df", "float64", "Welch-Satterthwaite degrees of freedom (of the trimmed samples); NULL for a z-test or when "
                      "infinite"),
    ("p_value", "float64", "two-sided p-value; NULL when untested"),
    ("q_value", "float64", "Benjamini-Hochberg adjusted p-value within the section: the change is called when "
                           "q_value < alpha and it is at least min_effect_pct"),
    ("pairs", "int64", "iterations compared pairwise (iteration k of A against iteration k of B, warm-up left out); "
                       "NULL when the sides are not paired or the row is not gated"),
    ("iter_delta_ns", "float64", "paired: trimmed mean over the paired iterations of B's minus A's time of the row in "
                                 "iteration k"),
    ("gate_pct", "float64", "what --gate compares with PCT: for 'iteration time' and 'GPU operations' their change in "
                            "percent (paired: iter_delta_ns of A's trimmed mean); for kernels, ops and NVTX ranges "
                            "the time they add per iteration as a percentage of A's iteration time (paired: "
                            "iter_delta_ns; unpaired: effect_pct of A's time of the key, of A's GPU operation time)"),
    ("gate_p", "float64", "p-value of gate_pct's test: the row's p_value (paired: the trimmed t-test over the "
                          "iterations, stats.paired)"),
    ("gate_q", "float64", "the row's q_value; the gate needs gate_q < alpha"),
    ("communication", "bool", "the row's kernels are communication kernels (launch.category): their time holds waits "
                              "for other ranks, so the gate does not read them"),
]


@dataclass
class Diff:
    """What `traceql diff` prints. rows: a pyarrow.Table, one row per aligned key of every section
    (COLUMNS), sections in SECTIONS order, the largest time changes first; its schema metadata
    b'traceql.diff' holds summary() as JSON. a, b: the sides (spec, kind, traces, iterations).
    A Diff is itself an Arrow stream of its rows: pyarrow.table(diff), polars.from_arrow(diff)."""

    rows: "pa.Table"
    a: dict
    b: dict
    verdict: str
    alpha: float
    min_effect_pct: float
    per_iteration: bool
    kernel_key: str
    trim: float
    notes: list = field(default_factory=list)  # how it was computed, for the reader (write_text prints them)
    warnings: list = field(default_factory=list)  # why the sides may not compare like with like

    def summary(self) -> dict:
        return {"verdict": self.verdict, "warnings": self.warnings, "notes": self.notes, "a": self.a, "b": self.b,
                "alpha": self.alpha,
                "min_effect_pct": self.min_effect_pct, "per_iteration": self.per_iteration,
                "kernel_key": self.kernel_key, "trim": self.trim, "headline": [r for r in self.rows.to_pylist()
                                                            if r["section"] == "total" and r["key"] in HEADLINE]}

    def changed(self, section: str | None = None) -> list[dict]:
        """The rows whose verdict is a change (of one section)."""
        return [r for r in self.rows.to_pylist() if r["changed"] and (section is None or r["section"] == section)]

    def gate(self, pct: float) -> list[dict]:
        """The rows that trip `--gate PCT` (a CI gate fails when there is one): (a) the iteration
        time or (b) the GPU operation time per iteration slower by more than PCT percent, or (c) a
        kernel, PyTorch op or NVTX range that adds more than PCT percent of A's iteration time per
        iteration (gate_pct), each beyond the noise (gate_q < alpha). Communication kernels and
        ops are not read (their time holds waits for other ranks). The headline rows first, then
        the largest gate_pct."""
        return gate_rows(self.rows.to_pylist(), pct, self.alpha)

    def __arrow_c_stream__(self, requested_schema=None):
        return self.rows.__arrow_c_stream__(requested_schema)


def diff(a, b, db=None, *, alpha: float = DEFAULT_ALPHA, min_effect_pct: float = DEFAULT_MIN_EFFECT_PCT,
         per_iteration: bool | None = None, kernel_key: str = "name", trim: float = DEFAULT_TRIM,
         paired: bool | None = None, progress=None, on_wait=None) -> Diff:
    """Compare side A (before) with side B (after), see the module doc. a, b: a trace file, a trace
    id of the workspace DB (default: $TRACEQL_DB or ./traceql.duckdb), or a workspace file.
    alpha: the false discovery rate under which a change is significant; min_effect_pct: the
    smallest relative change called one; per_iteration: None to compare per iteration when both
    sides have iterations, True to require it, False for whole traces; kernel_key: 'name' or
    'short_name'; paired: None to pair the iterations when one anchor gives them on both sides,
    False for the unpaired tests (Yuen's) everywhere. progress, on_wait: as for traceql.ingest."""
    sa, sb = load(a, b, db, kernel_key=kernel_key, trim=trim, progress=progress, on_wait=on_wait)
    rows, norm = compare(sa, sb, alpha, min_effect_pct, per_iteration, trim, paired)
    if paired is False:
        sa.anchor = sb.anchor = None  # nothing paired: no note says so
    said = notes(sa, sb, per_iteration, norm)
    return _result(rows, sa, sb, alpha, min_effect_pct, norm, kernel_key, trim, said, warnings(sa, sb))


def gate_rows(rows: list, pct: float, alpha: float) -> list[dict]:
    """The rows of a diff that trip a gate of PCT percent (Diff.gate)."""
    out = [r for r in rows if (r["section"] in GATED or (r["section"] == "total" and r["key"] in HEADLINE))
           and not r["communication"] and r["gate_pct"] is not None and r["gate_pct"] > pct
           and r["gate_q"] is not None and r["gate_q"] < alpha]
    return sorted(out, key=lambda r: (r["section"] != "total", HEADLINE.index(r["key"]) if r["section"] == "total"
                                      else 0, -r["gate_pct"], r["section"], r["key"]))


def _order(r: dict):
    """Sections in SECTIONS order; totals in a fixed order (iteration time, GPU operations, their
    parts, span, the GPUs); other rows changed first, then by the size of their time change."""
    if r["section"] == "total":
        fixed = HEADLINE + SUMS[1:] + ("span",)
        return (0, fixed.index(r["key"]) if r["key"] in fixed else len(fixed), r["key"])
    return (SECTIONS.index(r["section"]), not r["changed"], -abs(r["delta_ns"] or 0.0), r["key"])


def _result(rows, sa: SideStats, sb: SideStats, alpha, min_effect_pct, norm, kernel_key, trim, said=(),
            warned=()) -> Diff:
    import pyarrow as pa

    rows = sorted(rows, key=_order)
    head = {r["key"]: r["verdict"] for r in rows if r["section"] == "total" and r["key"] in HEADLINE}
    adds = gate_rows([r for r in rows if r["section"] != "total"], min_effect_pct, alpha)
    verdict = ("regression" if "slower" in head.values() or adds else
               "improvement" if "faster" in head.values() else "no significant change")
    fields = [pa.field(name, getattr(pa, kind)() if kind != "bool" else pa.bool_(),
                       metadata={b"description": doc.encode()}) for name, kind, doc in COLUMNS]
    for r in rows:
        for k in ("t", "df"):
            if r[k] is not None and not math.isfinite(r[k]):
                r[k] = None
    table = pa.Table.from_pylist([{name: r[name] for name, _, _ in COLUMNS} for r in rows],
                                 schema=pa.schema(fields))
    d = Diff(table, sa.info(), sb.info(), verdict, alpha, min_effect_pct, norm, kernel_key, trim, list(said),
             list(warned))
    meta = json.dumps({k: v for k, v in d.summary().items() if k != "headline"}, default=str)
    d.rows = table.replace_schema_metadata({b"traceql.diff": meta.encode()})
    return d
