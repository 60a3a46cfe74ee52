"""PyTorch profiler (Kineto) traces against what other tools computed from the same files
(../shared/reference/oracles.md): TraceLens's perf-report sheets (bert-small and qwen0.5b on an
H100), the TensorBoard profiler plugin's golden responses (ResNet-50, 2021) and the figures
HTA's tests assert. Each sheet is compared row by row with the same figure computed from
traceql's contract rows; where the tools define a figure differently, the test applies their
definition to traceql's rows and says so.

Float noise: TraceLens works on float64 microseconds. At 1.4e12 us a float64 is exact to
2^-12 us (0.24 ns), so each timestamp it uses may be off by up to 0.12 ns from the exact
decimal; a figure built from N timestamps may differ from traceql's exact one by N x 0.25 ns.
That is the tolerance used for TraceLens's figures (TOL_NS per event).
"""

from __future__ import annotations

import csv
import json
from collections import Counter, defaultdict
from itertools import groupby

import pytest

import traceql

from .test_kineto import REAL, TRACES, load, ns, real_kineto, trace_ids
from ..intervals import minus, union_length
from ..util import NO_TRACES

TOL_NS = 0.25  # per float64 timestamp TraceLens added or subtracted (see the module doc)
BERT, QWEN, TB = "kineto-tracelens-h100-bert-small", "kineto-tracelens-h100-qwen0.5b", "kineto-tbplugin-resnet50-2021"


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    if not TRACES.is_dir():
        pytest.skip(NO_TRACES)
    folders = [BERT, QWEN, TB, "kineto-hta-ddp-v100-rank0", "kineto-hta-nccl-data", "kineto-hta-triton",
               "kineto-hta-legacy-categories"]
    paths = [TRACES / f / REAL[f] for f in folders]
    if not all(p.exists() for p in paths):
        pytest.skip(NO_TRACES)
    with traceql.open(real_kineto(tmp_path_factory)) as w:  # these and the other Kineto traces, apart by trace id
        yield w, trace_ids(w)


def rows(w, sql, **params):
    return w.sql(sql, params).to_pylist()


def sheet(folder, name):
    with open(TRACES / folder / "oracle" / f"tracelens_{name}.csv", newline="") as fh:
        return list(csv.DictReader(fh))




# ----------------------------------------------------------------------------- TraceLens

# every GPU operation of trace $t with its op call: the innermost op around its launching call
# (kernel_op.op_range_id for kernels, the innermost enclosing range for copies and memsets), and
# whether its launching call is in the trace
GPU_OPS = """
    SELECT o.op_kind::VARCHAR AS kind, o.name, o.stream_id, o.ts, o.ts + o.dur AS e, o.dur,
           coalesce(t.name, '') AS op, t.range_id AS op_range_id, l.api_id IS NOT NULL AS launched
    FROM gpu_op o
    JOIN launch l ON l.trace_id = o.trace_id AND l.op_id = o.op_id
    LEFT JOIN kernel_op k ON k.trace_id = o.trace_id AND k.kernel_id = o.op_id
    LEFT JOIN op_range r ON r.trace_id = o.trace_id AND r.op_id = o.op_id AND r.is_innermost
    LEFT JOIN nvtx_range t ON t.trace_id = o.trace_id AND t.range_id = coalesce(k.op_range_id, r.range_id)
    WHERE o.trace_id = $t
"""
LAUNCHED_GPU_OPS = f"SELECT * FROM ({GPU_OPS}) WHERE launched"


