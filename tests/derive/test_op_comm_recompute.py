"""`report --by op` on training traces: communication kernels are never an op's compute, forward
ops recomputed by activation checkpointing are flagged and shown apart, and kernels outside
every op are split by reason (issue 31, items 3-5; the rules are in docs/pytorch.md).

Real traces (../shared/traces): the DDP ResNet of HTA's NCCL data (all-reduces launched from
AccumulateGrad), TorchRec rank 0 (all-to-alls, no collective names in its args) and the NCCL
set (nsys, one NCCL kernel per rank, no PyTorch ops). Every figure is computed again here from
the JSON or SQLite file: which kernels are communication (the name rule of
schemas/derive/launch.sql, written again in Python), which launching call each kernel has
(correlation id), which cpu_op holds that call (on the call's thread, wholly inside), what the
record_param_comms op around it records. A generated Kineto trace with checkpointed layers
(fixtures/gen_kineto.py, checkpoint=True) gives the recompute flags exactly: the generator
returns which ops and kernels it wrote as recompute.
"""

from __future__ import annotations

import re
import sqlite3
from collections import defaultdict
from functools import lru_cache
from pathlib import Path

import pytest

import traceql
from fixtures.gen_kineto import BASE_NS, GEMM, RELU, generate

from ..sources.test_kineto import REAL, TRACES, load, ns, real_kineto, trace_ids
from ..intervals import holding
from ..util import NO_TRACES, ingested

COMM = re.compile(r"(?i)(nccl|rccl|msccl|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|cross_device_reduce)")
ELEMENT = {"Double": 8, "Long": 8, "Float": 4, "Int": 4, "Half": 2, "BFloat16": 2, "Short": 2, "Byte": 1,
           "Char": 1, "Bool": 1}
KINETO = ["kineto-hta-nccl-data", "kineto-hta-torchrec-a100-rank0"]
NCCL_SET = "nccl-ring-2nodes-3gpus-nsys2024.5"


def test_communication_names_are_those_the_expression_matches_in_any_case():
    """launch.sql's communication kernel names (launch_comm_names, which launch.category reads):
    exactly the names COMM matches ignoring case, whatever their case and length, the substring
    test in front of the expression dropping none of them."""
    import duckdb

    from traceql.core.resources import CONTRACT_TABLES, CONTRACT_VIEWS, read_schema

    names = ["ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", "NCCLKERNEL_x",
             "void rcclGenericKernel<1, float>(rcclWork)", "MSCCL_step", "cross_device_reduce_1stage<half, 2>",
             "all_gather_into_tensor", "AllGather", "ALL_TO_ALL", "alltoall_v", "Reduce_Scatter", "reducescatter",
             "void at::native::reduce_kernel<512, 1>(at::native::ReduceOp<float>)", "small_allocator",
             "ampere_sgemm_128x64_nn", "x" * 400 + "All_Reduce", "CCL_only", "all reduce", "", "ncc l"]
    con = duckdb.connect()
    for name in CONTRACT_TABLES + CONTRACT_VIEWS:
        con.execute(read_schema(f"contract/{name}.sql"))
    con.executemany("INSERT INTO kernel (trace_id, kernel_id, ts, dur, name) VALUES (1, ?, ?, 1, ?)",
                    [(i, i, n) for i, n in enumerate(names)])
    con.execute("SET VARIABLE trace_id = 1")
    con.execute(read_schema("derive/launch.sql"))
    got = sorted(r[0] for r in con.execute("SELECT name FROM launch_comm_names").fetchall())
    assert got == sorted(n for n in names if COMM.search(n)) and len(got) == 12


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    paths = [TRACES / f / REAL[f] for f in KINETO]
    if not all(p.exists() for p in paths):
        pytest.skip(NO_TRACES)
    with traceql.open(real_kineto(tmp_path_factory)) as w:  # these and the other Kineto traces, apart by trace id
        yield w, trace_ids(w)


