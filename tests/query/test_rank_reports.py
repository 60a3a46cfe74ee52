"""Cross-rank reports on a generated job (fixtures/gen_ranks.py: 4 ranks on 2 hosts, rank 2
computing 1.3 times slower, a reduce-scatter hidden behind the backward and an exposed
all-reduce per step): `report --by rank` and `report --by collective`, every figure checked
against Python's sqlite3 over the rank files (tests/rank_oracle.py), and the command line.
The NCCL ring set's: tests/sources/test_ranks.py."""

from __future__ import annotations

import statistics

import pytest

import traceql
from fixtures.gen_ranks import generate_job

from .. import rank_oracle
from ..util import cli

SLOW = 2


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("job")
    job = generate_job(tmp / "ranks", ranks=4, ranks_per_host=2, steps=6, layers=3, seed=3, slow_rank=SLOW)
    db = tmp / "ws.duckdb"
    traceql.ingest([r["file"] for r in job["ranks"]], db=db)
    ws = traceql.open(db)
    yield job, ws, db
    ws.close()


def test_rank_report_equals_the_files(job):
    job, ws, _ = job
    got = ws.report("rank").to_pylist()
    assert [r["rank"] for r in got] == [0, 1, 2, 3]
    expected_compute = {}
    for info, row in zip(job["ranks"], got):
        want = rank_oracle.rank_figures(info["file"])
        assert {k: row[k] for k in want} == want, info["rank"]
        assert (row["host"], row["gpus"]) == (info["host"], 1)
        assert want["compute_ns"] > 0 and 0 < want["comm_exposed_ns"] < want["comm_ns"]
        expected_compute[info["rank"]] = want["compute_ns"]
    median = statistics.median(expected_compute.values())
    for row in got:
        assert row["compute_vs_median_pct"] == pytest.approx(100 * (row["compute_ns"] - median) / median, abs=1e-9)
    # the slow rank computes longest and waits least; every other one waits for it
    slow = got[SLOW]
    assert slow["compute_vs_median_pct"] > 20
    assert all(r["comm_exposed_ns"] > 3 * slow["comm_exposed_ns"] for r in got if r["rank"] != SLOW)


def test_rank_report_of_one_trace_and_with_where(job):
    _, ws, _ = job
    [one] = ws.report("rank", trace_id=2).to_pylist()
    every = ws.report("rank").to_pylist()[1]
    assert one.pop("compute_vs_median_pct") == 0.0  # the median of one rank is its own
    assert one == {k: v for k, v in every.items() if k != "compute_vs_median_pct"}
    # filtered to a GPU no rank used: no GPU time at all
    none = ws.report("rank", where="device_id = 7").to_pylist()
    assert [(r["gpus"], r["busy_ns"], r["idle_ns"]) for r in none] == [(0, 0, 0)] * 4


def test_collective_summary_equals_the_files(job):
    job, ws, _ = job
    per_file = {info["rank"]: rank_oracle.collectives(info["file"]) for info in job["ranks"]}
    names = sorted({n for c in per_file.values() for n in c})
    assert names == ["ncclDevKernel_AllReduce_Sum_f32_RING_LL", "ncclDevKernel_ReduceScatter_Sum_f32_RING_LL"]
    got = {r["name"]: r for r in ws.report("collective").to_pylist()}
    assert sorted(got) == names
    for name in names:
        totals = {rank: c[name][1] for rank, c in per_file.items()}
        calls = {rank: c[name][0] for rank, c in per_file.items()}
        row = got[name]
        assert row["collective"] == name.split("_")[1]
        assert (row["ranks"], row["calls"], row["matched"], row["min_calls"]) == (4, sum(calls.values()), True, 6)
        assert row["total_ns"] == sum(totals.values())
        assert row["avg_ns"] == sum(totals.values()) // sum(calls.values())
        assert (row["min_rank_ns"], row["median_rank_ns"], row["max_rank_ns"]) == (
            min(totals.values()), int(statistics.median(totals.values())), max(totals.values()))
        assert row["least_rank"] == min(totals, key=lambda r: (totals[r], r)) == SLOW
    per_trace = ws.report("collective", per_trace=True).to_pylist()
    assert {(r["rank"], r["name"]): (r["calls"], r["total_ns"]) for r in per_trace} == {
        (rank, n): c[n] for rank, c in per_file.items() for n in c}