@pytest.mark.parametrize("folder, unlaunched", [(BERT, 0), (QWEN, 509)])
def test_tracelens_gpu_timeline(ws, folder, unlaunched):
    """gpu_timeline: computation, exposed communication, exposed memcpy, busy, idle, total.
    TraceLens counts only the GPU work whose launching call the trace holds: qwen0.5b has 509
    kernels and memsets whose calls were made before the capture began (correlation ids
    675771-682741, below the first captured call's 682747; traceql keeps them, counted in
    ingest_stats launch.ops_without_launch); they ran during its first 33 ms. TraceLens counts
    memsets as computation, copies as memcpy; its total is the span of that GPU work, not the
    trace span of traceql's breakdown report. On bert, where every operation has its call,
    traceql's stored device_busy row gives the same figures directly."""
    w, ids = ws
    t = ids[folder]
    assert rows(w, "SELECT value FROM ingest_stats WHERE trace_id = $t AND key = 'launch.ops_without_launch'",
                t=t) == ([{"value": unlaunched}] if unlaunched else [])
    ops = rows(w, LAUNCHED_GPU_OPS, t=t)
    compute = [(o["ts"], o["e"]) for o in ops if o["kind"] in ("kernel", "memset")]
    memcpy = [(o["ts"], o["e"]) for o in ops if o["kind"] == "memcpy"]
    ours = {"computation_time": union_length(compute), "exposed_comm_time": 0,
            "exposed_memcpy_time": minus(memcpy, compute), "busy_time": union_length(compute + memcpy),
            "total_time": max(o["e"] for o in ops) - min(o["ts"] for o in ops),
            "total_comm_time": 0, "total_memcpy_time": union_length(memcpy)}
    ours["idle_time"] = ours["total_time"] - ours["busy_time"]
    oracle = {r["type"]: float(r["time ms"]) * 1e6 for r in sheet(folder, "gpu_timeline")}
    assert set(oracle) == set(ours)
    for key, value in oracle.items():
        assert abs(ours[key] - value) <= TOL_NS * 2 * len(ops) + 1e-6, key
    pct = {r["type"]: float(r["percent"]) for r in sheet(folder, "gpu_timeline")}
    assert abs(100 * ours["idle_time"] / ours["total_time"] - pct["idle_time"]) < 1e-3
    if not unlaunched:
        busy = rows(w, "SELECT busy_ns, compute_ns, comm_exposed_ns, memory_exposed_ns FROM device_busy "
                       "WHERE trace_id = $t", t=t)
        assert busy == [{"busy_ns": ours["busy_time"], "compute_ns": ours["computation_time"],
                         "comm_exposed_ns": 0, "memory_exposed_ns": ours["exposed_memcpy_time"]}]


@pytest.mark.parametrize("folder", [BERT, QWEN])
def test_tracelens_kernel_summary(ws, folder):
    """kernel_summary: per (parent cpu_op, kernel name, stream) the kernels' count, sum, mean,
    min and max (us) and shares. The parent cpu_op is the innermost op around the launching call
    (kernel_op.op_range_id); here every kernel counts, those without a launching call under the
    parent '' (qwen0.5b: 436 kernels in 17 rows). The share of total time is of the gpu_timeline
    total (the span of launched work). 'Parent op category' is TraceLens's own op classification
    (GEMM, elementwise, ...), which traceql does not make: not compared."""
    w, ids = ws
    ops = [o for o in rows(w, GPU_OPS, t=ids[folder]) if o["kind"] == "kernel"]
    groups = defaultdict(list)
    for o in ops:
        groups[(o["op"], o["name"], o["stream_id"])].append(o["dur"])
    total_kernels = sum(o["dur"] for o in ops)
    span = max(o["e"] for o in rows(w, LAUNCHED_GPU_OPS, t=ids[folder])) - \
        min(o["ts"] for o in rows(w, LAUNCHED_GPU_OPS, t=ids[folder]))
    oracle = sheet(folder, "kernel_summary")
    assert len(oracle) == len(groups)
    for r in oracle:
        durs = groups[(r["Parent cpu_op"], r["Kernel name"], int(r["Kernel stream"]))]
        assert len(durs) == int(r["Kernel duration (µs)_count"])
        for col, ours in (("sum", sum(durs)), ("min", min(durs)), ("max", max(durs)), ("mean", sum(durs) / len(durs))):
            assert abs(ours / 1000 - float(r[f"Kernel duration (µs)_{col}"])) < 1e-6, (r["Kernel name"], col)
        assert abs(100 * sum(durs) / total_kernels - float(r["Percent of kernels time (%)"])) < 1e-6
        assert abs(100 * sum(durs) / span - float(r["Percent of total time (%)"])) < 1e-4