@lru_cache(maxsize=None)
def json_kernels(folder: str) -> list[dict]:
    """Each kernel of the file with what the JSON says about it: duration, communication or not,
    its launching call, the cpu_ops around that call and the record_param_comms among them."""
    doc = load(TRACES / folder / REAL[folder])
    evs = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    calls = defaultdict(list)
    for e in evs:
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {}):
            calls[e["args"]["correlation"]].append(e)
    ops = defaultdict(list)  # (pid, tid) -> cpu_ops
    for e in evs:
        if e.get("cat") == "cpu_op":
            ops[(e["pid"], e["tid"])].append((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), e))
    out = []
    asked = defaultdict(list)  # (pid, tid) -> (start, end, kernel) of each launching call on that thread
    for e in evs:
        if e.get("cat") != "kernel":
            continue
        found = calls.get(e["args"].get("correlation"), [])
        assert len(found) <= 1, "a correlation id with two calls: the test's matching would be ambiguous"
        call = found[0] if found else None
        if call is not None:  # the cpu_ops wholly around the call (start <= its start, its end <= end)
            asked[(call["pid"], call["tid"])].append((ns(call["ts"]), ns(call["ts"]) + ns(call["dur"]), len(out)))
        out.append({"dur": ns(e["dur"]), "name": e["name"], "comm": bool(COMM.search(e["name"])),
                    "call": call, "ops": []})
    for lane, queries in asked.items():  # ordered by start, the longer first (tests/intervals.py holding)
        for (_, _, k), around in zip(queries, holding(ops[lane], queries)):
            out[k]["ops"] = [o[2] for o in around]
    return out


def op_rows(w, trace_id):
    return w.report("op", trace_id=trace_id).to_pylist()


@pytest.mark.parametrize("folder", KINETO)
def test_communication_columns_hold_every_communication_kernel_and_nothing_else(real, folder):
    w, ids = real
    ks = json_kernels(folder)
    rows = op_rows(w, ids[folder])
    comm = sum(k["dur"] for k in ks if k["comm"])
    assert comm > 0
    assert sum(r["comm_ns"] or 0 for r in rows) == comm
    assert sum(r["total_ns"] for r in rows) == sum(k["dur"] for k in ks)
    for r in rows:
        if r["op"].startswith("[no op"):
            assert (r["fwd_ns"], r["bwd_ns"], r["recompute_ns"]) == (None, None, None)
            assert r["comm_ns"] == (r["total_ns"] if r["op"] == "[no op: communication]" else None)
        else:  # compute and communication add up: no op's fwd/bwd holds a communication kernel
            assert r["fwd_ns"] + r["bwd_ns"] + r["recompute_ns"] + r["comm_ns"] == r["total_ns"]
    # the compute columns hold exactly the compute kernels that ran inside ops
    in_ops = [k for k in ks if k["ops"]]
    assert sum(r["fwd_ns"] + r["bwd_ns"] + r["recompute_ns"] for r in rows if not r["op"].startswith("[no op")) \
        == sum(k["dur"] for k in in_ops if not k["comm"])


def test_ddp_allreduces_are_accumulategrads_communication(real):
    """HTA's DDP data: the reducer's all-reduces run from AccumulateGrad (issue 31: 46.9 ms of its
    48.1 ms were 21 NCCL kernels); its backward compute keeps the rest."""
    w, ids = real
    ks = json_kernels("kineto-hta-nccl-data")
    rows = {r["op"]: r for r in op_rows(w, ids["kineto-hta-nccl-data"])}
    acc = rows["autograd::engine::evaluate_function: torch::autograd::AccumulateGrad"]
    top = [k for k in ks if k["ops"] and k["ops"][0]["name"] == acc["op"]]
    assert acc["comm_ns"] == sum(k["dur"] for k in top if k["comm"]) > 0
    assert acc["bwd_ns"] == sum(k["dur"] for k in top if not k["comm"])
    assert acc["fwd_ns"] == acc["recompute_ns"] == 0
    # collective names and message sizes: the record_param_comms op around each launch
    by_row = defaultdict(lambda: [set(), {}])
    for k in ks:
        if not (k["comm"] and k["ops"]):
            continue
        rpc = [o for o in k["ops"] if o["name"] == "record_param_comms"][-1]
        a = rpc["args"]
        row = by_row[k["ops"][0]["name"]]
        row[0].add(a["Collective name"])
        row[1][id(rpc)] = max(a["In msg nelems"], a["Out msg nelems"]) * ELEMENT[a["dtype"]]
    assert {op: (", ".join(sorted(v[0])), sum(v[1].values())) for op, v in by_row.items()} == \
        {op: (r["collectives"], r["comm_bytes"]) for op, r in rows.items() if r["comm_ns"]}
    assert acc["collectives"] == "allreduce" and rows["c10d::broadcast_"]["collectives"] == "broadcast"


