"""`traceql diff --gate` on generated runs with physical slowdowns (fixtures/slowdown.py): one
kernel 10 % and 20 % slower, every later GPU operation moved, trips the gate and is named; noise
alone and a trace against itself never trip; iterations found by one anchor on both sides, or the
reason why not; the paired statistics recomputed from the generator's durations; the wording of
every row of a golden output."""

from __future__ import annotations

import math
import re
import shutil
import sqlite3

import pytest

import traceql
from fixtures.gen_diff import KERNELS, generate
from fixtures.slowdown import kernel_totals, slow_down
from traceql.analysis.diff_rules import GATE_EXIT

from ..project.test_fixtures_ingest import check_golden
from ..util import cli as served

STEPS = 20
HEAVY = KERNELS["gemm_bwd"][0]  # 1.2 ms of a step of about 1.5 ms (weights below)
WEIGHTS = {"gemm_bwd": 10}
IDS = {"a": 1, "b": 2, "b10": 3, "b20": 4, "renamed": 5, "nosteps": 6, "othergpu": 7}


def run(*args):
    return served(*args, timeout=300, env={"COLUMNS": "100"})


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A (seed 1) and B (seed 2, the same program with other noise), B with HEAVY 10 % and 20 %
    slower (physically), A with its ProfilerStep ranges renamed 'train_step', B without them; one
    workspace holding the six (trace ids IDS)."""
    tmp = tmp_path_factory.mktemp("gate")
    files = {n: tmp / f"{n}.sqlite" for n in IDS}
    facts = {"a": generate(files["a"], seed=1, steps=STEPS, weights=WEIGHTS),
             "b": generate(files["b"], seed=2, steps=STEPS, weights=WEIGHTS)}
    for name in ("a", "b"):  # the driver of the profiled machine, as nsys records it (digits-only form)
        _system_env(files[name], {"NvDriverVersion": "5303002", "CudaDriverVersion": "12010"})
    for name, factor in (("b10", 1.1), ("b20", 1.2)):
        facts[name] = slow_down(files["b"], files[name], HEAVY, factor)
    shutil.copyfile(files["a"], files["renamed"])
    for name in ("nosteps", "othergpu"):
        shutil.copyfile(files["b"], files[name])
    for name, sql, n in (
            ("renamed", "UPDATE NVTX_EVENTS SET text = 'train_step' WHERE text LIKE 'ProfilerStep#%'", STEPS),
            ("nosteps", "DELETE FROM NVTX_EVENTS WHERE text LIKE 'ProfilerStep#%'", STEPS),
            ("othergpu", "DELETE FROM TARGET_INFO_GPU WHERE id = 1", 1),
            ("othergpu", "UPDATE TARGET_INFO_GPU SET name = 'Tesla V100-SXM2-16GB'", 1),
            ("othergpu", "UPDATE META_DATA_EXPORT SET value = '2024.6.1' WHERE name = 'EXPORT_PRODUCT_VERSION'", 1),
            ("othergpu", "UPDATE TARGET_INFO_SYSTEM_ENV SET value = CASE name WHEN 'NvDriverVersion' THEN "
                         "'560.94' ELSE '12060' END", 2)):
        con = sqlite3.connect(files[name])
        assert con.execute(sql).rowcount == n
        con.commit()
        con.close()
    db = tmp / "ws.duckdb"
    traceql.ingest([files[n] for n in IDS], db=db)
    return {"dir": tmp, "files": files, "facts": facts, "db": db}


def _system_env(path, values):
    from fixtures.gen_ranks import SYSTEM_ENV_DDL
    from fixtures.gen_nsys import GLOBAL_VID

    con = sqlite3.connect(path)
    con.execute(SYSTEM_ENV_DDL)
    con.executemany("INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (?, 'Local (CLI)', ?, ?, ?)",
                    [(GLOBAL_VID, k, {"NvDriverVersion": 205, "CudaDriverVersion": 611}[k], v) for k, v in values.items()])
    con.commit()
    con.close()


def by_key(d, section):
    return {r["key"]: r for r in d.rows.to_pylist() if r["section"] == section}


def _gpu_rows(path):
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        out = []
        for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY"):
            name = "(SELECT value FROM StringIds WHERE id = demangledName)" if "KERNEL" in table else "NULL"
            out += con.execute(f'SELECT correlationId, deviceId, start, "end", {name} FROM {table}').fetchall()
        return sorted(out, key=lambda r: (r[2], r[0]))
    finally:
        con.close()


def _cpu_rows(path, table):
    """(rowid, start, end, API name or NULL) of an nsys CPU table."""
    name = "(SELECT value FROM StringIds WHERE id = nameId)" if table.endswith("RUNTIME") else "NULL"
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return con.execute(f'SELECT rowid, start, "end", {name} FROM {table} ORDER BY rowid').fetchall()
    finally:
        con.close()


def test_the_slowdown_is_physical(runs):
    """Every instance of HEAVY 20 % longer; every GPU operation after one moved by the time added
    before it. The CPU side: each step's cudaStreamSynchronize waited for the GPU (the generator's
    GPU is never idle when it is called), so it now returns later by exactly the GPU time added
    before it; every later API call and NVTX range boundary of the thread moves by that, so the
    ProfilerStep ranges grow by the time their own HEAVY instance added."""
    before, after = _gpu_rows(runs["files"]["b"]), {r[0]: r for r in _gpu_rows(runs["files"]["b20"])}
    added, extras = 0, []  # extras: (original end, GPU time added by then)
    for corr, dev, start, end, name in before:
        extra = round((end - start) * 0.2) if name == HEAVY else 0
        assert after[corr][2:4] == (start + added, end + added + extra), corr
        added += extra
        extras.append((end, added))
    assert added == runs["facts"]["b20"]["added_ns"][0] and runs["facts"]["b20"]["instances"] == STEPS
    assert added == sum(round(d * 0.2) for d in runs["facts"]["b"]["durations"][HEAVY])
    assert kernel_totals(runs["files"]["b"])[0][0] == HEAVY

    calls = _cpu_rows(runs["files"]["b"], "CUPTI_ACTIVITY_KIND_RUNTIME")
    syncs = [(s, e) for _, s, e, name in calls if name.startswith("cudaStreamSynchronize")]
    assert len(syncs) == STEPS
    steps = []  # (original end of a sync, how late the thread runs from then on)
    for s, e in syncs:
        waited = [(end, late) for end, late in extras if end <= e]
        assert waited[-1][0] >= s  # the GPU was busy when the call was made: it waited
        steps.append((e, waited[-1][1]))  # the GPU time added before the work it waited for

    def late(t):
        return max([d for end, d in steps if end <= t], default=0)

    for table in ("CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS"):
        old, new = _cpu_rows(runs["files"]["b"], table), _cpu_rows(runs["files"]["b20"], table)
        assert [r[0] for r in old] == [r[0] for r in new] and old
        for (rowid, s, e, _), (_, s2, e2, _) in zip(old, new):
            assert (s2, e2) == (s + late(s), e + late(e)), (table, rowid)
    assert steps[-1][1] == added == runs["facts"]["b20"]["cpu_delay_ns"][next(iter(runs["facts"]["b20"]["cpu_delay_ns"]))]
    # the steps (NVTX ranges) grow by the time their HEAVY instance added: all but the first by 12-22 %
    growth = {}
    for path in (runs["files"]["b"], runs["files"]["b20"]):
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        for rowid, d in con.execute("SELECT rowid, \"end\" - start FROM NVTX_EVENTS WHERE text LIKE 'ProfilerStep#%'"):
            growth.setdefault(rowid, []).append(d)
        con.close()
    pct = sorted(100 * (b / a - 1) for rowid, (a, b) in growth.items())
    assert len(pct) == STEPS and pct[0] > 12 and pct[-2] < 22


@pytest.mark.parametrize("name, lo, hi", [("b10", 6.0, 10.0), ("b20", 13.0, 19.0)])
def test_physical_slowdowns_trip_the_gate(runs, name, lo, hi):
    """HEAVY 10 % (20 %) slower adds about 8 % (16 %) of the iteration: the gate trips on the
    iteration time (NVTX ProfilerStep ranges: the step's synchronize waited for the slower GPU), the
    GPU time per iteration, HEAVY and the NVTX ranges that hold the synchronize (the step and its
    optimizer range: it waits that much longer), nothing else."""
    d = traceql.diff(IDS["a"], IDS[name], db=runs["db"])
    assert d.verdict == "regression" and d.a["iteration_source"] == d.b["iteration_source"] == "ProfilerStep"
    assert [(r["section"], r["key"]) for r in d.gate(5)] == \
        [("total", "iteration time"), ("total", "GPU operations"), ("kernel", HEAVY),
         ("range", "ProfilerStep#*"), ("range", "ProfilerStep#* > optimizer")]
    heavy = by_key(d, "kernel")[HEAVY]
    assert heavy["verdict"] == "slower" and heavy["pairs"] == STEPS - 1 and lo < heavy["gate_pct"] < hi
    step = by_key(d, "total")["iteration time"]
    assert step["verdict"] == "slower" and step["pairs"] == STEPS - 1 and lo < step["gate_pct"] < hi


def test_gate_on_the_command_line(runs):
    proc = run("--db", runs["db"], "diff", IDS["a"], IDS["b10"], "--gate", "5")
    assert proc.returncode == GATE_EXIT == 7, proc.stderr
    assert proc.stderr.startswith("traceql: diff: iteration time +") and "; GPU operations +" in proc.stderr \
        and f"; kernel {HEAVY} adds " in proc.stderr and "; path ProfilerStep#* > optimizer adds " in proc.stderr
    assert proc.stderr.endswith("of the iteration time: slower by more than --gate 5% beyond the noise (exit 7)\n")
    assert run("--db", runs["db"], "diff", IDS["a"], IDS["b10"], "--gate", "12").returncode == 0


@pytest.mark.parametrize("a, b", [("a", "b"), ("b", "a"), ("a", "a"), ("b20", "b20")])
def test_noise_and_a_trace_against_itself_never_trip(runs, a, b):
    d = traceql.diff(IDS[a], IDS[b], db=runs["db"])
    assert d.verdict == "no significant change" and d.gate(5) == [] and d.changed() == []
    if a == b:
        assert d.gate(0) == [] and {r["verdict"] for r in d.rows.to_pylist()} == {"unchanged"}


def _trimmed_test_by_hand(d, trim=0.2):
    """The one-sample trimmed t-test, written out: trimmed mean, winsorized variance, h - 1 df."""
    v = sorted(d)
    n, g = len(v), math.floor(trim * len(v))
    kept = v[g:n - g]
    w = [min(max(x, kept[0]), kept[-1]) for x in v]
    mw = sum(w) / n
    wvar = sum((x - mw) ** 2 for x in w) / (n - 1)
    h = n - 2 * g
    tm = sum(kept) / h
    return tm, tm / math.sqrt((n - 1) * wvar / (h * (h - 1))), h - 1


def test_paired_statistics_from_the_generators_durations(runs):
    """HEAVY runs once per step: iteration k of A against iteration k of B20, the first (warm-up)
    left out; the differences from the generator's and the slow-down's own numbers."""
    from .test_diff_stats import t_tail_by_integration

    d = traceql.diff(IDS["a"], IDS["b20"], db=runs["db"])
    xa = runs["facts"]["a"]["durations"][HEAVY]
    xb = [x + round(x * 0.2) for x in runs["facts"]["b"]["durations"][HEAVY]]
    diffs = [y - x for x, y in zip(xa[1:], xb[1:])]
    tm, t, df = _trimmed_test_by_hand(diffs)
    heavy = by_key(d, "kernel")[HEAVY]
    assert heavy["iter_delta_ns"] == pytest.approx(tm, rel=1e-12)
    assert heavy["gate_p"] == pytest.approx(t_tail_by_integration(t, df), rel=1e-6, abs=1e-300)
    with traceql.open(runs["db"]) as ws:  # A's iteration time: its ProfilerStep ranges
        steps = [r[0] for r in ws.execute("SELECT dur FROM nvtx_range WHERE trace_id = 1 AND name LIKE "
                                          "'ProfilerStep#%' ORDER BY ts").fetchall()]
    v = sorted(steps[1:])
    g = math.floor(0.2 * len(v))
    assert heavy["gate_pct"] == pytest.approx(100 * tm / (sum(v[g:len(v) - g]) / (len(v) - 2 * g)), rel=1e-12)


def test_iterations_of_another_kind_are_compared_with_the_reason(runs):
    d = traceql.diff(IDS["a"], IDS["renamed"], db=runs["db"])
    assert not d.per_iteration and d.gate(5) == []
    assert d.notes == ["iterations could not be matched: ProfilerStep ranges: fewer than 3 iterations in B (0); "
                       "NVTX range 'train_step': fewer than 3 iterations in A (0): whole traces compared "
                       "(--per-iteration compares per iteration anyway)"]
    assert d.warnings == ["iterations of another kind: A ProfilerStep ranges, B NVTX range 'train_step'"]
    out = run("--db", runs["db"], "diff", IDS["a"], IDS["renamed"]).stdout
    assert "Warning: iterations of another kind: A ProfilerStep ranges, B NVTX range" in out
    assert "Note: iterations could not be matched: ProfilerStep ranges: fewer than 3" in out


def test_other_hardware_and_profiler_are_warned_about(runs):
    """B on one V100, exported by another nsys, with another driver, against A on two A100s:
    compared (the same run otherwise), with the warnings in the summary and above the verdict."""
    d = traceql.diff(IDS["a"], IDS["othergpu"], db=runs["db"])
    assert d.warnings == ["other GPUs: A ran on 2 x NVIDIA A100-SXM4-80GB, B on 1 x Tesla V100-SXM2-16GB",
                          "other profilers or versions (CUDA runtime and driver where the trace records them): "
                          "A nsys 2026.1.1.204, B nsys 2024.6.1",
                          "other NVIDIA driver: A 530.30.02, B 560.94", "other CUDA driver version: A 12.1, B 12.6"]
    assert d.verdict == "no significant change" and d.summary()["warnings"] == d.warnings
    assert traceql.diff(IDS["a"], IDS["b"], db=runs["db"]).warnings == []
    lines = run("--db", runs["db"], "diff", IDS["a"], IDS["othergpu"]).stdout.splitlines()
    warned = [i for i, line in enumerate(lines) if line.startswith("Warning: ")]
    verdict = next(i for i, line in enumerate(lines) if line.startswith("Verdict: "))
    assert len(warned) == 4 and lines[warned[0]].startswith("Warning: other GPUs: A ran on 2 x NVIDIA") \
        and max(warned) < verdict


def test_one_anchor_for_both_sides(runs):
    """B without its ProfilerStep ranges finds the 'optimizer' range on its own; A's ProfilerSteps
    are not in B, so both sides take B's anchor (in A nested in the steps): paired, nothing moved."""
    d = traceql.diff(IDS["a"], IDS["nosteps"], db=runs["db"])
    assert d.per_iteration and d.a["iteration_source"] == d.b["iteration_source"] == "nvtx"
    assert d.a["iteration_family"] == d.b["iteration_family"] == "optimizer"
    assert d.notes[0] == ("iterations of both sides: NVTX range 'optimizer' (20 in A, 20 in B; A found "
                          "ProfilerStep ranges on its own)")
    assert d.verdict == "no significant change" and d.gate(5) == []
    # the added and removed NVTX paths (B lost its steps) are instrumentation, not work: not gated
    ranges = by_key(d, "range")
    assert ranges["optimizer"]["verdict"] == "added" and ranges["optimizer"]["gate_pct"] is None


def test_files_already_ingested_are_taken_from_the_workspace(runs, tmp_path):
    from traceql.analysis.diff_sides import Side, _already_ingested

    side = Side("a", "file", path=runs["files"]["a"])
    assert _already_ingested(side, runs["db"]) and (side.trace_id, side.db) == (1, runs["db"])
    moved = tmp_path / "a.sqlite"  # the same bytes elsewhere: another file
    shutil.copyfile(runs["files"]["a"], moved)
    assert not _already_ingested(Side("m", "file", path=moved), runs["db"])
    proc = run("--db", runs["db"], "diff", runs["files"]["a"], runs["files"]["b20"], "--format", "json")
    assert proc.returncode == 0, proc.stderr
    import json

    s = json.loads(proc.stdout)["summary"]
    assert (s["a"]["reused"], s["a"]["trace_id"], s["b"]["reused"], s["b"]["trace_id"]) == (True, 1, True, 4)


_ROW = re.compile(r"^\| (\S[^|]*?) \|(.*)\|$")


def _check_wording(text: str, min_effect: float = 5.0) -> int:
    """Every table row of a diff's markdown: 'slower' with a positive Δ and Δ%, 'faster' with
    negative ones, 'unchanged' only below min_effect. Returns the rows checked."""
    checked = 0
    header = None
    for line in text.splitlines():
        m = _ROW.match(line)
        if not m:
            header = None if not line.startswith("|") else header
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] == "verdict":
            header = cells
            continue
        if header is None or set(cells[0]) <= {"-", ":"}:
            continue
        row = dict(zip(header, cells))
        pct = float(row["Δ%"].rstrip("%")) if row["Δ%"] else None
        delta = row.get("Δ") or row.get("Δtime")
        verdict = row["verdict"]
        if verdict in ("slower", "faster"):
            sign = "+" if verdict == "slower" else "-"
            assert delta.startswith(sign) and row["Δ%"].startswith(sign), line
        if verdict == "unchanged" and pct is not None:
            assert abs(pct) < min_effect, line
        if pct is not None and abs(pct) >= min_effect:
            assert verdict != "unchanged", line
        checked += 1
    return checked


