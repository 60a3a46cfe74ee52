"""traceql diff on generated before/after pairs with exactly known changes (fixtures/gen_diff.py):
a trace against itself, the injected change (one kernel 20 % slower, one added, one removed, plus
noise) found exactly, the same run in three formats, the CLI (formats, gate, sides, errors), and
the statistics checked against the generator's own durations."""

from __future__ import annotations

import csv
import io
import json
import math
import shutil

import duckdb
import pytest

import traceql
from fixtures.gen_diff import ADDED, KERNELS, REMOVED, SLOWER, generate
from traceql.analysis.diff import COLUMNS
from traceql.analysis.diff_rules import GATE_EXIT

from .test_diff_stats import _yuen_by_hand, t_tail_by_integration
from ..util import REPO, ingested, trace_file
from ..util import cli as served

STEPS_A, STEPS_B = 40, 36


def run(*args, env=None, timeout=300):
    """traceql as a child process (tests.util.cli), killed when the timeout expires."""
    return served(*args, env=env, timeout=timeout)


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """The run before (seed 1, 40 steps) and after the change (seed 2, 36 steps) in three formats,
    their facts, and one workspace holding them: traces 1 nsys before, 2 nsys after, 3 nvprof
    before, 4 Kineto before, 5 nvprof after, 6 Kineto after."""
    tmp = tmp_path_factory.mktemp("diff")
    files, facts = {}, {}
    for name, fmt, seed, steps, change, ext in (
            ("nsys_a", "nsys", 1, STEPS_A, False, "sqlite"), ("nsys_b", "nsys", 2, STEPS_B, True, "sqlite"),
            ("nvprof_a", "nvprof", 1, STEPS_A, False, "sqlite"), ("kineto_a", "kineto", 1, STEPS_A, False, "json"),
            ("nvprof_b", "nvprof", 2, STEPS_B, True, "sqlite"),
            ("kineto_b", "kineto", 2, STEPS_B, True, "json.gz")):
        files[name] = tmp / f"{name}.{ext}"
        facts[name] = generate(files[name], fmt=fmt, seed=seed, steps=steps, change=change)
    db = tmp / "ws.duckdb"
    traceql.ingest([files[n] for n in ("nsys_a", "nsys_b", "nvprof_a", "kineto_a", "nvprof_b", "kineto_b")], db=db)
    return {"dir": tmp, "files": files, "facts": facts, "db": db}


@pytest.fixture(scope="module")
def ref(pair):
    """traceql.diff(1, 2, db=...) on the pair's workspace with the defaults, computed once for the
    module (0.7 CPU s a time): seven tests read it, none changes it."""
    return traceql.diff(1, 2, db=pair["db"])


def by_key(d, section):
    return {r["key"]: r for r in d.rows.to_pylist() if r["section"] == section}


def own_trimmed(values, trim=0.2):
    v = sorted(values)
    g = int(trim * len(v))
    return sum(v[g:len(v) - g]) / (len(v) - 2 * g)


# ------------------------------------------------------------------------------ must show

def test_trace_against_itself(pair):
    """The same file on both sides (ingested once) and a copy of it (two traces): nothing changed,
    every delta 0, exit 0 even with --gate 0."""
    src = pair["files"]["nsys_a"]
    copy = pair["dir"] / "copy_of_a.sqlite"
    shutil.copyfile(src, copy)
    for other in (src, copy):
        proc = run("diff", src, other, "--format", "csv", "--gate", "0")
        assert proc.returncode == 0, proc.stderr
        rows = list(csv.DictReader(io.StringIO(proc.stdout)))
        assert {r["section"] for r in rows} == {"total", "kernel", "range", "range_gpu", "api", "memcpy"}
        assert {r["verdict"] for r in rows} == {"unchanged"}
        assert all(float(r["delta_ns"] or 0) == 0 for r in rows)
    d = traceql.diff(1, 1, db=pair["db"])
    assert d.verdict == "no significant change" and not d.changed() and not d.gate(0)


