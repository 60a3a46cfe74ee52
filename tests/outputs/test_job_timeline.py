"""Clocks of several traces (`report --by clock`, traceql/clocks.py) and one Perfetto timeline
of all of them (traceql/job_timeline.py), on a generated job whose host clocks are off by a
known skew (fixtures/gen_ranks.py: a collective ends at one true moment on every rank) and on
the NCCL ring set. Timelines are validated as in tests/outputs/test_timeline.py."""

from __future__ import annotations

import json
import statistics

import duckdb
import pytest

import traceql
from fixtures.gen_ranks import generate_job
from traceql.outputs.job_timeline import ID_STRIDE

from .. import rank_oracle
from .test_timeline import check_structure, ns
from ..util import cli, ingested, nsys_stub, trace_file

NCCL = "nccl-ring-2nodes-3gpus-nsys2024.5"
SKEW = [0, 1_234_567, -654_321]


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("job")
    job = generate_job(tmp / "ranks", ranks=6, ranks_per_host=2, steps=3, layers=2, seed=11, slow_rank=4,
                       host_skew_ns=SKEW)
    db = tmp / "ws.duckdb"
    traceql.ingest([r["file"] for r in job["ranks"]], db=db)
    return job, db, tmp


def session_start(path) -> int:
    [(utc,)] = rank_oracle.rows(path, "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME")
    return utc


def collective_ends(path) -> dict[str, list[int]]:
    """short name -> the UTC ends of its kernels, in order."""
    utc = session_start(path)
    out: dict[str, list[int]] = {}
    for s, e, short, name in sorted(rank_oracle.kernels(path)):
        if rank_oracle.COMM.search(name):
            out.setdefault(short, []).append(e + utc)
    return out


def test_clock_report_recovers_the_skew_of_each_host(job):
    job, db, _ = job
    with traceql.open(db) as ws:
        rows = ws.report("clock").to_pylist()
    assert [r["rank"] for r in rows] == list(range(6))
    firsts = {info["rank"]: rank_oracle.bounds(info["file"])[0] + session_start(info["file"]) for info in job["ranks"]}
    for info, row in zip(job["ranks"], rows):
        host = info["rank"] // 2
        assert (row["host"], row["clock"], row["reference"]) == (info["host"], "session", host == 0)
        assert row["collectives"] == 2 * 3  # a reduce-scatter and an all-reduce per step
        assert row["skew_ns"] == row["min_gap_ns"] == row["max_gap_ns"] == SKEW[host] - SKEW[0]
        assert row["started_ns"] == firsts[info["rank"]] - min(firsts.values())