def test_torchrec_collectives_come_from_kernel_names(real):
    """TorchRec's record_param_comms carry no collective name: the kernel names say SendRecv."""
    w, ids = real
    rows = op_rows(w, ids["kineto-hta-torchrec-a100-rank0"])
    comm = [r for r in rows if r["comm_ns"]]
    assert comm and {r["collectives"] for r in comm} == {"SendRecv"}
    assert all(r["comm_bytes"] is None for r in comm)


@pytest.mark.parametrize("folder", KINETO)
def test_no_op_reasons_equal_the_json(real, folder):
    w, ids = real
    want = defaultdict(lambda: [0, 0])
    for k in json_kernels(folder):
        if k["ops"]:
            continue
        if k["comm"]:
            reason = "communication"
        elif k["call"] is not None and "GraphLaunch" in k["call"]["name"]:
            reason = "graph replay"
        elif k["call"] is None:
            reason = "launch not captured"
        else:
            reason = "outside ops"
        want[f"[no op: {reason}]"][0] += k["dur"]
    got = {r["op"]: r["total_ns"] for r in op_rows(w, ids[folder]) if r["op"].startswith("[no op")}
    assert got == {op: v[0] for op, v in want.items()}
    # HTA's DDP data launches everything inside ops; TorchRec's rank has three reasons
    assert set(got) == (set() if folder == "kineto-hta-nccl-data" else
                        {"[no op: communication]", "[no op: launch not captured]", "[no op: outside ops]"})


def test_a_filter_leaves_the_no_op_rows_out(real):
    w, ids = real
    rows = w.report("op", trace_id=ids["kineto-hta-torchrec-a100-rank0"], where="direction = 'backward'").to_pylist()
    assert rows and not [r for r in rows if r["op"].startswith("[no op")]