def test_injected_change_found_exactly(ref):
    d = ref
    assert d.per_iteration and d.a["iterations"] == STEPS_A and d.b["iterations"] == STEPS_B
    assert d.a["iteration_source"] == "ProfilerStep"
    kernels = by_key(d, "kernel")
    assert {k: r["verdict"] for k, r in kernels.items() if r["changed"]} == {
        SLOWER: "slower", ADDED: "added", REMOVED: "removed"}
    assert {r["verdict"] for k, r in kernels.items() if k not in (SLOWER, ADDED, REMOVED)} == {"unchanged"}
    assert len(kernels) == len(KERNELS)
    assert 15 < kernels[SLOWER]["tmean_delta_pct"] < 25  # 20 % injected, plus noise
    # the headline: per step +12 + 40 - 20 us of about 400 us of GPU time
    total = by_key(d, "total")
    assert d.verdict == "regression"
    assert total["GPU operations"]["verdict"] == total["iteration time"]["verdict"] == "slower"
    assert 5 < total["GPU operations"]["delta_pct"] < 10 and 5 < total["iteration time"]["delta_pct"] < 10
    assert total["copies"]["verdict"] == "unchanged"
    # the gate: (a) and (b), and (c) what adds more than 5 % of the iteration time: the added
    # kernel (40 us of about 430 us), and the ranges that wait for the GPU (the step, its optimizer)
    assert [(r["section"], r["key"]) for r in d.gate(5)] == [
        ("total", "iteration time"), ("total", "GPU operations"), ("kernel", ADDED), ("range", "ProfilerStep#*"),
        ("range", "ProfilerStep#* > optimizer")] and d.gate(10) == []
    assert 8 < by_key(d, "kernel")[ADDED]["gate_pct"] < 11


def test_statistics_equal_an_independent_computation(pair):
    """Every kernel row's counts, sums, per-step times and trimmed means from the generator's own
    durations; the slower kernel's t, df and p recomputed from them (Yuen's test: unpaired)."""
    d = traceql.diff(1, 2, db=pair["db"], paired=False)
    fa, fb = pair["facts"]["nsys_a"]["durations"], pair["facts"]["nsys_b"]["durations"]
    for name, r in by_key(d, "kernel").items():
        a, b = fa.get(name, []), fb.get(name, [])
        assert (r["calls_a"] or 0, r["calls_b"] or 0) == (len(a), len(b))
        assert (r["total_a_ns"] or 0, r["total_b_ns"] or 0) == (sum(a), sum(b))
        assert r["delta_ns"] == pytest.approx(sum(b) / STEPS_B - sum(a) / STEPS_A)
        if a:
            assert r["time_a_ns"] == pytest.approx(sum(a) / STEPS_A) and r["tmean_a_ns"] == pytest.approx(own_trimmed(a))
        if a and b:
            t, df = _yuen_by_hand(a, b, 0.2)
            assert r["t"] == pytest.approx(t, rel=1e-9) and r["df"] == pytest.approx(df, rel=1e-9)
            assert r["p_value"] == pytest.approx(t_tail_by_integration(t, df), rel=1e-6, abs=1e-300)
    tested = sorted((r["p_value"], r["q_value"]) for r in by_key(d, "kernel").values() if r["p_value"] is not None)
    m = len(tested)
    assert [q for _, q in tested] == pytest.approx(
        [min(1.0, min(p * m / (j + 1) for j, (p, _) in enumerate(tested) if j >= i)) for i in range(m)])


def test_without_trimming_the_warm_up_hides_the_change(pair):
    """With plain means (Welch's test, trim 0) the warm-up step hides the 20 % slower kernel."""
    d = traceql.diff(1, 2, db=pair["db"], trim=0, paired=False)
    slower = by_key(d, "kernel")[SLOWER]
    assert slower["verdict"] == "not significant" and slower["q_value"] > 0.01 and slower["effect_pct"] > 5