def test_clock_gaps_from_the_files(job):
    """The estimate, recomputed from the files: per host the median end of each collective
    call, minus host 0's, the median over the calls."""
    job, db, _ = job
    by_host: dict[int, list[dict]] = {}
    for info in job["ranks"]:
        by_host.setdefault(info["rank"] // 2, []).append(collective_ends(info["file"]))
    calls = [(n, i) for n, e in by_host[0][0].items() for i in range(len(e))]
    first = {(n, i): min(e[n][i] for ends in by_host.values() for e in ends) for n, i in calls}  # exact medians
    per_host = {h: {(n, i): statistics.median(e[n][i] - first[(n, i)] for e in ends) for n, i in calls}
                for h, ends in by_host.items()}
    want = {h: int(statistics.median(v[k] - per_host[0][k] for k in v)) for h, v in per_host.items()}
    assert want == {h: SKEW[h] - SKEW[0] for h in range(3)}
    with traceql.open(db) as ws:
        got = {r["host"]: r["skew_ns"] for r in ws.report("clock").to_pylist()}
    assert got == {f"node{h:02d}.cluster": want[h] for h in range(3)}


def merged(db, out, *args):
    proc = cli("--db", db, "export", "--format", "perfetto", "-o", out, *args, timeout=300)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    return proc.stdout, doc, check_structure(doc, id_stride=ID_STRIDE)


def group_of(by_phase) -> dict[int, str]:
    return {ev["pid"]: ev["args"]["name"] for ev in by_phase["M"] if ev["name"] == "process_name"}


@pytest.mark.parametrize("align", [False, True])
def test_one_timeline_of_every_rank(job, align):
    """Every rank a process group; every kernel of every rank in it at ts + its UTC offset (-
    its host's skew when aligned) from the job's first event: aligned, each collective ends at
    one moment on every rank; not aligned, the hosts' ends differ by their skews."""
    job, db, tmp = job
    stdout, doc, by_phase = merged(db, tmp / f"job-{align}.json", *(["--align-clocks"] if align else []))
    assert stdout.startswith(f"wrote 6 traces to {tmp / f'job-{align}.json'}: ")
    groups = group_of(by_phase)
    assert sorted(groups.values()) == [f"rank {r} · node{r // 2:02d}.cluster · trace {r + 1}" for r in range(6)]
    pid_of = {int(name.split()[1]): pid for pid, name in groups.items()}
    origin = doc["otherData"]["origin_utc_ns"]
    assert [t["skew_ns"] for t in doc["otherData"]["traces"]] == [SKEW[r // 2] if align else 0 for r in range(6)]
    ends = {}
    for info in job["ranks"]:
        shift = info["session_start_utc_ns"] - (SKEW[info["rank"] // 2] if align else 0)
        want = sorted((s + shift - origin, e - s) for s, e, short, name in rank_oracle.kernels(info["file"]))
        got = sorted((ns(ev["ts"]), ns(ev["dur"])) for ev in by_phase["X"]
                     if ev["cat"] == "kernel" and ev["pid"] == pid_of[info["rank"]])
        assert got == want, info["rank"]
        ends[info["rank"]] = [ns(ev["ts"]) + ns(ev["dur"]) for ev in sorted(
            (ev for ev in by_phase["X"] if ev["pid"] == pid_of[info["rank"]] and ev["name"].startswith("ncclDev")),
            key=lambda ev: ev["ts"])]
    for calls in zip(*ends.values()):
        if align:
            assert len(set(calls)) == 1
        else:
            assert {calls[r] - calls[0] for r in range(6)} == {SKEW[r // 2] - SKEW[0] for r in range(6)}
    assert min(ns(ev["ts"]) for ev in by_phase["X"]) == 0
    counts = doc["otherData"]["events"]
    assert counts["kernel"] == sum(len(rank_oracle.kernels(r["file"])) for r in job["ranks"])


def test_window_on_the_job_axis(job):
    job, db, tmp = job
    _, doc, by_phase = merged(db, tmp / "window.json", "--start", "+2ms", "--end", "+4ms")
    for ev in by_phase["X"]:
        assert ns(ev["ts"]) < 4_000_000 and ns(ev["ts"]) + ns(ev["dur"]) > 2_000_000
    assert doc["otherData"]["window_start_ns"] == doc["otherData"]["origin_utc_ns"] + 2_000_000
    assert len(group_of(by_phase)) == 6


def test_nccl_set_one_timeline_and_skew(tmp_path, tmp_path_factory):
    """All six ranks' events in one validated timeline; the skew of ault44 from the one
    all-reduce of each rank: median end on ault44 minus median end on ault43."""
    files = sorted(trace_file(NCCL).glob("*.sqlite"))
    db = ingested(tmp_path_factory, *(f"{NCCL}/{p.name}" for p in files))
    ends = {}
    for path in files:
        [(host,)] = rank_oracle.rows(path, "SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'Hostname'")
        [(end,)] = rank_oracle.rows(path, "SELECT end FROM CUPTI_ACTIVITY_KIND_KERNEL")  # epoch ns already
        ends.setdefault(host, []).append(end)
    first = min(min(e) for e in ends.values())  # medians of small numbers: exact
    skew = int(statistics.median(e - first for e in ends["ault44.cscs.ch"])
               - statistics.median(e - first for e in ends["ault43.cscs.ch"]))
    with traceql.open(db) as ws:
        rows = ws.report("clock").to_pylist()
    assert {(r["host"], r["skew_ns"], r["collectives"]) for r in rows} == {
        ("ault43.cscs.ch", 0, 1), ("ault44.cscs.ch", skew, 1)}
    assert -3_000_000 < skew < 0
    _, doc, by_phase = merged(db, tmp_path / "nccl.json", "--align-clocks")
    groups = group_of(by_phase)
    assert len(groups) == 6 and {n.split(" · ")[0] for n in groups.values()} == {f"rank {r}" for r in range(6)}
    con = duckdb.connect(str(db), read_only=True)
    for view, cat in (("kernel", "kernel"), ("api_call", "cuda_api"), ("memcpy", "memcpy")):
        want = dict(con.execute(f"SELECT t.rank, count(*) FROM {view} v JOIN trace t USING (trace_id) GROUP BY 1")
                    .fetchall())
        got = {}
        for ev in by_phase["X"]:
            if ev["cat"] == cat:
                rank = int(groups[ev["pid"]].split()[1])
                got[rank] = got.get(rank, 0) + 1
        assert got == want and len(got) == 6, view
    con.close()


def test_a_trace_without_a_utc_start_is_a_job_on_its_own_clock(job, tmp_path):
    """It was refused (no shared axis); since issue 35 traces that are not one job each start at
    time 0 on their own clock, and a trace that records no UTC start is such a job of its own."""
    _, db, _ = job
    copy = tmp_path / "ws.duckdb"
    copy.write_bytes(db.read_bytes())
    traceql.ingest([nsys_stub(tmp_path / "stub.sqlite")], db=copy)
    with traceql.open(copy) as ws:
        assert ws.sql("SELECT utc_offset_ns FROM trace WHERE trace_id = 7").to_pylist() == [{"utc_offset_ns": None}]
        ws.export_perfetto(tmp_path / "x.json")
        assert ws.report("clock").to_pylist()[-1]["skew_ns"] is None
    doc = json.loads((tmp_path / "x.json").read_text())
    jobs = {tuple(j["trace_ids"]): j["reason"] for j in doc["otherData"]["jobs"]}
    assert jobs[(7,)] == "no UTC start recorded" and len(jobs) == 2
    groups = {e["args"]["name"]: e["pid"] for e in doc["traceEvents"] if e.get("name") == "process_name"}
    stub_pid = next(pid for name, pid in groups.items() if "trace 7" in name)
    stub_ts = [e["ts"] for e in doc["traceEvents"] if e.get("pid") == stub_pid and "ts" in e]
    assert min(stub_ts) == pytest.approx(0, abs=0.01)  # its own first event, not the stub's raw ts after the job's UTC origin
    proc = cli("--db", copy, "export", "--format", "csv", "-o", tmp_path / "csv", "--align-clocks")
    assert proc.returncode == 2 and "--align-clocks applies to --format perfetto" in proc.stderr
