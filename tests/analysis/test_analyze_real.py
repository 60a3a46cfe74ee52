"""traceql analyze on real exports in ../shared/traces, each figure checked against a computation
with Python's sqlite3 over the source file: cs336-jsun's synchronizations and GPU gaps,
nvfuser-8xh100's gaps, breakdown and low-utilization chunks, the NCCL ring set's exposed
communication, and the DLProf expert-system output for the DLProf trace (what agrees, and why
the rest differs)."""

from __future__ import annotations

import csv
import re

import pytest

import traceql

from ..intervals import gaps, length, minus, union
from ..util import source_rows as query
from ..util import ingested, trace_file

CS336 = "cs336-jsun-train-fwdbwd-rtx3070ti-nsys2025.1/result.sqlite"
NVFUSER = "nvfuser-8xh100-nsys2024.6/report1.sqlite"
NCCL = "nccl-ring-2nodes-3gpus-nsys2024.5"
DLPROF = "dlprof-pytorch-emit-nvtx-nsys2022.1"
SYNC_NAMES = re.compile(r"^(cudaDeviceSynchronize|cudaThreadSynchronize|cuCtxSynchronize|cudaStreamSynchronize|"
                        r"cuStreamSynchronize|cudaEventSynchronize|cuEventSynchronize)")


def workspace(tmp_path_factory, *files):
    """A copy of the session's plain ingest of FILES (tests/util.py ingested): cs336-jsun, the H100
    trace and the DLProf trace alone are ingested for other modules too (cs336-jsun cost each of
    them 1.5 CPU s)."""
    return traceql.open(ingested(tmp_path_factory, *map(str, files)))


def gpu_ops(path):
    """(device, start, end, correlationId, pid, kind) of every kernel, copy and memset."""
    tables = {r[0] for r in query(path, "SELECT name FROM sqlite_master WHERE type = 'table'")}
    out = []
    for table, kind in (("CUPTI_ACTIVITY_KIND_KERNEL", "kernel"), ("CUPTI_ACTIVITY_KIND_MEMCPY", "memcpy"),
                        ("CUPTI_ACTIVITY_KIND_MEMSET", "memset")):
        if table in tables:
            out += [(*r, kind) for r in query(path, f"SELECT deviceId, start, end, correlationId, "
                                                    f"(globalPid >> 24) & 16777215 FROM {table}")]
    return out


# ------------------------------------------------------------------------------ cs336-jsun

@pytest.fixture(scope="module")
def cs336(tmp_path_factory):
    path = trace_file(CS336)
    ws = workspace(tmp_path_factory, path)
    yield path, ws
    ws.close()