def test_collective_mismatch_when_a_rank_is_missing_calls(job, tmp_path):
    """A rank whose trace lacks calls (cut short): matched false, min_calls its count."""
    job, ws, db = job
    copy = tmp_path / "ws.duckdb"
    copy.write_bytes(db.read_bytes())
    with traceql.open(copy, write=True) as w:
        w.sql("DELETE FROM kernel WHERE trace_id = 4 AND name LIKE 'ncclDevKernel_AllReduce%' "
              "AND ts > (SELECT median(ts) FROM kernel WHERE trace_id = 4)")
        left = w.sql("SELECT count(*) AS n FROM kernel WHERE trace_id = 4 AND name LIKE "
                     "'ncclDevKernel_AllReduce%'").to_pylist()[0]["n"]
        rows = {r["collective"]: r for r in w.report("collective").to_pylist()}
    assert 0 < left < 6
    assert (rows["AllReduce"]["matched"], rows["AllReduce"]["min_calls"]) == (False, left)
    assert rows["ReduceScatter"]["matched"] is True


def test_cli_reports_at_80_columns(job):
    """The reports as `traceql` prints them at 80 columns (commands forked off the warm server,
    tests.util.cli: three new interpreters cost 2 CPU s)."""
    _, _, db = job
    env = {"COLUMNS": "80", "PATH": "/usr/bin:/bin"}
    for by in ("rank", "collective"):
        proc = cli("--db", db, "report", "--by", by, env=env, timeout=120)
        assert proc.returncode == 0, proc.stderr
        lines = proc.stdout.splitlines()
        assert max(len(line) for line in lines) <= 80, proc.stdout
        assert lines[-1] == ("4 rows" if by == "rank" else "2 rows")
    assert "node01.cluster" in cli("--db", db, "report", "--by", "rank", "--format", "csv", timeout=120).stdout


@pytest.mark.parametrize("measure", ["time", "compute"])
def test_straggler_view_equals_the_files(job, measure):
    """Per range name and per iteration: the fastest, median and slowest rank, and by how much;
    with compute, rank 2 (1.3 times slower kernels) is the slowest of every iteration."""
    job, ws, _ = job
    files = {info["rank"]: info["file"] for info in job["ranks"]}
    names, iterations = rank_oracle.straggler(files, measure)
    got = {r["name"]: r for r in ws.report("straggler", measure=measure).to_pylist()}
    assert sorted(got) == sorted(names) == ["backward", "forward", "train_step"]
    for name, want in names.items():
        row = got[name]
        assert {k: row[k] for k in want} == want, name
        assert row["behind_ns"] == want["max_ns"] - want["median_ns"]
        assert row["behind_pct"] == pytest.approx(100 * row["behind_ns"] / want["median_ns"], abs=1e-9)
    per = ws.report("straggler", measure=measure, per_iteration=True).to_pylist()
    assert {(r["name"], r["iteration"]): {k: r[k] for k in ("ranks", "min_ns", "median_ns", "max_ns", "slowest_rank")}
            for r in per} == iterations
    assert len(per) == 3 * 6
    behind = [r["behind_ns"] for r in per]
    assert behind == sorted(behind, reverse=True)
    if measure == "compute":
        assert {r["slowest_rank"] for r in per} == {SLOW}
        assert all((r["slowest_rank"], r["slowest_in"]) == (SLOW, 6) for r in got.values())
        assert all(r["behind_pct"] > 20 for r in got.values())


def test_straggler_measure_is_checked(job):
    _, ws, _ = job
    with pytest.raises(traceql.UsageError, match="measure 'gpu': 'time' .* or 'compute'"):
        ws.report("straggler", measure="gpu")


def test_straggler_leaves_out_names_of_one_rank_and_says_unmatched(job, tmp_path):
    job, ws, db = job
    copy = tmp_path / "ws.duckdb"
    copy.write_bytes(db.read_bytes())
    with traceql.open(copy, write=True) as w:
        w.sql("UPDATE nvtx_range SET group_name = 'only_here' WHERE trace_id = 1 AND group_name = 'forward'")
        w.sql("DELETE FROM nvtx_range WHERE trace_id = 3 AND group_name = 'backward' AND ts = "
              "(SELECT max(ts) FROM nvtx_range WHERE trace_id = 3 AND group_name = 'backward')")
        got = {r["name"]: r for r in w.report("straggler").to_pylist()}
    assert "only_here" not in got and got["forward"]["ranks"] == 3
    assert (got["backward"]["iterations"], got["backward"]["matched"]) == (5, False)
    assert got["train_step"]["matched"] is True
