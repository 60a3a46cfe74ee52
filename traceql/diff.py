"""`traceql diff A B`: what changed between two runs, and whether it is more than run-to-run noise.

Sides. A and B are each a trace file (nsys, nvprof or PyTorch profiler), ingested into a temporary
workspace that is removed afterwards; a trace id of the workspace (--db); or a workspace file, all
of whose traces make one side (the ranks of one job). The two sides may be of different formats:
they meet in the contract's views, aligned by names.

Alignment. queries/diff/side.sql runs on each side where its rows live and gives, per key, the
count, sum, mean, variance, median, min and max of its instances' durations: kernels by name (or
short name), PyTorch ops by name and direction (GPU time per op call), NVTX ranges by path (CPU time
per instance, and the GPU busy time of the work launched inside), API calls by name, copies by
kind, memsets by memory kind; and the totals (summed GPU operation time, busy time and its
breakdown per GPU, span). Only these aggregates leave a side, so the two sides may live in
different workspaces and each may hold millions of instances. The iterations come from analyze's
`iterations` rule (ProfilerStep, a repeating NVTX range, or a kernel's pace).

Per iteration. When both sides have iterations, every time and count is divided by the side's
number of iterations (the largest count of one family on one thread: two processes stepping
together make one iteration each step) before it is compared: runs of different lengths compare.

Statistics, per row present on both sides (compare(); the formulas are in traceql/stats.py):
- kernels, ops, ranges, API calls, copies, memsets: Yuen's test on the instances' durations,
  Welch's t-test on their 20 % trimmed means (`trim`) with winsorized variances. The instances of
  one trace give the noise. Trimming keeps a warm-up iteration or a rare slow instance from hiding
  a change (with raw means, one 3x warm-up call among 40 hid a 20 % slowdown: q = 0.25) and from
  making one; trim 0 gives the plain Welch's test. With one instance on one side the other side's
  variance stands for both; with one on each side there is no noise estimate ('untested').
  Kernels, op calls, copies and memsets are tested within strata (launch configuration, input
  sizes and dtypes, bytes: queries/diff/side.sql), the strata both sides have combined, each
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

Verdict: 'regression' when iteration time or GPU operation time (per iteration) is 'slower',
'improvement' when one is 'faster' and none slower, else 'no significant change'. gate(PCT): those
two rows when slower by more than PCT percent with q < alpha (min_effect_pct plays no part): the
CLI's --gate PCT exits with GATE_EXIT then.
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

from .errors import InputError, UsageError
from .stats import benjamini_hochberg, trimmed, yuen, yuen_stratified, z_test

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


@dataclass
class SideStats:
    side: Side
    rows: dict              # (section, key) -> the row of queries/diff/side.sql
    traces: list            # trace rows: trace_id, path, source_format, exporter_version
    iterations: int | None  # None: no iterations detected
    iteration_durs: list = field(default_factory=list)
    iteration_source: str | None = None
    iteration_family: str | None = None
    strata: dict = field(default_factory=dict)  # (section, key) -> {stratum: row}: like-for-like groups

    def info(self) -> dict:
        return {"spec": self.side.spec, "kind": self.side.kind,
                "db": None if self.side.kind == "file" else str(self.side.db),
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
    from . import library
    from .results import tidy

    ws.check_trace(side.trace_id)
    q = library.get("diff/side")
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
        "SELECT trace_id, path, source_format, exporter_version FROM trace WHERE ? IS NULL OR trace_id = ? "
        "ORDER BY trace_id", [side.trace_id, side.trace_id]).to_arrow_table().to_pylist()
    found = ws.analyze(["iterations"], trace_id=side.trace_id).evidence["iterations"]
    its = [r for r in found.to_pylist() if r["recoverable_ns"] is not None and r["dur_ns"] is not None]
    counts: dict = {}
    for r in its:
        k = (r["trace_id"], r["pid"], r["tid"], r["family"])
        counts[k] = counts.get(k, 0) + 1
    top = max(counts, key=lambda k: (counts[k], str(k))) if counts else None
    return SideStats(side, rows, traces, counts[top] if top else None, [r["dur_ns"] for r in its],
                     its[0]["source"] if its else None, top[3] if top else None, strata)


def load(a, b, db=None, kernel_key: str = "name", trim: float = DEFAULT_TRIM, progress=None,
         on_wait=None) -> tuple[SideStats, SideStats]:
    """The two sides' statistics. Trace files are ingested together into a temporary workspace,
    removed before this returns."""
    from .workspace import Workspace, default_db

    if kernel_key not in ("name", "short_name"):
        raise UsageError(f"--kernel-key {kernel_key}: expected name or short_name")
    if not 0 <= trim < 0.5:
        raise UsageError(f"--trim {trim}: expected a fraction from 0 to below 0.5")
    sides = [classify(a), classify(b)]
    for s in sides:
        if s.kind == "trace":
            s.db = Path(db) if db is not None else default_db()
    files = [s for s in sides if s.kind == "file"]
    with contextlib.ExitStack() as stack:
        if files:
            from .ingest import ingest

            tmp = Path(tempfile.mkdtemp(prefix="traceql-diff-"))
            stack.callback(shutil.rmtree, tmp, True)
            tmp_db = tmp / "diff.duckdb"
            results = ingest([s.path for s in files], db=tmp_db, progress=progress, on_wait=on_wait)
            ids = {os.path.realpath(r.path): r.trace_id for r in results}
            for s in files:
                s.db, s.trace_id = tmp_db, ids[os.path.realpath(s.path)]
        out = []
        for s in sides:
            with Workspace(s.db) as ws:
                out.append(_side_stats(ws, s, kernel_key, trim))
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
            trim: float = DEFAULT_TRIM) -> tuple[list, bool]:
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
    for section in SECTIONS:
        tested = [r for r in rows if r["section"] == section and r["p_value"] is not None]
        for r, q in zip(tested, benjamini_hochberg([r["p_value"] for r in tested])):
            r["q_value"] = q
    for r in rows:
        r["verdict"] = _verdict(r, alpha, min_effect_pct)
        r["changed"] = r["verdict"] in CHANGED
    return rows, norm


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


def notes(a: SideStats, b: SideStats, per_iteration: bool | None, norm: bool) -> list[str]:
    """What a reader of the diff should know about how it was computed."""
    out = []
    unlike = _unlike_iterations(a, b) if a.iterations and b.iterations else None
    if unlike:
        out.append(f"{unlike}: " + ("compared per iteration as asked (--per-iteration)" if norm else
                                    "whole traces compared (--per-iteration compares per iteration anyway)"))
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
        "present_a": ra is not None and (kind == "single" or bool(calls_a)),
        "present_b": rb is not None and (kind == "single" or bool(calls_b)),
    }


def _verdict(r: dict, alpha: float, min_effect: float) -> str:
    if r["present_a"] and not r["present_b"]:
        return "removed"
    if r["present_b"] and not r["present_a"]:
        return "added"
    if not r["present_a"]:
        return "unchanged"
    effect = r["effect_pct"]
    big = effect is not None and abs(effect) >= min_effect
    if r["q_value"] is not None and r["q_value"] < alpha and big:
        return "slower" if effect > 0 else "faster"
    if r["kind"] == "instances" and r["calls_delta_pct"] is not None and abs(r["calls_delta_pct"]) >= min_effect:
        return "more calls" if r["calls_delta_pct"] > 0 else "fewer calls"
    if r["p_value"] is None and big:
        return "untested"
    return "unchanged"


# ------------------------------------------------------------------------------ the result

COLUMNS = [  # name, Arrow type, description (README and `traceql diff --help` repeat the essentials)
    ("section", "string", "what the row aligns: total, kernel, op, range, range_gpu, api, memcpy, memset"),
    ("key", "string", "the alignment key: kernel name, 'op (direction)', NVTX path, API call, copy kind, memory "
                      "kind; for totals the metric"),
    ("verdict", "string", "slower, faster, added, removed, more calls, fewer calls, unchanged, or untested (moved by "
                          "the minimum effect or more, but no noise estimate)"),
    ("changed", "bool", "the verdict is a change (slower, faster, added, removed, more or fewer calls)"),
    ("calls_a", "int64", "instances on side A (iterations for 'iteration time', operations for GPU rows)"),
    ("calls_b", "int64", "instances on side B"),
    ("time_a_ns", "float64", "side A's summed time, per iteration when per_iteration (for 'iteration time' the "
                             "trimmed mean iteration, for 'span' the span)"),
    ("time_b_ns", "float64", "side B's, the same way"),
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
    ("t", "float64", "Yuen's t on trimmed means (Welch's with trim 0; within strata, combined, for rows with strata; "
                     "z for the summed totals); NULL when untested or infinite (no spread)"),
    ("df", "float64", "Welch-Satterthwaite degrees of freedom (of the trimmed samples); NULL for a z-test or when "
                      "infinite"),
    ("p_value", "float64", "two-sided p-value; NULL when untested"),
    ("q_value", "float64", "Benjamini-Hochberg adjusted p-value within the section: the change is called when "
                           "q_value < alpha and it is at least min_effect_pct"),
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

    def summary(self) -> dict:
        return {"verdict": self.verdict, "notes": self.notes, "a": self.a, "b": self.b, "alpha": self.alpha,
                "min_effect_pct": self.min_effect_pct, "per_iteration": self.per_iteration,
                "kernel_key": self.kernel_key, "trim": self.trim, "headline": [r for r in self.rows.to_pylist()
                                                            if r["section"] == "total" and r["key"] in HEADLINE]}

    def changed(self, section: str | None = None) -> list[dict]:
        """The rows whose verdict is a change (of one section)."""
        return [r for r in self.rows.to_pylist() if r["changed"] and (section is None or r["section"] == section)]

    def gate(self, pct: float) -> list[dict]:
        """The headline rows (iteration time, GPU operations) slower by more than PCT percent with
        q < alpha: a CI gate fails when there is one."""
        return [r for r in self.rows.to_pylist()
                if r["section"] == "total" and r["key"] in HEADLINE and r["delta_pct"] is not None
                and r["delta_pct"] > pct and r["q_value"] is not None and r["q_value"] < self.alpha]

    def __arrow_c_stream__(self, requested_schema=None):
        return self.rows.__arrow_c_stream__(requested_schema)


def diff(a, b, db=None, *, alpha: float = DEFAULT_ALPHA, min_effect_pct: float = DEFAULT_MIN_EFFECT_PCT,
         per_iteration: bool | None = None, kernel_key: str = "name", trim: float = DEFAULT_TRIM, progress=None,
         on_wait=None) -> Diff:
    """Compare side A (before) with side B (after), see the module doc. a, b: a trace file, a trace
    id of the workspace DB (default: $TRACEQL_DB or ./traceql.duckdb), or a workspace file.
    alpha: the false discovery rate under which a change is significant; min_effect_pct: the
    smallest relative change called one; per_iteration: None to compare per iteration when both
    sides have iterations, True to require it, False for whole traces; kernel_key: 'name' or
    'short_name'. progress, on_wait: as for traceql.ingest (files to ingest)."""
    sa, sb = load(a, b, db, kernel_key=kernel_key, trim=trim, progress=progress, on_wait=on_wait)
    rows, norm = compare(sa, sb, alpha, min_effect_pct, per_iteration, trim)
    said = notes(sa, sb, per_iteration, norm)
    return _result(rows, sa, sb, alpha, min_effect_pct, norm, kernel_key, trim, said)


def _order(r: dict):
    """Sections in SECTIONS order; totals in a fixed order (iteration time, GPU operations, their
    parts, span, the GPUs); other rows changed first, then by the size of their time change."""
    if r["section"] == "total":
        fixed = HEADLINE + SUMS[1:] + ("span",)
        return (0, fixed.index(r["key"]) if r["key"] in fixed else len(fixed), r["key"])
    return (SECTIONS.index(r["section"]), not r["changed"], -abs(r["delta_ns"] or 0.0), r["key"])


def _result(rows, sa: SideStats, sb: SideStats, alpha, min_effect_pct, norm, kernel_key, trim, said=()) -> Diff:
    import pyarrow as pa

    rows = sorted(rows, key=_order)
    head = {r["key"]: r["verdict"] for r in rows if r["section"] == "total" and r["key"] in HEADLINE}
    verdict = ("regression" if "slower" in head.values() else
               "improvement" if "faster" in head.values() else "no significant change")
    fields = [pa.field(name, getattr(pa, kind)() if kind != "bool" else pa.bool_(),
                       metadata={b"description": doc.encode()}) for name, kind, doc in COLUMNS]
    for r in rows:
        for k in ("t", "df"):
            if r[k] is not None and not math.isfinite(r[k]):
                r[k] = None
    table = pa.Table.from_pylist([{name: r[name] for name, _, _ in COLUMNS} for r in rows],
                                 schema=pa.schema(fields))
    d = Diff(table, sa.info(), sb.info(), verdict, alpha, min_effect_pct, norm, kernel_key, trim, list(said))
    meta = json.dumps({k: v for k, v in d.summary().items() if k != "headline"}, default=str)
    d.rows = table.replace_schema_metadata({b"traceql.diff": meta.encode()})
    return d


# ------------------------------------------------------------------------------ for people

def _signed_ns(v) -> str:
    from .render import human_ns

    return "" if v is None else ("+" if v > 0 else "") + human_ns(v)


def _pct(v) -> str:
    return "" if v is None else f"{v:+.1f}%"


def _q(v) -> str:
    return "" if v is None else "<1e-4" if v < 1e-4 else f"{v:.2g}"


def _side_text(side: dict) -> str:
    from .faults import printable

    traces = side["traces"]
    what = ", ".join(" ".join(x for x in (t["source_format"], t["exporter_version"]) if x) for t in traces[:1])
    if side["kind"] == "file":
        head = f"{printable(side['spec'])} ({what})"
    elif side["kind"] == "trace":
        head = f"trace {side['trace_id']} of {printable(side['db'])}: {printable(traces[0]['path'])} ({what})"
    else:
        head = f"{printable(side['spec'])}: {len(traces)} trace{'s' if len(traces) != 1 else ''} ({what})"
    its = side["iterations"]
    if not its:
        return head + ", no iterations detected"
    source = side["iteration_source"]
    how = source if source == "ProfilerStep" else f"{source}: {printable(side['iteration_family'])}"
    return head + f", {its} iterations ({how})"


def verdict_text(d: Diff) -> str:
    """'regression: GPU operations +8.1%, iteration time +6.9% per iteration' and the rule."""
    head = [r for r in d.rows.to_pylist() if r["section"] == "total" and r["key"] in HEADLINE]
    moved = ", ".join(f"{r['key']} {_pct(r['delta_pct'])} ({r['verdict']})" for r in head if r["delta_pct"] is not None)
    per = " per iteration" if d.per_iteration else ""
    rule = (f"a change is called when Yuen's test on {round(d.trim * 100)}% trimmed means gives q < {d.alpha:g} "
            f"(Benjamini-Hochberg) and it is at least {d.min_effect_pct:g}%")
    return f"{d.verdict}: {moved or 'no GPU operations or iterations to compare'}{per}; {rule}"


_TOTAL_COLUMNS = [("verdict", "verdict"), ("A", "time_a_ns"), ("B", "time_b_ns"), ("Δ", "delta_ns"),
                  ("Δ%", "effect_pct"), ("q", "q_value"), ("metric", "key")]
_ROW_COLUMNS = [("verdict", "verdict"), ("calls A", "calls_a"), ("calls B", "calls_b"), ("tmean A", "tmean_a_ns"),
                ("tmean B", "tmean_b_ns"), ("Δ%", "effect_pct"), ("Δtime", "delta_ns"), ("q", "q_value")]
_KEY_NAMES = {"kernel": "kernel", "op": "op", "range": "path", "range_gpu": "path", "api": "call", "memcpy": "kind",
              "memset": "kind"}


def _display(rows: list[dict], section: str, markdown: bool):
    """The rows as a table of text for people: numbers right-aligned, the key last."""
    import pyarrow as pa

    from .render import human_ns

    right = {b"align": b"right"}
    columns = _TOTAL_COLUMNS if section == "total" else _ROW_COLUMNS + [(_KEY_NAMES[section], "key")]
    cells = {h: [] for h, _ in columns}
    for r in rows:
        for head, name in columns:
            v = r[name]
            if name == "key":
                text = v if not markdown else "`" + v.replace("`", "'") + "`"
            elif name == "verdict":
                text = v
            elif name in ("calls_a", "calls_b"):
                text = f"{v or 0:,}"
            elif name == "delta_ns":
                text = _signed_ns(v)
            elif name.endswith("_pct"):
                text = _pct(v)
            elif name == "q_value":
                text = _q(v)
            else:
                text = "" if v is None else human_ns(v)
            cells[head].append(text)
    fields = [pa.field(h, pa.string(), metadata=None if name in ("key", "verdict") else right) for h, name in columns]
    return pa.table([pa.array(cells[h], pa.string()) for h, _ in columns], schema=pa.schema(fields))


def _counts(rows: list[dict]) -> str:
    found: dict = {}
    for r in rows:
        if r["changed"]:
            found[r["verdict"]] = found.get(r["verdict"], 0) + 1
    return ", ".join(f"{n} {v}" for v, n in found.items())


def write_text(d: Diff, out, fmt: str = "table", width: int | None = None, limit: int = 10, sections=None,
               show_all: bool = False) -> None:
    """Print a Diff for people (fmt 'table') or as markdown for a pull request: the sides, the
    verdict, the totals, then per section its changed rows (all rows with show_all), the largest
    time change first, at most LIMIT of them."""
    import io

    from .analyze import _wrapped
    from .render import render

    md = fmt == "markdown"
    rows = d.rows.to_pylist()
    per = ", time per iteration" if d.per_iteration else ""
    if md:
        out.write(f"## traceql diff: {d.verdict}\n\n")
        out.write(f"- A (before): {_side_text(d.a)}\n- B (after): {_side_text(d.b)}\n\n")
        out.write(f"**{verdict_text(d)}.**\n")
        for note in d.notes:
            out.write(f"\nNote: {note}.\n")
    else:
        out.write(_wrapped(f"A (before): {_side_text(d.a)}", width) + "\n")
        out.write(_wrapped(f"B (after):  {_side_text(d.b)}", width) + "\n")
        out.write(_wrapped(f"Verdict: {verdict_text(d)}.", width) + "\n")
        for note in d.notes:
            out.write(_wrapped(f"Note: {note}.", width) + "\n")
    for section in sections or SECTIONS:
        mine = [r for r in rows if r["section"] == section]
        if section == "total":  # every total that is not zero on both sides
            shown = [r for r in mine if (r["time_a_ns"] or 0) != 0 or (r["time_b_ns"] or 0) != 0]
            title = f"{TITLES[section]}{per}"
        else:
            if not mine:
                continue
            changed = [r for r in mine if r["changed"]]
            shown = mine if show_all else changed
            counts = _counts(mine)
            title = (f"{TITLES[section]}{per}: {len(changed)} of {len(mine):,} changed ({counts})" if changed
                     else f"{TITLES[section]}{per}: none of {len(mine):,} changed")
        more = max(0, len(shown) - limit) if section != "total" else 0
        shown = shown if section == "total" else shown[:limit]
        out.write(f"\n### {title}\n" if md else "\n" + _wrapped(title, width) + "\n")
        if not shown:
            continue
        if md:
            out.write("\n")
        table = _display(shown, section, md)
        if md:
            render(table, "markdown", out)
        else:
            buf = io.StringIO()
            render(table, "table", buf, width=width)
            lines = buf.getvalue().splitlines()
            if lines and re.match(r"^[\d,]+ rows?", lines[-1].replace("\x1b[2m", "")):
                lines = lines[:-1]  # the row count: the title says it
            out.write("\n".join(lines) + "\n")
        if more:
            note = f"({more:,} more; --limit N shows more, --format csv every row)"
            out.write(f"\n{note}\n" if md else _wrapped(note, width) + "\n")