def test_cs336_device_synchronize_finding(cs336):
    """The issue's finding: 15 cudaDeviceSynchronize calls waiting 812 ms, from the
    SYNCHRONIZATION records joined to their runtime calls by correlation id and process."""
    path, ws = cs336
    expected = {name.rsplit("_v", 1)[0]: (n, wait, call) for name, n, wait, call in query(path, """
        SELECT s.value, count(*), sum(y.end - y.start), sum(r.end - r.start)
        FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION y
        JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = y.correlationId
             AND (r.globalTid >> 24) = (y.globalPid >> 24) AND r.eventClass <> 67
        JOIN StringIds s ON s.id = r.nameId GROUP BY 1""")}
    assert expected["cudaDeviceSynchronize"] == (15, 812_498_895, 812_547_560)
    stored = {r["api_name"]: (r["n"], r["wait"]) for r in ws.sql(
        "SELECT api_name, count(*) AS n, sum(dur) AS wait FROM sync_event GROUP BY 1").to_pylist()}
    assert stored == {k: v[:2] for k, v in expected.items()}
    assert ws.sql("SELECT count(*) AS n FROM sync_event WHERE api_id IS NULL OR tid IS NULL").to_pylist()[0]["n"] == 0
    result = ws.analyze(["sync_calls"])
    calls = result.evidence["sync_calls"].to_pylist()
    device = [r for r in calls if r["call"] == "cudaDeviceSynchronize"]
    assert (len(device), sum(r["wait_ns"] for r in device)) == (15, 812_498_895)
    assert {r["kind"] for r in device} == {"device"}
    assert len(calls) == 15 + 112  # and the stream synchronizations; the 42 cudaEventQuery never block
    # the GPU idle time after each: the last gap of the GPU that began while the call waited
    busy = union([(s, e) for _, s, e, _, _, _ in gpu_ops(path)])
    holes = [(a[1], b[0] - a[1]) for a, b in zip(busy, busy[1:])]
    syncs = query(path, "SELECT y.start, y.end FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION y "
                        "JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = y.correlationId "
                        "JOIN StringIds s ON s.id = r.nameId WHERE s.value LIKE 'cudaDeviceSynchronize%'")
    idle = {}
    for s, e in syncs:
        inside = [g for g in holes if s <= g[0] <= e]
        idle[s] = inside[-1][1] if inside else 0
    assert {r["ts"]: r["gpu_idle_ns"] for r in device} == idle
    [summary] = [r for r in result.findings.to_pylist() if r["rule"] == "sync_calls"]
    assert "cudaDeviceSynchronize: 15 calls, 11.8 ms, wait 812 ms" in summary["breakdown"]


def test_cs336_gpu_gap_finding(cs336):
    """62 gaps of at least 1 ms on the GPU, 568.7 ms in all, each with its cause worked out
    again here from the source tables."""
    path, ws = cs336
    ops = gpu_ops(path)
    expected = gaps([(s, e) for _, s, e, _, _, _ in ops], 1_000_000)
    assert (len(expected), sum(g for _, g in expected)) == (62, 568_728_712)
    rows = ws.analyze(["gpu_gaps"]).evidence["gpu_gaps"].to_pylist()
    assert sorted((r["ts"], r["gap_ns"]) for r in rows) == expected

    names = dict(query(path, "SELECT id, value FROM StringIds"))
    calls = query(path, "SELECT start, end, globalTid, correlationId, nameId FROM CUPTI_ACTIVITY_KIND_RUNTIME "
                        "WHERE eventClass <> 67")
    by_key = {((g >> 24) & 16777215, c): (s, e, g) for s, e, g, c, _ in calls}
    by_thread: dict = {}
    for s, e, g, _, n in calls:
        by_thread.setdefault(g, []).append((s, e, names[n].rsplit("_v", 1)[0]))
    blocking = {(r[0] >> 24, r[1]) for r in query(path, """
        SELECT y.globalPid, y.correlationId FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION y
        JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = y.correlationId AND (r.globalTid >> 24) = (y.globalPid >> 24)
        JOIN StringIds s ON s.id = r.nameId WHERE s.value NOT LIKE 'cudaEventQuery%' AND s.value NOT LIKE 'cudaStreamWaitEvent%'""")}
    pageable = {((g >> 24) & 16777215, c) for g, c in query(
        path, "SELECT globalPid, correlationId FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE srcKind = 0 OR dstKind = 0")}
    overhead = query(path, "SELECT start, end, (globalTid >> 24) & 16777215 FROM PROFILER_OVERHEAD")
    causes = {}
    for ts, gap in expected:
        [(_, _, _, corr, pid, _)] = [o for o in ops if o[1] == ts + gap]  # one operation ends each gap
        s, e, tid = by_key[(pid, corr)]
        if any(o_pid == pid and o_s < ts + gap and o_e > ts for o_s, o_e, o_pid in overhead):
            cause = "profiler"
        elif e <= ts:
            cause = "gpu_wait"
        elif s <= ts:
            cause = "launch"
        else:
            running = max((c for c in by_thread[tid] if c[0] <= ts), default=None)
            running = running if running and running[1] > ts else None
            key = None
            if running:
                key = next(((tid >> 24) & 16777215, c) for cs, ce, g, c, _ in calls if g == tid and cs == running[0])
            sync = running and (key in blocking or key in pageable or SYNC_NAMES.match(running[2])
                                or (re.match(r"^(cudaMemcpy|cuMemcpy|cudaMemset|cuMemset)", running[2])
                                    and "Async" not in running[2]))
            cause = "sync" if sync else "host"
        causes[ts] = cause
    assert {r["ts"]: r["cause"] for r in rows} == causes
    counts = {c: list(causes.values()).count(c) for c in set(causes.values())}
    assert counts == {"host": 20, "launch": 16, "sync": 20, "gpu_wait": 4, "profiler": 2}