def test_noise_alone_changes_nothing(pair):
    """The same run with other noise (seed 3, 36 steps): no row of any section changed."""
    other = pair["dir"] / "noise.sqlite"
    generate(other, fmt="nsys", seed=3, steps=STEPS_B)
    d = traceql.diff(pair["files"]["nsys_a"], other)
    assert d.verdict == "no significant change"
    assert d.changed() == [], [(r["section"], r["key"], r["verdict"]) for r in d.changed()]


def test_per_iteration_normalization(pair):
    """Runs of 40 and 36 steps: per step nothing but the change moved; as whole traces every
    unchanged kernel has 10 % fewer calls."""
    d = traceql.diff(1, 2, db=pair["db"], per_iteration=False)
    assert not d.per_iteration
    relu = by_key(d, "kernel")[KERNELS["relu"][0]]
    assert relu["verdict"] == "fewer calls" and relu["calls_delta_pct"] == pytest.approx(-10.0)
    short = pair["dir"] / "short.sqlite"  # 2 steps: no iterations
    generate(short, fmt="nsys", seed=4, steps=2)
    assert not traceql.diff(short, pair["files"]["nsys_a"]).per_iteration
    with pytest.raises(traceql.UsageError, match="no iterations detected in A"):
        traceql.diff(short, pair["files"]["nsys_a"], per_iteration=True)


# ------------------------------------------------------------------------------ formats

@pytest.mark.parametrize("a, b", [(1, 3), (1, 4), (3, 4)])
def test_the_same_run_in_three_formats(pair, a, b):
    """nsys, nvprof and Kineto files of one run: every row aligns and nothing moved."""
    d = traceql.diff(a, b, db=pair["db"])
    assert {r["verdict"] for r in d.rows.to_pylist()} == {"unchanged"}
    for section in ("kernel", "range", "range_gpu", "api", "memcpy", "total"):
        assert by_key(d, section), section
        for r in by_key(d, section).values():
            assert r["delta_ns"] == pytest.approx(0, abs=1e-6), (section, r["key"])
            assert (r["tmean_a_ns"] is None) == (r["tmean_b_ns"] is None)
            if r["tmean_a_ns"] is not None:
                assert r["tmean_a_ns"] == pytest.approx(r["tmean_b_ns"], rel=1e-12)


@pytest.mark.parametrize("a, b", [(1, 6), (3, 2), (4, 5)])
def test_injected_change_across_formats(pair, ref, a, b):
    d = traceql.diff(a, b, db=pair["db"])
    assert {k: r["verdict"] for k, r in by_key(d, "kernel").items() if r["changed"]} == {
        SLOWER: "slower", ADDED: "added", REMOVED: "removed"}
    assert by_key(d, "kernel")[SLOWER]["t"] == pytest.approx(by_key(ref, "kernel")[SLOWER]["t"], rel=1e-9)
    assert d.verdict == "regression"


