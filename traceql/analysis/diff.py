"""`traceql diff A B`: what changed between two runs, and whether it is more than run-to-run noise.

This module gives the result (Diff, diff(), the gate); the parts are diff_sides.py (the two sides
and their iterations), diff_compare.py (rows, tests, verdicts, warnings), diff_rules.py (what they
share) and diff_text.py (the text for people). The method:

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

import json
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from traceql.analysis.diff_compare import compare, notes, warnings
from traceql.analysis.diff_rules import (DEFAULT_ALPHA, DEFAULT_MIN_EFFECT_PCT, DEFAULT_TRIM, GATED, HEADLINE, SECTIONS,
                                         SUMS)
from traceql.analysis.diff_sides import SideStats, load

if TYPE_CHECKING:
    import pyarrow as pa


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
         paired: bool | None = None, progress=None, on_wait=None, open_export=None) -> Diff:
    """Compare side A (before) with side B (after), see the module doc. a, b: a trace file, a trace
    id of the workspace DB (default: $TRACEQL_DB or ./traceql.duckdb), or a workspace file.
    alpha: the false discovery rate under which a change is significant; min_effect_pct: the
    smallest relative change called one; per_iteration: None to compare per iteration when both
    sides have iterations, True to require it, False for whole traces; kernel_key: 'name' or
    'short_name'; paired: None to pair the iterations when one anchor gives them on both sides,
    False for the unpaired tests (Yuen's) everywhere. progress, on_wait: as for traceql.ingest.
    A side may be a Parquet export (a directory or URL, all its traces) when open_export opens
    one (traceql.engines.spark.ExportOpener: on Spark)."""
    sa, sb = load(a, b, db, kernel_key=kernel_key, trim=trim, progress=progress, on_wait=on_wait,
                  open_export=open_export)
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