def test_cs336_cli_at_80_columns(cs336, tmp_path):
    from .test_analyze import run

    path, ws = cs336
    out = run("--db", str(ws.path), "analyze", env={"COLUMNS": "80"}).stdout
    lines = out.splitlines()
    assert all(len(line) <= 80 for line in lines), max(lines, key=len)
    assert re.search(r"\n\d\. gpu_gaps: 62 gaps, recoverable 521 ms", out)
    assert "cudaDeviceSynchronize: 15 calls, 11.8 ms, wait 812 ms" in out.replace("\n     ", " ")


# ------------------------------------------------------------------------------ nsys-ai's H100 trace

H100 = "nsysai-h100-2gpu-pytorch-nsys2026.2/h100_2gpu_1s.sqlite"


def test_h100_copies_are_the_first_finding(tmp_path_factory):
    """Two GPUs that spend 97 % of the trace copying host to device (25 GB each, FSDP's
    pre-forward among them) and 2 % computing: the first finding is exposed_memcpy, not
    small_kernels (1.6 ms), which it was before the rule existed. Each copy's exposed time is its
    interval less the union of its GPU's kernels, from the source file."""
    path = trace_file(H100)
    ws = workspace(tmp_path_factory, path)
    try:
        result = ws.analyze()
        found = [r for r in result.findings.to_pylist() if r["findings"]]
        first = max(found, key=lambda r: r["recoverable_ns"])
        assert first["rule"] == "exposed_memcpy"
        rows = result.evidence["exposed_memcpy"].to_pylist()
        breakdown = {r["device_id"]: r for r in ws.report("breakdown").to_pylist()}
    finally:
        ws.close()
    from ..util import cli

    proc = cli("--db", str(ws.path), "analyze", "--rule", "exposed_memcpy", "--limit", "1", "--width", "300")
    # the two GPUs' copy time is twice the span: said, not left as a share that cannot be
    assert re.search(r"\n1\. exposed_memcpy: 904 copies, recoverable 1\.88 s, copy 1\.88 s \(19\d\.\d\d% of the trace "
                     r"span: the times of its GPUs, streams or threads add up\)\n", proc.stdout), proc.stdout
    ops = gpu_ops(path)
    kernels = {d: union((s, e) for dev, s, e, _, _, kind in ops if kind == "kernel" and dev == d) for d in (0, 1)}
    copies = query(path, "SELECT deviceId, start, end, bytes FROM CUPTI_ACTIVITY_KIND_MEMCPY")
    expected = sorted((e - s - length(kernels[d], s, e), d, s, b) for d, s, e, b in copies)
    expected = [x for x in expected if x[0] >= 1]
    assert sorted((r["exposed_ns"], r["device_id"], r["ts"], r["bytes"]) for r in rows) == expected
    assert len(rows) == 904 and first["recoverable_ns"] == sum(x[0] for x in expected)
    for d in (0, 1):
        exposed = sum(r["exposed_ns"] for r in rows if r["device_id"] == d)
        mine = [(s, e) for dev, s, e, _, _, kind in ops if kind == "memcpy" and dev == d]
        memsets = [(s, e) for dev, s, e, _, _, kind in ops if kind == "memset" and dev == d]
        # no two copies of a GPU overlap here: their exposed times add up to the time it only
        # copied, nearly all of its copy-only time (the breakdown's memory counts memsets too)
        assert exposed == minus(mine, [tuple(k) for k in kernels[d]]) > 0.95 * breakdown[d]["span_ns"]
        assert breakdown[d]["memory_ns"] == minus(mine + memsets, [tuple(k) for k in kernels[d]]) < exposed + 20_000
        h2d = [r for r in rows if r["device_id"] == d and r["copy_kind"] == "Host-to-Device"]
        assert sum(r["bytes"] for r in h2d) == 25475253792 and max(r["gb_per_s"] for r in h2d) < 30