def test_cli_gate_and_formats(pair, ref):
    """The gate end to end on the files; the formats on the workspace's traces 1 and 2 (the same
    pair, ingested once)."""
    a, b = pair["files"]["nsys_a"], pair["files"]["nsys_b"]
    proc = run("diff", a, b, "--gate", "5")
    assert proc.returncode == GATE_EXIT == 7, proc.stderr
    assert proc.stderr.startswith("traceql: diff: iteration time +") and proc.stderr.count("\n") == 1
    assert f"; kernel {ADDED} adds " in proc.stderr and "of the iteration time" in proc.stderr
    assert proc.stderr.endswith(": slower by more than --gate 5% beyond the noise (exit 7)\n")
    assert "Verdict: regression: " in proc.stdout  # the output is printed before the gate fails
    ids = ("--db", pair["db"], "diff", 1, 2)
    assert run(*ids, "--gate", "10").returncode == 0

    doc = json.loads(run(*ids, "--format", "json").stdout)
    assert doc["summary"]["verdict"] == "regression" and doc["summary"]["a"]["iterations"] == STEPS_A
    assert [h["key"] for h in doc["summary"]["headline"]] == ["iteration time", "GPU operations"]
    assert {r["key"] for r in doc["rows"] if r["section"] == "kernel" and r["changed"]} == {SLOWER, ADDED, REMOVED}

    rows = list(csv.DictReader(io.StringIO(run(*ids, "--format", "csv", "--section", "kernel").stdout)))
    assert len(rows) == len(KERNELS) and list(rows[0]) == [c for c, _, _ in COLUMNS]

    out = pair["dir"] / "diff.parquet"
    assert run(*ids, "--format", "parquet", "-o", out).returncode == 0
    import pyarrow.parquet as pq

    t = pq.read_table(out)
    assert t.num_rows == len(ref.rows)
    assert json.loads(t.schema.metadata[b"traceql.diff"])["verdict"] == "regression"

    md = run(*ids, "--format", "markdown").stdout
    assert md.startswith("## traceql diff: regression\n")
    head = "### Kernels, time per iteration: 3 of 9 changed (1 added, 1 removed, 1 slower)\n\n"
    table = md.split(head)[1].split("\n\n")[0].splitlines()
    assert table[0] == "| verdict | calls A | calls B | tmean A | tmean B | Δ% | Δtime | q | +%iter | kernel |"
    assert [line.split(" | ")[-1] for line in table[2:]] == [f"`{ADDED}` |", f"`{REMOVED}` |", f"`{SLOWER}` |"]


def test_cli_table_fits_80_columns(pair):
    proc = run("--db", pair["db"], "diff", 1, 2, env={"COLUMNS": "80"})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80 and lines[1].startswith("  ")  # the long side line wrapped
    assert lines[0].startswith("A (before): ") and any(line.startswith("Verdict: regression: ") for line in lines)
    assert "Kernels, time per iteration: 3 of 9 changed (1 added, 1 removed, 1 slower)" in lines
    assert any(line.startswith("slower   void gemm_kernel<float, 64>(float const*, float*, int)") for line in lines)
    wide = run("--db", pair["db"], "diff", 1, 2, "--all", "--section", "kernel").stdout
    assert wide.count("unchanged") == 6 and "Totals" not in wide


def test_sides_ids_workspaces_and_files_agree(pair, ref, tmp_path):
    ws_a, ws_b = tmp_path / "a.duckdb", tmp_path / "b.duckdb"
    traceql.ingest([pair["files"]["nsys_a"]], db=ws_a)
    traceql.ingest([pair["files"]["nsys_b"]], db=ws_b)
    expected = ref.rows.to_pylist()
    for a, b in ((ws_a, ws_b), (pair["files"]["nsys_a"], ws_b), (str(pair["files"]["nsys_a"]), "2")):
        rows = traceql.diff(a, b, db=pair["db"]).rows.to_pylist()
        assert [(r["section"], r["key"], r["verdict"], r["calls_a"], r["calls_b"]) for r in rows] == \
               [(r["section"], r["key"], r["verdict"], r["calls_a"], r["calls_b"]) for r in expected]
        for r, s in zip(rows, expected):
            for c in ("delta_ns", "p_value"):
                assert (r[c] is None and s[c] is None) or r[c] == pytest.approx(s[c], rel=1e-9)