@pytest.mark.parametrize("folder", [BERT, QWEN])
def test_tracelens_ops_summary(ws, folder):
    """ops_summary: per cpu_op name the GPU time of the kernels, copies and memsets it launched
    directly (its innermost op) and the number of its calls that launched any (qwen0.5b's 96
    aten::mm calls launched a gemm and a memset each: 96, 6668.68 us). TraceLens sums float64
    end - start differences: within TOL_NS per timestamp of traceql's exact sums."""
    w, ids = ws
    ops = rows(w, LAUNCHED_GPU_OPS, t=ids[folder])
    by_op, calls = defaultdict(list), defaultdict(set)
    for o in ops:
        by_op[o["op"]].append(o["dur"])
        calls[o["op"]].add(o["op_range_id"])
    oracle = sheet(folder, "ops_summary")
    assert {r["name"] for r in oracle} == set(by_op)
    for r in oracle:
        durs = by_op[r["name"]]
        assert len(calls[r["name"]]) == int(r["Count"]), r["name"]
        assert abs(sum(durs) - float(r["total_direct_kernel_time_sum"]) * 1000) <= TOL_NS * 2 * len(durs), r["name"]


@pytest.mark.parametrize("folder, n", [(BERT, 4), (QWEN, 5)])
def test_tracelens_gemm_flops_and_bytes(ws, folder, n):
    """GEMM sheet: per (op, input dims) the calls, FLOPs and bytes moved of one call, and the GPU
    time of all calls. traceql's FLOPs and bytes (kernel_op, from torch_op.sizes and dtypes, which
    come from the cpu_op's Input Dims and Input type) equal TraceLens's exactly; its kernel time
    counts every GPU operation the calls launched (qwen0.5b's aten::mm also launched a memset)."""
    w, ids = ws
    t = ids[folder]
    gpu = defaultdict(int)
    for o in rows(w, GPU_OPS, t=t):
        gpu[o["op_range_id"]] += o["dur"]
    oracle = sheet(folder, "GEMM")
    assert len(oracle) == n
    for r in oracle:
        calls = rows(w, """
            SELECT t.range_id, max(ko.flops) AS flops, max(ko.bytes) AS bytes
            FROM torch_op t JOIN kernel_op ko ON ko.trace_id = t.trace_id AND ko.unit_range_id = t.range_id
            WHERE t.trace_id = $t AND t.name = $name AND t.sizes = $sizes GROUP BY t.range_id""",
                     t=t, name=r["name"], sizes=r["Input Dims_first"])
        assert len(calls) == int(r["name_count"]), r["Input Dims_first"]
        assert {c["flops"] for c in calls} == {round(float(r["GFLOPS_first"]) * 1e9)}
        assert {c["bytes"] for c in calls} == {round(float(r["Data Moved (MB)_first"]) * 2 ** 20)}
        total = sum(gpu[c["range_id"]] for c in calls)
        assert abs(total - float(r["Kernel Time (µs)_sum"]) * 1000) <= TOL_NS * 4 * len(calls), r["Input Dims_first"]


# ----------------------------------------------------------------------------- TensorBoard plugin

def tb(name):
    return json.loads((TRACES / TB / "oracle" / f"tbplugin_worker0_{name}.json").read_text())


def test_tbplugin_kernel_table(ws):
    """kernel/table: per kernel name the calls and total, mean, max and min duration (us, whole:
    the 2021 file writes whole microseconds); traceql's report --by kernel, every row."""
    w, ids = ws
    ours = {r["name"]: r for r in w.report(by="kernel", trace_id=ids[TB], limit=1000).to_pylist()}
    table = tb("kernel_table")["data"]["rows"]
    assert len(table) == len(ours) == 62
    for name, calls, total, mean, mx, mn in table:
        r = ours[name]
        assert (r["calls"], r["total_ns"], r["max_ns"], r["min_ns"]) == (calls, total * 1000, mx * 1000, mn * 1000), name
        assert round(r["total_ns"] / r["calls"] / 1000) == mean, name
    assert sum(r[1] for r in table) == 9564 and sum(r[2] for r in table) == 640354