# ------------------------------------------------------------------------------ nvfuser-8xh100

@pytest.fixture(scope="module")
def nvfuser(tmp_path_factory):
    path = trace_file(NVFUSER)
    ws = workspace(tmp_path_factory, path)
    yield path, ws
    ws.close()


def test_nvfuser_gaps_breakdown_and_low_utilization(nvfuser):
    path, ws = nvfuser
    ops = gpu_ops(path)
    assert {d for d, *_ in ops} == {0}
    intervals = [(s, e) for _, s, e, _, _, _ in ops]
    every = ws.analyze(["gpu_gaps"], min_gap_ns=1).evidence["gpu_gaps"].to_pylist()
    assert sorted((r["ts"], r["gap_ns"]) for r in every) == gaps(intervals)
    big = ws.analyze(["gpu_gaps"]).evidence["gpu_gaps"].to_pylist()
    assert sorted((r["ts"], r["gap_ns"]) for r in big) == gaps(intervals, 1_000_000)
    assert len(big) == 9 and {r["cause"] for r in big} == {"host"}  # the host compiles (nvFuser, NVRTC)
    # breakdown: every kernel is compute; copies and memsets outside kernels are memory
    span = ws.sql("SELECT duration FROM trace").to_pylist()[0]["duration"]
    kernels = union([(s, e) for _, s, e, _, _, k in ops if k == "kernel"])
    everything = union(intervals)
    [b] = ws.report("breakdown").to_pylist()
    assert (b["compute_ns"], b["comm_ns"], b["memory_ns"], b["idle_ns"]) == (
        length(kernels), 0, length(everything) - length(kernels), span - length(everything))
    # low utilization: 30 chunks from the first to the last operation, as nsys's gpu_time_util
    first, last = everything[0][0], everything[-1][1]
    expected = {}
    for i in range(30):
        lo, hi = first + (last - first) * i // 30, first + (last - first) * (i + 1) // 30
        if 100.0 * length(everything, lo, hi) / (hi - lo) < 50:
            expected[i] = length(everything, lo, hi)
    rows = ws.analyze(["low_utilization"]).evidence["low_utilization"].to_pylist()
    assert {r["chunk"]: r["busy_ns"] for r in rows} == expected


# ------------------------------------------------------------------------------ NCCL ring, 6 ranks

@pytest.fixture(scope="module")
def nccl(tmp_path_factory):
    files = sorted(trace_file(NCCL).glob("*.sqlite"))
    ws = traceql.open(ingested(tmp_path_factory, *(f"{NCCL}/{p.name}" for p in files)))
    yield files, ws
    ws.close()