def test_errors(pair, tmp_path):
    db = pair["db"]
    with pytest.raises(traceql.UsageError, match="--trace 99: no such trace"):
        traceql.diff(99, 1, db=db)
    proc = run("--db", db, "diff", 1, tmp_path / "missing.sqlite")
    assert proc.returncode == 3 and "missing.sqlite: no such file (nor a trace id of the workspace)" in proc.stderr
    proc = run("--db", db, "diff", tmp_path, 1)
    assert proc.returncode == 3 and "is a directory, not a trace file, a workspace or a Parquet export" in proc.stderr
    stale = tmp_path / "stale.duckdb"
    shutil.copyfile(db, stale)
    con = duckdb.connect(str(stale))
    con.execute("UPDATE workspace_version SET contract_version = contract_version - 1")
    con.close()
    proc = run("diff", stale, 1, "--db", db)
    assert proc.returncode == 6 and "run 'traceql --db" in proc.stderr
    bad = tmp_path / "junk.sqlite"
    bad.write_text("not a trace")
    proc = run("--db", db, "diff", 1, bad)
    assert proc.returncode == 3 and "junk.sqlite" in proc.stderr


def test_temporary_workspace_is_removed(pair, tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = run("diff", pair["files"]["nsys_a"], pair["files"]["kineto_b"], env={"TMPDIR": str(tmp)})
    assert proc.returncode == 0, proc.stderr
    assert list(tmp.iterdir()) == []


def test_kernel_key_short_name_compares_within_launch_configurations(pair):
    """By short name, gemm_kernel<float, 128> (100 us) and gemm_kernel<float, 64> (60 us, 72 us
    after) share the row 'gemm_kernel': pooled, the 20 % of the smaller one drowns in the spread
    between the two; compared within each launch configuration (the two grids) it is found, with
    the weighted change recomputed here from the generator's durations."""
    d = traceql.diff(1, 2, db=pair["db"], kernel_key="short_name", paired=False)
    kernels = by_key(d, "kernel")
    gemm = kernels["gemm_kernel"]
    assert gemm["calls_a"] == 2 * STEPS_A and gemm["strata"] == 2  # gemm_kernel<float, 128> and <float, 64>
    assert {k: r["verdict"] for k, r in kernels.items() if r["changed"]} == {
        "gemm_kernel": "slower", "bias_add_kernel": "added", "reduce_grad_kernel": "removed"}
    fa, fb = pair["facts"]["nsys_a"]["durations"], pair["facts"]["nsys_b"]["durations"]
    big, small = KERNELS["gemm128"][0], KERNELS["gemm64"][0]
    w = {k: len(fa[k]) / (2 * STEPS_A) + len(fb[k]) / (2 * STEPS_B) for k in (big, small)}
    want = 100 * sum(w[k] * (own_trimmed(fb[k]) - own_trimmed(fa[k])) for k in w) / sum(
        w[k] * own_trimmed(fa[k]) for k in w)
    assert gemm["effect_pct"] == pytest.approx(want, rel=1e-9) and 5 < want < 10
    pooled = own_trimmed(fa[big] + fa[small]), own_trimmed(fb[big] + fb[small])
    assert gemm["tmean_a_ns"] == pytest.approx(pooled[0]) and gemm["tmean_b_ns"] == pytest.approx(pooled[1])
    from traceql.analysis.stats import trimmed, yuen

    _, _, p_pooled = yuen(*trimmed(fa[big] + fa[small], 0.2), *trimmed(fb[big] + fb[small], 0.2), 0.2)
    assert p_pooled > 0.01 > 1e-4 > gemm["p_value"]  # pooled, no change would be called


def test_arrow_stream(ref):
    import pyarrow as pa

    d = ref
    assert pa.table(d).equals(d.rows)
    assert json.loads(d.rows.schema.metadata[b"traceql.diff"])["a"]["traces"][0]["trace_id"] == 1


# ------------------------------------------------------------------------------ PyTorch ops, real traces

def test_pytorch_ops_align_and_noise_changes_nothing(tmp_path):
    """gen_torch's model with two seeds: ops by name and direction on both sides, nothing changed."""
    from fixtures.gen_torch import generate as torch_run

    a, b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    torch_run(a, kernels=3000, seed=0)
    torch_run(b, kernels=3000, seed=1)
    d = traceql.diff(a, b)
    ops = by_key(d, "op")
    assert {"aten::addmm (forward)", "aten::mm (backward)", "aten::relu (forward)",
            "aten::threshold_backward (backward)"} <= set(ops)
    assert d.changed() == [], [(r["section"], r["key"], r["verdict"]) for r in d.changed()]


def _sqlite_kernel_stats(path):
    import sqlite3

    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {name: (n, total, lo, hi) for name, n, total, lo, hi in con.execute(
            "SELECT s.value, count(*), sum(k.end - k.start), min(k.end - k.start), max(k.end - k.start) "
            "FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName GROUP BY s.value")}
    finally:
        con.close()


def test_real_nsys_trace_against_itself(tmp_path_factory):
    """cs336-jsun's trace against itself, as trace 1 on both sides of the session's workspace of it
    (tests/util.py ingested, read by five other modules; the same file on both sides as files:
    test_trace_against_itself)."""
    rel = "cs336-jsun-train-fwdbwd-rtx3070ti-nsys2025.1/result.sqlite"
    src = trace_file(rel)
    d = traceql.diff(1, 1, db=ingested(tmp_path_factory, rel))
    assert d.verdict == "no significant change" and d.changed() == []
    assert {r["verdict"] for r in d.rows.to_pylist()} == {"unchanged"}
    want = _sqlite_kernel_stats(src)
    got = {k: (r["calls_a"], r["total_a_ns"]) for k, r in by_key(d, "kernel").items()}
    assert got == {k: v[:2] for k, v in want.items()}
    assert d.a["iterations"] == 10 and d.a["iteration_source"] == "nvtx"


def test_real_kineto_trace_against_itself():
    src = trace_file("kineto-hta-ddp-v100-rank0/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz")
    proc = run("diff", src, src, "--format", "json", "--gate", "0")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)["rows"]
    assert {r["verdict"] for r in rows} == {"unchanged"} and any(r["section"] == "op" for r in rows)
    assert all(math.isclose(r["delta_ns"] or 0, 0, abs_tol=1e-6) for r in rows)