def test_golden_output_and_its_wording(runs):
    proc = run("--db", runs["db"], "diff", IDS["a"], IDS["b20"], "--format", "markdown", "--all", "--limit", "50")
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout.replace(str(runs["dir"]), "<tmp>")
    check_golden("diff_gate.md", text)
    assert _check_wording(text) >= 30
    with pytest.raises(AssertionError):  # the checker catches a contradiction
        _check_wording("| verdict | A | B | Δ | Δ% | q | metric |\n|---|---|---|---|---|---|---|\n"
                       "| unchanged | 1 ms | 2 ms | +1 ms | +60.9% | 0.2 | iteration time |\n")


def test_per_iteration_query_joins_are_linear(runs):
    """queries/_internal/diff_per_iteration.sql: every join a hash join on equality keys, for each anchor kind."""
    import json

    from traceql.query import library

    from ..query.test_join_plans import _bad_joins, _operators

    q = library.get("_internal/diff_per_iteration")
    with traceql.open(runs["db"]) as ws:
        for params in ({"trace_id": None, "anchor_source": "ProfilerStep", "anchor_family": "ProfilerStep##"},
                       {"trace_id": 2, "anchor_source": "kernel pace", "anchor_family": HEAVY, "anchor_leaf": True}):
            plan = ws.execute("EXPLAIN (FORMAT json) " + q.sql, library.bind(q, params)).fetchall()
            ops = [op for _, p in plan for tree in json.loads(p) for op in _operators(tree)]
            assert [name for name, _ in ops].count("HASH_JOIN") >= 4
            assert _bad_joins(ops) == []


