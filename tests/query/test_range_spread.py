"""`report --by range --spread --skip-first N` and the sync column (queries/range.sql): K-FAC's
per-event statistics (seed 000, parse_nvtx_events.py: mean and standard deviation of CPU, kernel
and sync time per event, --ignore_first_event), checked on cs336-jsun against Python's sqlite3
over the source file, under the documented rules: a range instance holds the kernels whose
launching call lies wholly inside it (any thread of its process), and the blocking
synchronizations (device, stream, event) whose call starts inside it (any thread of its process)."""

import re
import sqlite3
import statistics
from collections import defaultdict

import pytest

import traceql

from ..util import cli
from .test_range_filter import CS336, Source
from ..util import ingested, trace_file

BLOCKING = re.compile(r"^(cudaDeviceSynchronize|cudaThreadSynchronize|cuCtxSynchronize|cudaStreamSynchronize|"
                      r"cuStreamSynchronize|cudaEventSynchronize|cuEventSynchronize)")


def sync_calls(path):
    """(start, duration, pid) of each CUPTI synchronization whose API call blocks the host, its
    call found by (process, correlation id) among the runtime calls."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    strings = dict(con.execute("SELECT id, value FROM StringIds"))
    names = {(gtid >> 24 & 0xFFFFFF, corr): strings[n] for gtid, corr, n in con.execute(
        "SELECT globalTid, correlationId, nameId FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass <> 67")}
    out = [(start, end - start, gpid >> 24 & 0xFFFFFF) for start, end, gpid, corr in con.execute(
        "SELECT start, end, globalPid, correlationId FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION")
        if BLOCKING.match(names.get((gpid >> 24 & 0xFFFFFF, corr), ""))]
    con.close()
    return out


def per_instance(src: Source, syncs):
    """name -> [(start, cpu ns, kernel ns, sync ns)] per range instance, in start order."""
    launched = []  # (call start, call end, pid, kernel ns)
    for op in src.ops:
        if op[0] == "kernel":
            call = src.launching_call(op)
            if call:
                launched.append((call[0], call[1], op[4], op[3] - op[2]))
    out = defaultdict(list)
    for start, end, pid, name in sorted(src.ranges):
        kernel = sum(k for a, b, p, k in launched if p == pid and start <= a and b <= end)
        sync = sum(d for s, d, p in syncs if p == pid and start <= s < end)
        out[name].append((start, end - start, kernel, sync))
    return out


def expected(instances, skip=0):
    rows = {}
    for name, inst in instances.items():
        inst = inst[skip:]
        if not inst:
            continue
        cpu, kern, sync = ([i[k] for i in inst] for k in (1, 2, 3))
        rows[name] = {
            "instances": len(inst), "cpu_total_ns": sum(cpu), "cpu_min_ns": min(cpu), "cpu_max_ns": max(cpu),
            "cpu_med_ns": statistics.median(cpu),
            "cpu_stddev_ns": round(statistics.stdev(cpu), 1) if len(cpu) > 1 else 0.0,
            "gpu_kernel_ns": sum(kern), "kernel_min_ns": min(kern), "kernel_max_ns": max(kern),
            "kernel_med_ns": statistics.median(kern), "kernel_avg_ns": round(statistics.mean(kern), 1),
            "kernel_stddev_ns": round(statistics.stdev(kern), 1) if len(kern) > 1 else 0.0,
            "sync_ns": sum(sync)}
    return rows


@pytest.fixture(scope="module")
def cs336(tmp_path_factory):
    path = trace_file(CS336)
    db = ingested(tmp_path_factory, CS336)
    src = Source(path)
    return db, per_instance(src, sync_calls(path))


@pytest.mark.parametrize("skip", [0, 1])
def test_spread_and_sync_equal_sqlite(cs336, skip):
    db, instances = cs336
    want = expected(instances, skip)
    with traceql.open(db) as ws:
        rows = ws.report("range", spread=True, skip_first=skip or None).to_pylist()
    got = {r["name"]: r for r in rows if r["name"] != "[unattributed]"}
    assert set(got) == set(want)
    for name, w in want.items():
        row = got[name]
        for key, value in w.items():
            assert row[key] == pytest.approx(value, abs=0.051), (name, key)
    # the figures themselves: 15 Forward ranges, 10 of them forward-only steps; skipping the
    # first (the warm-up's slow first forward) leaves 14 and takes the CPU spread from 76.5 ms to 14.7 ms
    assert got["Forward"]["instances"] == 15 - skip
    assert "[unattributed]" not in {r["name"] for r in rows}  # every kernel of cs336 lies in a range
    if skip:
        assert "Run Benchmark" not in got  # its one instance is left out
        assert round(got["Forward"]["cpu_stddev_ns"] / 1e6, 1) == 14.7
    else:  # every blocking synchronization of the trace lies inside 'Run Benchmark'
        assert got["Run Benchmark"]["sync_ns"] == 817826155
        assert round(got["Forward"]["cpu_stddev_ns"] / 1e6, 1) == 76.5


def test_sync_column_without_spread_and_stored_rows_agree(cs336):
    """Without --spread the spread columns are absent; the sync column is there, and the rows
    ingest stored answer the same as a recomputation."""
    db, instances = cs336
    with traceql.open(db) as ws:
        stored = ws.report("range")
        fresh = ws.report("range", recompute=True)
    assert stored.equals(fresh)
    assert "cpu_stddev_ns" not in stored.column_names and "sync_ns" in stored.column_names
    sync = {r["name"]: r["sync_ns"] for r in stored.to_pylist()}
    assert sync == {n: sum(i[3] for i in inst) for n, inst in instances.items()}


def test_cli_skip_first_csv(cs336):
    db, instances = cs336
    out = cli("--db", str(db), "report", "--by", "range", "--skip-first", "1", "--spread", "--match", "Backward",
              "--format", "csv", "-c", "name,instances,cpu_stddev_ns,kernel_stddev_ns,sync_ns")
    assert out.returncode == 0, out.stderr
    w = expected(instances, 1)["Backward"]
    assert out.stdout.splitlines()[1] == f"Backward,4,{w['cpu_stddev_ns']},{w['kernel_stddev_ns']},0"
    bad = cli("--db", str(db), "report", "--by", "kernel", "--skip-first", "1")
    assert bad.returncode == 2 and "--skip-first applies to --by range only" in bad.stderr


def test_stacked_plot_one_bar_per_event(cs336, tmp_path):
    """K-FAC's figure: one bar per range name, CPU time outside synchronization, synchronization,
    kernel and memcpy time end to end; each segment is the report's number (mean per instance,
    the first instance left out), and the bar ends at their sum."""
    pytest.importorskip("matplotlib")
    db, instances = cs336
    want = expected(instances, 1)
    with traceql.open(db) as ws:
        report = {r["name"]: r for r in ws.report("range", skip_first=1, match=["Forward", "Backward"]).to_pylist()}
        fig = ws.plot("range", tmp_path / "kfac.png", match=["Forward", "Backward"], skip_first=1, stacked=True,
                      stat="mean")
    ax = fig.axes[0]
    scale = {"time (s)": 1e9, "time (ms)": 1e6, "time (µs)": 1e3, "time (ns)": 1}[ax.get_xlabel()]
    names = [t.get_text().split("  (×")[0] for t in ax.get_yticklabels()]
    assert names == ["Backward", "Forward"]  # the longer step first
    assert [c.get_label() for c in ax.containers] == [
        "CPU time outside synchronization", "synchronization time", "GPU kernel time", "memcpy time"]
    for row, name in enumerate(names):
        r, n = report[name], want[name]["instances"]
        parts = [(r["cpu_total_ns"] - r["sync_ns"]) / n, r["sync_ns"] / n, r["gpu_kernel_ns"] / n, r["memcpy_ns"] / n]
        bars = [container[row] for container in ax.containers]
        assert [b.get_width() * scale for b in bars] == pytest.approx(parts, abs=1)  # cpu_avg_ns: whole ns
        assert bars[-1].get_x() * scale + bars[-1].get_width() * scale == pytest.approx(sum(parts), abs=1)
        assert r["sync_ns"] == want[name]["sync_ns"]
    assert (tmp_path / "kfac.png").stat().st_size > 10_000
    with pytest.raises(traceql.UsageError, match="--stacked"):
        traceql.open(db).plot("kernel", stacked=True)


@pytest.mark.parametrize("skip", [0, 1])
def test_ranges_of_a_process_without_synchronizations(cs336, tmp_path, skip):
    """Only the instances of processes that made a blocking synchronization are sorted among
    them (queries/range.sql, probed); the others hold 0 sync time, not NULL, and are still
    counted. The 'Forward' ranges of a copy of cs336 are moved to a process that made none:
    their row keeps its instances, CPU and kernel time, and its sync time becomes 0; every other
    row is unchanged."""
    import shutil

    import duckdb

    db, instances = cs336
    copy = tmp_path / "moved.duckdb"
    shutil.copy(db, copy)
    con = duckdb.connect(str(copy))
    pid = con.execute("SELECT max(pid) + 1 FROM nvtx_range").fetchone()[0]
    assert con.execute("SELECT count(*) FROM sync_event WHERE pid = ?", [pid]).fetchone()[0] == 0
    con.execute("UPDATE nvtx_range SET pid = ? WHERE name = 'Forward'", [pid])
    con.close()
    want = expected(instances, skip)
    assert want["Forward"]["sync_ns"] > 0  # the moved ranges held synchronizations in their own process
    with traceql.open(copy) as ws:
        got = {r["name"]: r for r in ws.report("range", spread=True, skip_first=skip or None).to_pylist()}
    assert set(got) == set(want)
    for name, w in want.items():
        for key, value in w.items():
            expect = 0 if (name, key) == ("Forward", "sync_ns") else value
            assert got[name][key] == pytest.approx(expect, abs=0.051), (name, key)