def test_tbplugin_overview_steps(ws):
    """overview: per ProfilerStep the time kernels, copies and memsets ran (the union of their
    intervals, kernels first) for the work launched inside the step: traceql's attribution of GPU
    work to the step's range. The plugin's Runtime, DataLoader, CPU Exec and Other columns split
    its own step window (from CPU and GPU boundaries it derives) by CPU activity: not compared."""
    w, ids = ws
    t = ids[TB]
    want = {f"ProfilerStep#{r[0]}": (r[1], r[2], r[3])
            for r in [[x for x in row if not (isinstance(x, str) and x.startswith("<"))]
                      for row in tb("overview")["steps"]["rows"]]}
    steps = rows(w, "SELECT range_id, name FROM nvtx_range WHERE trace_id = $t AND name LIKE 'ProfilerStep#%'", t=t)
    assert {s["name"] for s in steps} == set(want)
    for s in steps:
        got = {}
        for kind in ("kernel", "memcpy", "memset"):
            got[kind] = [(r["ts"], r["e"]) for r in rows(
                w, "SELECT o.ts, o.ts + o.dur AS e FROM op_range r JOIN gpu_op o USING (trace_id, op_id) "
                   "WHERE r.trace_id = $t AND r.range_id = $r AND o.op_kind = $k", t=t, r=s["range_id"], k=kind)]
        kernel = union_length(got["kernel"])
        memcpy = minus(got["memcpy"], got["kernel"])
        memset = minus(got["memset"], got["kernel"] + got["memcpy"])
        assert (kernel // 1000, memcpy // 1000, memset // 1000) == want[s["name"]], s["name"]


def test_tbplugin_operation_table(ws):
    """operation/table: per op name the calls, device self and total time, host self and total
    time (us). The plugin merges an op with a direct child of the same name (PyTorch 1.8 recorded
    aten::cudnn_convolution inside aten::cudnn_convolution: 636 events, 318 calls), and its host
    self time leaves out the op's child ops and the CUDA calls it made. Applied here to traceql's
    rows: nvtx_range (cpu_op ranges, nesting), op_range (innermost and every enclosing op of each
    GPU operation), api_call. All 74 rows agree exactly. (The plugin leaves record_function
    blocks out of this table; the 2021 file writes them as 'Operator' events too, and traceql reads
    them as user_annotation ranges: Optimizer.step#SGD.step, enumerate(DataLoader)#...)"""
    w, ids = ws
    t = ids[TB]
    ranges = {r["range_id"]: r for r in rows(
        w, "SELECT range_id, name, tid, ts, ts + dur AS e, dur, parent_range_id FROM nvtx_range "
           "WHERE trace_id = $t AND domain = 'cpu_op'", t=t)}

    def head(rid):
        r = ranges[rid]
        while r["parent_range_id"] in ranges and ranges[r["parent_range_id"]]["name"] == r["name"]:
            r = ranges[r["parent_range_id"]]
        return r["range_id"]

    heads = {rid: head(rid) for rid in ranges}
    child_time = Counter()
    for rid, r in ranges.items():
        p = r["parent_range_id"]
        if p in ranges and heads[p] != heads[rid]:
            child_time[heads[p]] += r["dur"]
    # CUDA calls: the innermost cpu_op of their thread around them (a sweep per thread)
    by_tid = defaultdict(list)
    for r in ranges.values():
        by_tid[r["tid"]].append(r)
    for rs in by_tid.values():
        rs.sort(key=lambda r: (r["ts"], -r["e"]))
    # The innermost = the latest-starting (then shortest) range that holds the call. Calls in time
    # order; `opened` holds the thread's ranges started by the call's start, in that order, less
    # those that ended before it: searched from the top, the first that holds the call is it.
    # (Every range against every call took 17 s of the suite.)
    calls = rows(w, "SELECT tid, ts, ts + dur AS e, dur FROM api_call WHERE trace_id = $t", t=t)
    calls.sort(key=lambda c: (c["tid"], c["ts"]))
    for tid, group in groupby(calls, key=lambda c: c["tid"]):
        rs, i, opened = by_tid[tid], 0, []
        for c in group:
            while i < len(rs) and rs[i]["ts"] <= c["ts"]:
                opened.append(rs[i])
                i += 1
            while opened and opened[-1]["e"] < c["ts"]:
                opened.pop()
            inner = next((r for r in reversed(opened) if c["e"] <= r["e"]), None)
            if inner is not None:
                child_time[heads[inner["range_id"]]] += c["dur"]
    self_gpu, total_gpu = Counter(), Counter()
    for r in rows(w, "SELECT r.range_id, r.is_innermost, o.dur FROM op_range r JOIN gpu_op o USING (trace_id, op_id) "
                     "WHERE r.trace_id = $t", t=t):
        if r["range_id"] in ranges:
            if r["is_innermost"]:
                self_gpu[heads[r["range_id"]]] += r["dur"]
            if heads[r["range_id"]] == r["range_id"]:
                total_gpu[r["range_id"]] += r["dur"]
    table = defaultdict(lambda: [0, 0, 0, 0, 0])
    for rid in set(heads.values()):
        row = table[ranges[rid]["name"]]
        for i, v in enumerate((1, self_gpu[rid], total_gpu[rid], ranges[rid]["dur"] - child_time[rid], ranges[rid]["dur"])):
            row[i] += v
    oracle = tb("operation_table")
    assert {r["name"] for r in oracle} == set(table)
    differ = {}
    for r in oracle:
        ours = tuple([table[r["name"]][0]] + [v // 1000 for v in table[r["name"]][1:]])
        want = (r["calls"], r["device_self_duration"], r["device_total_duration"], r["host_self_duration"],
                r["host_total_duration"])
        if ours != want:
            differ[r["name"]] = (want, ours)
    assert not differ, differ


# ----------------------------------------------------------------------------- HTA's figures

def test_hta_nccl_kernels(ws):
    """HTA's NCCL parser test: 21 kernels whose name holds ncclKernel; the longest is an allreduce
    of 2049000 elements in and out, process group '0' ('default_pg'), ranks [0, 1], no split
    sizes. Kineto writes those arguments on the kernel and on the record_param_comms op that
    launched it: traceql keeps the op's (nvtx_range.args of the kernel's enclosing range)."""
    w, ids = ws
    t = ids["kineto-hta-nccl-data"]
    assert rows(w, "SELECT count(*) AS n FROM kernel WHERE trace_id = $t AND name LIKE '%ncclKernel%'", t=t) == [{"n": 21}]
    longest = rows(w, """
        SELECT n.name, n.args->>'Collective name' AS coll, n.args->>'In msg nelems' AS nin,
               n.args->>'Out msg nelems' AS nout, n.args->>'In split size' AS split,
               n.args->>'Process Group Name' AS pg, n.args->>'Process Group Description' AS pgd,
               n.args->>'Process Group Ranks' AS ranks
        FROM kernel k
        JOIN op_range r ON r.trace_id = k.trace_id AND r.op_id = k.kernel_id
        JOIN nvtx_range n ON n.trace_id = r.trace_id AND n.range_id = r.range_id
        WHERE k.trace_id = $t AND k.name LIKE '%ncclKernel%' AND (n.args->>'Collective name') IS NOT NULL
        ORDER BY k.dur DESC LIMIT 1""", t=t)
    assert longest == [{"name": "record_param_comms", "coll": "allreduce", "nin": "2049000", "nout": "2049000",
                        "split": "[]", "pg": "0", "pgd": "default_pg", "ranks": "[0, 1]"}]


def test_hta_triton_and_start_time(ws):
    """One cpu_op with a kernel backend: triton_poi_fused_add_cos_sin_0 (triton, its hash); the
    trace's start in UTC ns is 2413669096090100 + baseTimeNanoseconds (HTA allows 1 us; exact here)."""
    w, ids = ws
    t = ids["kineto-hta-triton"]
    assert rows(w, "SELECT name, domain, args->>'kernel_backend' AS backend, args->>'kernel_hash' AS hash "
                   "FROM nvtx_range WHERE trace_id = $t AND coalesce(args->>'kernel_backend', '') <> ''", t=t) == [
        {"name": "triton_poi_fused_add_cos_sin_0", "domain": "cpu_op", "backend": "triton",
         "hash": "cqaokwf2bph4egogzevc22vluasiyuui4i54zpemp6knbsggfbuu"}]
    assert rows(w, "SELECT start_ts + utc_offset_ns AS utc FROM trace WHERE trace_id = $t", t=t) == [
        {"utc": 2413669096090100 + 1727743122000000000}]


def test_hta_rank_from_distributed_info(ws):
    w, ids = ws
    assert rows(w, "SELECT rank FROM trace WHERE trace_id = $t", t=ids["kineto-hta-legacy-categories"]) == [{"rank": 1}]


def test_hta_gpu_user_annotations(ws):
    """get_gpu_user_annotation_breakdown(use_gpu_annotation=True): 3 names, whose sums and means
    are those of the file's gpu_user_annotation events; and the two kernels HTA's test names:
    correlation 135139, a device-to-device copy under DistributedDataParallel.forward, and
    164926, a multi_tensor_apply kernel under Optimizer.step#SGD.step, by the GPU-side
    annotation around them and by the CPU-side attribution of their launching call alike.
    HTA 0.5.0's get_gpu_kernels_with_user_annotations gives 4876 rows: its loader keeps 3480
    kernels, 1280 copies and 116 memsets of the file's 4350, 1600 and 145 (it drops the last
    95 ms); traceql reads them all (6095)."""
    w, ids = ws
    t = ids["kineto-hta-ddp-v100-rank0"]
    doc = load(TRACES / "kineto-hta-ddp-v100-rank0" / REAL["kineto-hta-ddp-v100-rank0"])
    want = defaultdict(list)
    for e in doc["traceEvents"]:
        if e.get("cat") == "gpu_user_annotation":
            want[e["name"]].append(ns(e["dur"]))
    got = rows(w, "SELECT name, sum(dur) AS total, count(*) AS n FROM nvtx_range WHERE trace_id = $t "
                  "AND domain = 'gpu_user_annotation' GROUP BY name", t=t)
    assert {r["name"]: (r["total"], r["n"]) for r in got} == {k: (sum(v), len(v)) for k, v in want.items()}
    assert len(got) == 3
    assert rows(w, "SELECT count(*) AS n FROM gpu_op WHERE trace_id = $t", t=t) == [{"n": 6095}]
    for corr, annotation, name in ((135139, "DistributedDataParallel.forward", "[CUDA memcpy Device-to-Device]"),
                                   (164926, "Optimizer.step#SGD.step", "multi_tensor_apply_kernel")):
        gpu_side = rows(w, """
            SELECT o.name, n.name AS annotation FROM gpu_op o
            JOIN nvtx_range n ON n.trace_id = o.trace_id AND n.domain = 'gpu_user_annotation' AND n.tid = o.stream_id
             AND o.ts >= n.ts AND o.ts < n.ts + n.dur
            WHERE o.trace_id = $t AND o.correlation_id = $c""", t=t, c=corr)
        cpu_side = rows(w, """
            SELECT n.name AS annotation FROM gpu_op o
            JOIN op_range r ON r.trace_id = o.trace_id AND r.op_id = o.op_id
            JOIN nvtx_range n ON n.trace_id = r.trace_id AND n.range_id = r.range_id AND n.domain = 'user_annotation'
            WHERE o.trace_id = $t AND o.correlation_id = $c ORDER BY n.depth DESC LIMIT 1""", t=t, c=corr)
        assert len(gpu_side) == 1 and name in gpu_side[0]["name"] and gpu_side[0]["annotation"] == annotation
        assert cpu_side == [{"annotation": annotation}]