def test_reversed_pair_is_an_improvement_the_gate_passes(pair):
    d = traceql.diff(2, 1, db=pair["db"])
    assert d.verdict == "improvement" and d.gate(5) == []
    # gate 0 asks whether anything adds time at all: the kernel the later run removed, here added
    assert [r["key"] for r in d.gate(0) if r["section"] == "kernel"] == [REMOVED]
    assert {k: r["verdict"] for k, r in by_key(d, "kernel").items() if r["changed"]} == {
        SLOWER: "faster", ADDED: "removed", REMOVED: "added"}


def test_one_gpu_on_each_side_aligns_across_device_ids():
    """Rank 0 on GPU 0 against rank 1 on GPU 1: one 'GPU 0 / GPU 1 busy' row, not a removed and an
    added one; with two GPUs on a side the ids stay apart."""
    from traceql.analysis.diff_compare import _align_devices

    row = {"calls": 1, "total_ns": 5}
    a = {("total", "GPU 0 busy"): row, ("total", "GPU 0 compute"): row, ("kernel", "GPU 0 busy"): row}
    b = {("total", "GPU 1 busy"): row, ("total", "GPU 1 compute"): row}
    ra, rb = _align_devices(a, b)
    assert set(ra) == {("total", "GPU 0 / GPU 1 busy"), ("total", "GPU 0 / GPU 1 compute"), ("kernel", "GPU 0 busy")}
    assert set(rb) == {("total", "GPU 0 / GPU 1 busy"), ("total", "GPU 0 / GPU 1 compute")}
    two = {**b, ("total", "GPU 2 busy"): row}
    assert _align_devices(a, two) == (a, two)
    assert _align_devices(a, a) == (a, a)