def test_unpaired_gate_reads_the_per_call_change(runs):
    """--no-paired: Yuen's test on the instances; rule (c) is the kernel's per-call change applied
    to A's time of it, as a share of A's GPU operation time: it still names HEAVY."""
    d = traceql.diff(IDS["a"], IDS["b20"], db=runs["db"], paired=False)
    assert not any(n.startswith("paired:") for n in d.notes)
    heavy, ops = by_key(d, "kernel")[HEAVY], by_key(d, "total")["GPU operations"]
    assert heavy["pairs"] is None and heavy["verdict"] == "slower"
    assert heavy["gate_pct"] == pytest.approx(heavy["effect_pct"] * heavy["time_a_ns"] / ops["time_a_ns"], rel=1e-12)
    assert ("kernel", HEAVY) in [(r["section"], r["key"]) for r in d.gate(5)]
    paired_row = by_key(traceql.diff(IDS["a"], IDS["b20"], db=runs["db"]), "kernel")[HEAVY]
    assert paired_row["pairs"] == STEPS - 1 and paired_row["p_value"] == paired_row["gate_p"]


@pytest.mark.parametrize("row, verdict", [
    # the issue's "slower aten::mm (backward) +76.5% -4.76 ms": per call slower, half the calls
    ({"effect_pct": 76.5, "delta_ns": -4.76e6, "q_value": 1e-6, "calls_delta_pct": -50.0}, "fewer calls"),
    # "ncclDevKernel_SendRecv -2.5% +8.34 ms": more calls, each a little shorter
    ({"effect_pct": -2.5, "delta_ns": 8.34e6, "q_value": 1e-6, "calls_delta_pct": 12.0}, "more calls"),
    # "iteration time +60.9% (unchanged)": a big change without significance says so
    ({"effect_pct": 60.9, "delta_ns": 1e6, "q_value": 0.2, "calls_delta_pct": None, "kind": "iteration"},
     "not significant"),
    ({"effect_pct": 60.9, "delta_ns": 1e6, "q_value": None, "p_value": None, "calls_delta_pct": None,
      "kind": "single"}, "untested"),
    ({"effect_pct": 6.0, "delta_ns": -10.0, "q_value": 1e-6, "calls_delta_pct": -3.0}, "mixed"),
    ({"effect_pct": 6.0, "delta_ns": 10.0, "q_value": 1e-6, "calls_delta_pct": 0.0}, "slower"),
    ({"effect_pct": -6.0, "delta_ns": -10.0, "q_value": 1e-6, "calls_delta_pct": 0.0}, "faster"),
    ({"effect_pct": 4.9, "delta_ns": 10.0, "q_value": 1e-6, "calls_delta_pct": 0.0}, "unchanged"),
])
def test_verdict_wording_of_the_issues_examples(row, verdict):
    from traceql.analysis.diff_compare import _verdict

    full = {"present_a": True, "present_b": True, "kind": "instances", "p_value": row.get("q_value"), "pairs": None,
            "tmean_delta_pct": row["effect_pct"], **row}
    assert _verdict(full, 0.01, 5.0) == verdict