def test_nccl_ranks_exposed_communication(nccl):
    """One all-reduce kernel per rank and no computation beside it: all of it is exposed."""
    files, ws = nccl
    ids = {r["path"]: r["trace_id"] for r in ws.sql("SELECT trace_id, path FROM trace").to_pylist()}
    comm = {r["trace_id"]: r for r in ws.analyze(["exposed_comm"]).evidence["exposed_comm"].to_pylist()}
    breakdown = {r["trace_id"]: r for r in ws.report("breakdown", per_trace=True).to_pylist()}
    assert len(comm) == len(files) == 6
    for path in files:
        tid = ids[str(path.resolve())]
        [(name, start, end)] = query(path, "SELECT s.value, k.start, k.end FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                                           "JOIN StringIds s ON s.id = k.shortName")
        assert name.startswith("ncclKernel_AllReduce")
        row = comm[tid]
        assert (row["ts"], row["comm_ns"], row["overlapped_ns"], row["exposed_ns"]) == (start, end - start, 0, end - start)
        everything = union([(s, e) for _, s, e, _, _, _ in gpu_ops(path)])
        b = breakdown[tid]
        span = ws.sql(f"SELECT duration FROM trace WHERE trace_id = {tid}").to_pylist()[0]["duration"]
        assert (b["compute_ns"], b["comm_ns"], b["comm_total_ns"]) == (0, end - start, end - start)
        assert b["memory_ns"] == length(everything) - (end - start)
        assert b["idle_ns"] == span - length(everything) and b["comm_hidden_pct"] == 0


# ------------------------------------------------------------------------------ DLProf's expert systems

def dlprof_csv(name):
    path = trace_file(f"{DLPROF}/oracle/dlprof_{name}.csv")
    with open(path, newline="") as fh:
        lines = fh.read().splitlines()
    return lines


def test_dlprof_expert_systems_compared(tmp_path_factory):
    """DLProf v1.8.0's expert systems on its own trace said: 5 ops eligible for tensor cores but none
    using FP16; the GPU underutilized (0.0% of the profiled time on kernels); no DALI; no
    iterations (no key op). traceql analyze on the same file:"""
    path = trace_file(f"{DLPROF}/nsys_profile.sqlite")
    expert = dlprof_csv("expert_systems")
    assert expert[2].startswith('"5 ops were eligible to use tensor cores but none are using FP16"')
    with workspace(tmp_path_factory, path) as ws:
        result = ws.analyze()
        # tensor cores: the same five ops (two conv2d, three linear), with the same GPU time per op
        # as DLProf's tensor core report; DLProf calls them eligible for FP16, traceql says why
        # they are not: fp32 (reason 'dtype')
        report = list(csv.DictReader(dlprof_csv("tensor_core")[1:]))
        tc = result.evidence["tensor_cores"].to_pylist()
        assert sorted(r["kernel_ns"] for r in tc) == sorted(int(r["Total GPU Time (ns)"]) for r in report)
        assert sorted(r["op"] for r in tc) == sorted(r["Op Type"] for r in report) == \
            ["conv2d", "conv2d", "linear", "linear", "linear"]
        assert {r["reason"] for r in tc} == {"dtype"} and {r["dtype"] for r in tc} == {"fp32"}
        # utilization: DLProf's "All ops" GPU time, 644,990 ns, is traceql's busy time (the union of
        # kernels, copies and memsets); DLProf divides by its wall clock from session start
        # (2,840,562,182 ns = the last event's end), traceql by the span from the first event
        summary = dict(line.split(",", 1) for line in dlprof_csv("summary") if line.count(",") == 1)
        all_ops = next(line for line in dlprof_csv("summary") if line.startswith("All ops,"))
        [busy] = ws.sql("SELECT busy_ns FROM device_busy").to_pylist()
        assert busy["busy_ns"] == int(all_ops.split(",")[1]) == 644_990
        last_end = max(query(path, "SELECT max(end) FROM CUPTI_ACTIVITY_KIND_RUNTIME")[0][0],
                       query(path, "SELECT max(end) FROM CUPTI_ACTIVITY_KIND_KERNEL")[0][0])
        assert int(summary["Wall Clock Time (ns)"]) == last_end == 2_840_562_182
        [trace] = ws.sql("SELECT start_ts, duration FROM trace").to_pylist()
        assert trace["start_ts"] + trace["duration"] == last_end and trace["start_ts"] == 589_835_307
        assert float(summary["GPU Utilization %"]) == round(100 * busy["busy_ns"] / last_end, 1) == 0.0
        [b] = ws.report("breakdown").to_pylist()
        assert b["idle_pct"] == pytest.approx(100 - 100 * 644_990 / trace["duration"])
        low = [r for r in result.findings.to_pylist() if r["rule"] == "low_utilization"][0]
        assert low["findings"] == 30  # every chunk of the GPU's 5.1 ms of activity is below 50 %
        # iterations: DLProf found no key op; traceql finds no repeating range or paced kernel
        assert expert[5].startswith('"Unable to split profile into training iterations')
        [it] = result.evidence["iterations"].to_pylist()
        assert it["recoverable_ns"] is None and it["note"].startswith("no clear iteration pattern")


# ------------------------------------------------------------------------------ other formats' synchronizations

def test_nvprof_synchronizations(tmp_path_factory):
    """nvprof keeps CUPTI's record type; the kind still comes from the call (cbid 131
    cudaStreamSynchronize, 147 cudaStreamWaitEvent), the device from the record's context."""
    path = trace_file("nvprof-nccl-8xv100/output.nvvp")
    expected = query(path, """SELECT r.cbid, y.type, c.deviceId, count(*), sum(y.end - y.start)
        FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION y
        JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = y.correlationId
        JOIN CUPTI_ACTIVITY_KIND_CONTEXT c ON c.contextId = y.contextId GROUP BY 1, 2, 3 ORDER BY 1, 3""")
    names = {131: ("cudaStreamSynchronize", "stream", 3), 147: ("cudaStreamWaitEvent", "stream_wait", 2)}
    with workspace(tmp_path_factory, path) as ws:
        got = ws.sql("SELECT api_name, kind, device_id, count(*) AS n, sum(dur) AS d FROM sync_event "
                     "GROUP BY ALL ORDER BY api_name, device_id").to_pylist()
        assert [(r["api_name"], r["kind"], r["device_id"], r["n"], r["d"]) for r in got] == [
            (names[cbid][0], names[cbid][1], dev, n, d) for cbid, typ, dev, n, d in expected]
        assert all(names[cbid][2] == typ for cbid, typ, *_ in expected)  # CUPTI's numbering, as nvprof keeps it


def test_kineto_synchronizations(tmp_path_factory):
    """PyTorch profiler traces write CUPTI's synchronizations as 'cuda_sync' events."""
    import gzip
    import json

    [path] = list(trace_file("kineto-hta-alexnet-a100").glob("*.json.gz"))
    events = json.load(gzip.open(path))["traceEvents"]
    calls = {e["args"]["correlation"]: e["name"] for e in events if e.get("cat") == "cuda_runtime"}
    expected: dict = {}
    for e in events:
        if e.get("cat") == "cuda_sync":
            key = (e["args"]["cuda_sync_kind"], calls[e["args"]["correlation"]])
            n, d = expected.get(key, (0, 0))
            expected[key] = (n + 1, d + round(e["dur"] * 1000))
    kinds = {"Context Sync": "device", "Stream Sync": "stream", "Stream Wait Event": "stream_wait"}
    with workspace(tmp_path_factory, path) as ws:
        got = {(r["kind"], r["api_name"]): (r["n"], r["d"]) for r in ws.sql(
            "SELECT kind, api_name, count(*) AS n, sum(dur) AS d FROM sync_event GROUP BY ALL").to_pylist()}
        assert got == {(kinds[k], call): v for (k, call), v in expected.items()}
        assert got[("device", "cudaDeviceSynchronize")][0] == 5
        calls = ws.analyze(["sync_calls"]).evidence["sync_calls"].to_pylist()
        assert sorted({r["call"] for r in calls}) == ["cudaDeviceSynchronize", "cudaStreamSynchronize"]
        assert len(calls) == 5 + 16