def test_side_query_joins_are_linear(pair):
    """queries/_internal/diff_side.sql runs on whole workspaces: every join a hash join on equality keys
    (test_join_plans' checker), in the workspace of six traces of three formats."""
    from traceql.query import library

    from ..query.test_join_plans import _bad_joins, _operators

    q = library.get("_internal/diff_side")
    with traceql.open(pair["db"]) as ws:
        for params in ({"trace_id": None, "kernel_key": "name", "trim": 0.2},
                       {"trace_id": 4, "kernel_key": "short_name", "trim": 0.0}):
            plan = ws.execute("EXPLAIN (FORMAT json) " + q.sql, library.bind(q, params)).fetchall()
            ops = [op for _, p in plan for tree in json.loads(p) for op in _operators(tree)]
            assert [name for name, _ in ops].count("HASH_JOIN") >= 4
            assert _bad_joins(ops) == []


def test_iterations_of_another_kind_are_not_divided_by():
    """A with 10 ProfilerSteps, B with 40 iterations of an NVTX range: per iteration would divide
    by counts of different things, so whole traces are compared, and the reader is told; with
    --per-iteration as asked."""
    from traceql.analysis.diff_compare import compare, notes
    from traceql.analysis.diff_sides import Side, SideStats

    row = {"calls": 400, "total_ns": 4_000_000, "mean_ns": 10_000.0, "var_ns": 1e6, "tmean_ns": 10_000.0,
           "wvar_ns": 1e6, "total_var": 4e8, "med_ns": 10_000.0}

    def side(name, its, source, family):
        return SideStats(Side(name, "file"), {("kernel", "k"): row}, [], its, [100_000] * its, source, family)

    a = side("a", 10, "ProfilerStep", "ProfilerStep#*")
    b = side("b", 40, "nvtx", "train_step")
    rows, norm = compare(a, b)
    assert not norm and [r["key"] for r in rows] == ["k"] and rows[0]["time_a_ns"] == 4_000_000
    assert notes(a, b, None, norm) == ["the iterations of A (ProfilerStep) and of B (nvtx 'train_step') are not the "
                                       "same kind: whole traces compared (--per-iteration compares per iteration "
                                       "anyway)"]
    rows, norm = compare(a, b, per_iteration=True)
    assert norm and {r["key"]: r["time_b_ns"] for r in rows} == {"iteration time": 100_000, "k": 100_000}
    assert notes(a, b, True, norm)[0].endswith("compared per iteration as asked (--per-iteration)")
    paced = side("c", 40, "kernel pace", "gemm"), side("d", 40, "kernel pace", "relu")  # one loop, two kernels
    assert compare(*paced)[1] and notes(*paced, None, True) == []
    assert notes(side("e", 0, None, None), b, None, False) == [
        "no iterations detected in A: whole traces compared (traceql analyze --rule iterations says why)"]


def test_pairs_cut_from_one_run_change_only_the_slowed_kernel(tmp_path):
    """bench/diff_pairs.py's helpers on a generated run: cut between steps 19 and 20 into two
    exports (the first with the 3x warm-up step), one kernel of the second made 20 % longer: that
    kernel is the only kernel that changed."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_diff_pairs", REPO / "bench" / "diff_pairs.py")
    pairs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pairs)
    src = tmp_path / "run.sqlite"
    generate(src, fmt="nsys", seed=5, steps=40)
    _, mid, _ = pairs._window(src, None, "ProfilerStep#20")  # the start of step 20
    a, b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    pairs.cut(src, a, 0, mid)
    pairs.cut(src, b, mid, 2 ** 62)
    slowed = pairs.slow_down(b)
    d = traceql.diff(a, b)
    assert (d.a["iterations"], d.b["iterations"]) == (20, 20)
    kernels = by_key(d, "kernel")
    assert sum(r["calls_a"] for r in kernels.values()) == sum(r["calls_b"] for r in kernels.values()) == 20 * 8
    assert [(k, r["verdict"]) for k, r in kernels.items() if r["changed"]] == [(slowed, "slower")]
    assert 15 < kernels[slowed]["effect_pct"] < 25