def test_nccl_set_communication_is_every_nccl_kernel_and_no_op_holds_it(tmp_path_factory):
    """The NCCL set (nsys, one rank per file): its only kernel is NCCL's all-reduce, launched by
    no PyTorch op; launch.category says communication for exactly the SQLite's NCCL kernels, and
    the op report has no rows (a trace without PyTorch ops has none)."""
    folder = TRACES / NCCL_SET
    if not folder.is_dir():
        pytest.skip(NO_TRACES)
    files = sorted(folder.glob("*.sqlite"))
    want = {}
    for f in files:
        con = sqlite3.connect(f"file:{f}?mode=ro", uri=True)
        con.text_factory = lambda b: b.decode(errors="replace")
        rows = con.execute("SELECT s.value, k.end - k.start FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                           "JOIN StringIds s ON s.id = k.demangledName").fetchall()
        con.close()
        want[f.name] = (sum(d for n, d in rows if COMM.search(n)), sum(1 for n, _ in rows if COMM.search(n)))
    with traceql.open(ingested(tmp_path_factory, *(f"{NCCL_SET}/{f.name}" for f in files))) as w:
        got = {}
        for r in w.sql("SELECT trace_id, path FROM trace").to_pylist():
            got[Path(r["path"]).name] = tuple(w.sql(
                "SELECT coalesce(sum(k.dur), 0), count(*) FROM kernel k JOIN launch l USING (trace_id) "
                "WHERE l.op_id = k.kernel_id AND l.category = 'communication' AND k.trace_id = $t",
                {"t": r["trace_id"]}).to_pylist()[0].values())
        assert got == want and all(n == 1 for _, n in want.values())
        assert w.report("op").num_rows == 0


# ------------------------------------------------------------------ activation checkpointing

@pytest.fixture(scope="module", params=[True, "reentrant"], ids=["non-reentrant", "reentrant"])
def ckpt(request, tmp_path_factory):
    d = tmp_path_factory.mktemp("ckpt")
    expected = generate(d / "ckpt.json", kernels=400, seed=3, layers=4, checkpoint=request.param)
    traceql.ingest([d / "ckpt.json"], db=d / "ws.duckdb")
    doc = load(d / "ckpt.json")
    with traceql.open(d / "ws.duckdb") as w:
        # the generator's clock -> the trace clock: it writes ts - BASE_NS in microseconds, which
        # ingest reads back onto its clock; one event (the first ProfilerStep) gives the shift
        step = next(e for e in doc["traceEvents"] if e.get("name") == "ProfilerStep#0" and e["cat"] == "user_annotation")
        t = w.sql("SELECT ts FROM nvtx_range WHERE name = 'ProfilerStep#0' AND domain = 'user_annotation'").to_pylist()
        yield w, expected, t[0]["ts"] - (ns(step["ts"]) + BASE_NS), doc


def _within(doc, tid: int, name: str):
    """(start, end) in ns of the cpu_ops NAME on thread TID."""
    return [(ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in doc["traceEvents"]
            if e.get("cat") == "cpu_op" and e["tid"] == tid and e["name"] == name]


def _inside(t: int, spans) -> bool:
    return any(a <= t <= b for a, b in spans)


def test_recompute_flags_are_exactly_the_recomputed_ops_and_kernels(ckpt):
    w, expected, offset, _ = ckpt
    assert len(expected["recompute_ops"]) > 0 and len(expected["recompute_kernels"]) > 0
    got_ops = {(r["name"], r["ts"]) for r in w.sql("SELECT name, ts FROM torch_op WHERE recompute").to_pylist()}
    assert got_ops == {(n, s + offset) for n, s in expected["recompute_ops"]}
    assert {r["direction"] for r in w.sql("SELECT direction FROM torch_op WHERE recompute").to_pylist()} == {"forward"}
    got_k = {(r["name"], r["ts"], r["dur"]) for r in w.sql(
        "SELECT k.name, k.ts, k.dur FROM kernel_op o JOIN kernel k USING (trace_id, kernel_id) WHERE o.recompute"
    ).to_pylist()}
    assert got_k == {(n, s + offset, dur) for s, n, dur in expected["recompute_kernels"]}
    assert w.sql("SELECT count(*) AS n FROM kernel_op WHERE recompute AND direction <> 'forward'").to_pylist()[0]["n"] == 0


def test_recompute_time_is_shown_apart(ckpt):
    w, expected, _, doc = ckpt
    rows = {r["op"]: r for r in w.report("op").to_pylist()}
    by_name = defaultdict(int)
    for _, name, dur in expected["recompute_kernels"]:
        by_name[name] += dur
    assert rows["aten::linear"]["recompute_ns"] == by_name[GEMM] > 0
    assert rows["aten::relu"]["recompute_ns"] == by_name[RELU] > 0
    # forward time: the main thread's gemms, but those inside a CheckpointFunction (reentrant
    # checkpointing runs the forward under no_grad there: that op's row holds them)
    ckpt_fn = _within(doc, 4242, "CheckpointFunction")
    calls = {e["args"]["correlation"]: e for e in doc["traceEvents"] if e.get("cat") == "cuda_runtime"}
    main_gemm = [k for k in doc["traceEvents"] if k.get("cat") == "kernel" and k["name"] == GEMM
                 and calls[k["args"]["correlation"]]["tid"] == 4242]
    assert rows["aten::linear"]["fwd_ns"] == sum(
        ns(k["dur"]) for k in main_gemm if not _inside(ns(calls[k["args"]["correlation"]]["ts"]), ckpt_fn))
    assert bool(ckpt_fn) == ("CheckpointFunction" in rows)
    for r in rows.values():
        assert r["fwd_ns"] + r["bwd_ns"] + r["recompute_ns"] + r["comm_ns"] == r["total_ns"]
    # calls are the forward calls of the main thread, recomputed ones apart
    assert rows["aten::linear"]["calls"] == len([s for s in _within(doc, 4242, "aten::linear")
                                                 if not _inside(s[0], ckpt_fn)])


def test_backward_nodes_pair_with_the_right_forward_ops(ckpt):
    """The recomputed ops' seqs repeat the main thread's (each thread counts its own): the
    backward nodes pair with the main thread's forward ops, but those that reentrant
    checkpointing runs inside CheckpointFunctionBackward, which pair with the recomputed ops."""
    w, _, offset, doc = ckpt
    nested = _within(doc, 4249, "CheckpointFunctionBackward")
    want = {(e["name"], ns(e["ts"]) + BASE_NS + offset): (4249, True)
            if e["name"] != "CheckpointFunctionBackward" and _inside(ns(e["ts"]), nested) else (4242, False)
            for e in doc["traceEvents"] if e.get("cat") == "cpu_op" and e["tid"] == 4249
            and e["name"] in ("ReluBackward0", "AddmmBackward0", "CheckpointFunctionBackward")}
    got = {(r["name"], r["ts"]): (r["tid"], r["recompute"]) for r in w.sql(
        "SELECT b.name, b.ts, f.tid, f.recompute FROM torch_op b LEFT JOIN torch_op f "
        "ON f.trace_id = b.trace_id AND f.range_id = b.fwd_range_id WHERE b.kind = 'backward_node'").to_pylist()}
    assert got == want
    assert ((4249, True) in want.values()) == bool(nested)  # reentrant checkpointing only


def test_a_contract_2_workspace_upgrades_to_the_recompute_flags(tmp_path):
    """2 -> 3: torch_op and kernel_op are computed again. With the source file gone (computed
    from the workspace's rows), the upgraded workspace equals a fresh ingest but for the
    upgrade's own note."""
    import duckdb

    from ..store.test_upgrade import rows_of

    src = tmp_path / "ckpt.json"
    generate(src, kernels=200, seed=5, layers=4, checkpoint="reentrant")
    fresh, db = tmp_path / "fresh.duckdb", tmp_path / "v2.duckdb"
    traceql.ingest([src], db=fresh)
    traceql.ingest([src], db=db)
    con = duckdb.connect(str(db))  # what contract 2 had: no recompute, collective or comm_bytes
    for table, cols in (("torch_op", ("recompute", "collective", "comm_bytes")), ("kernel_op", ("recompute",))):
        for col in cols:
            con.execute(f"ALTER TABLE {table} DROP COLUMN {col}")
    con.execute("UPDATE torch_op SET direction = 'backward' WHERE node_range_id IS NOT NULL")
    con.execute("UPDATE workspace_version SET contract_version = 2")
    con.close()
    with pytest.raises(traceql.StaleWorkspaceError, match="changed in 3: .*; PyTorch ops: torch_op.recompute"):
        traceql.open(db)
    src.rename(tmp_path / "gone.json")
    version, done = traceql.upgrade(db)
    assert version == 2 and [d.read_again for d in done] == [False]
    assert rows_of(db, skip=("trace", "ingest_stats")) == rows_of(fresh, skip=("trace", "ingest_stats"))
    with traceql.open(db) as w:
        assert w.sql("SELECT count(*) AS n FROM torch_op WHERE recompute").to_pylist()[0]["n"] > 0


def test_graph_replays_have_their_own_no_op_row(tmp_path):
    """A generated trace whose optimizer step is a CUDA graph replay (graphs=True: a
    cudaGraphLaunch outside every cpu_op): its node kernels are '[no op: graph replay]', each
    kernel of the JSON launched by cudaGraphLaunch, and nothing else is without an op."""
    generate(tmp_path / "g.json", kernels=300, seed=2, graphs=True)
    doc = load(tmp_path / "g.json")
    calls = {e["args"]["correlation"]: e for e in doc["traceEvents"] if e.get("cat") == "cuda_runtime"}
    replayed = [ns(k["dur"]) for k in doc["traceEvents"] if k.get("cat") == "kernel"
                and calls[k["args"]["correlation"]]["name"] == "cudaGraphLaunch"]
    traceql.ingest([tmp_path / "g.json"], db=tmp_path / "ws.duckdb")
    with traceql.open(tmp_path / "ws.duckdb") as w:
        got = {r["op"]: r["total_ns"] for r in w.report("op").to_pylist() if r["op"].startswith("[no op")}
    assert replayed and got == {"[no op: graph replay]": sum(replayed)}


def test_the_op_plot_draws_recompute_and_communication_apart(ckpt, real, tmp_path):
    pytest.importorskip("matplotlib")
    from traceql.outputs.plot import _op_chart

    for w, trace_id, key, label in ((ckpt[0], None, "recompute_ns", "recomputed (checkpointing)"),
                                    (real[0], real[1]["kineto-hta-nccl-data"], "comm_ns", "communication")):
        rows = [r for r in w.report("op", trace_id=trace_id).to_pylist() if r["calls"]]
        rows.sort(key=lambda r: (-(r["fwd_ns"] + r["bwd_ns"] + r["recompute_ns"] + r["comm_ns"]), r["op"]))
        chart = _op_chart(w, trace_id, None, None, "total", 0)  # every op, longest first
        series = {name: values for name, _, values in chart.series}
        assert series[label] == [r[key] for r in rows] and any(series[label])
        assert series["forward kernels"] == [r["fwd_ns"] for r in rows]
        assert label.split(" (")[0] in chart.subtitle
