"""`--range NAME` / `--range-match WORD` on the reports of operations (traceql/rangefilter.py): the
K-FAC walkthrough's drill-down into one range, checked against an independent computation with
Python's sqlite3 over the source file, under the documented attribution rule (README, "The
attribution rule"): a range holds the GPU work whose launching call lies wholly inside it, made
by any thread of its process."""

import sqlite3
import statistics
from collections import defaultdict

import pytest

import traceql
from traceql.core.errors import UsageError

from ..util import cli
from ..util import ingested, trace_file

CS336 = "cs336-jsun-train-fwdbwd-rtx3070ti-nsys2025.1/result.sqlite"
DLPROF = "dlprof-pytorch-emit-nvtx-nsys2022.1/nsys_profile.sqlite"


class Source:
    """The nsys export read with sqlite3 alone: ranges, calls, kernels, copies and memsets."""

    def __init__(self, path):
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        strings = dict(con.execute("SELECT id, value FROM StringIds"))
        self.ranges = [(start, end, gtid >> 24 & 0xFFFFFF, text if text is not None else strings.get(text_id))
                       for start, end, gtid, text, text_id in con.execute(
                           "SELECT start, end, globalTid, text, textId FROM NVTX_EVENTS WHERE eventType = 59")]
        # calls without the CUDA-backtrace duplicates (eventClass 67), by (process, correlation id)
        self.calls = {}
        self.api = []
        for start, end, gtid, corr, name in con.execute(
                "SELECT start, end, globalTid, correlationId, nameId FROM CUPTI_ACTIVITY_KIND_RUNTIME "
                "WHERE eventClass <> 67"):
            pid = gtid >> 24 & 0xFFFFFF
            self.calls.setdefault((pid, corr), []).append((start, end))
            self.api.append((start, end, pid, strings[name].rsplit("_v", 1)[0] if "_v" in strings[name]
                             and strings[name].rsplit("_v", 1)[1].isdigit() else strings[name]))
        self.ops = []  # (kind, name, start, end, pid, corr)
        for start, end, gpid, corr, name in con.execute(
                "SELECT start, end, globalPid, correlationId, demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL"):
            self.ops.append(("kernel", strings[name], start, end, gpid >> 24 & 0xFFFFFF, corr))
        for table, kind in (("CUPTI_ACTIVITY_KIND_MEMCPY", "memcpy"), ("CUPTI_ACTIVITY_KIND_MEMSET", "memset")):
            for start, end, gpid, corr in con.execute(f"SELECT start, end, globalPid, correlationId FROM {table}"):
                self.ops.append((kind, None, start, end, gpid >> 24 & 0xFFFFFF, corr))
        con.close()

    def launching_call(self, op):
        """The call with the operation's correlation id in its process (the latest started before it
        should several share one)."""
        calls = [c for c in self.calls.get((op[4], op[5]), []) if c[0] <= op[2]] or self.calls.get((op[4], op[5]))
        return max(calls) if calls else None

    def held(self, name, word=None):
        """The operations some range called NAME (or, given WORD, whose name contains it, ignoring
        case) holds, each once."""
        ranges = [r for r in self.ranges if (r[3] == name if word is None else word in (r[3] or "").lower())]
        out = []
        for op in self.ops:
            call = self.launching_call(op)
            if call and any(r[2] == op[4] and r[0] <= call[0] and call[1] <= r[1] for r in ranges):
                out.append(op)
        return out


@pytest.fixture(scope="module")
def cs336(tmp_path_factory):
    return ingested(tmp_path_factory, CS336), Source(trace_file(CS336))


def test_kernel_report_inside_backward_equals_sqlite(cs336):
    db, src = cs336
    held = src.held("Backward")
    gpu_ns = sum(op[3] - op[2] for op in held)
    by_name = defaultdict(list)
    for op in held:
        if op[0] == "kernel":
            by_name[op[1]].append(op[3] - op[2])
    kernel_ns = sum(sum(v) for v in by_name.values())
    with traceql.open(db) as ws:
        rows = ws.report("kernel", range="Backward").to_pylist()
    assert len(rows) == len(by_name) == 44
    for r in rows:
        durs = by_name[r["name"]]
        assert (r["calls"], r["total_ns"], r["min_ns"], r["max_ns"]) == (len(durs), sum(durs), min(durs), max(durs))
        assert r["med_ns"] == statistics.median(durs)
        assert r["pct"] == pytest.approx(100 * sum(durs) / kernel_ns, rel=1e-12)
        assert r["range_pct"] == pytest.approx(100 * sum(durs) / gpu_ns, rel=1e-12)
    # README's figures: 760.8 ms of kernels, 6,642 of them, 97.4 ms own-thread
    assert (kernel_ns, sum(len(v) for v in by_name.values())) == (760790753, 6642)
    top = rows[0]
    assert (top["name"], top["calls"], top["total_ns"]) == ("ampere_sgemm_128x64_nn", 180, 117829130)
    assert round(top["range_pct"], 2) == 15.39 and round(top["pct"], 2) == 15.49


def test_gpu_memcpy_memset_reports_inside_backward(cs336):
    db, src = cs336
    held = src.held("Backward")
    gpu_ns = sum(op[3] - op[2] for op in held)
    with traceql.open(db) as ws:
        gpu = ws.report("gpu", range="Backward").to_pylist()
        memcpy = ws.report("memcpy", range="Backward").to_pylist()
        memset = ws.report("memset", range="Backward").to_pylist()
        launch = ws.report("launch", range="Backward").to_pylist()
    assert sum(r["total_ns"] for r in gpu) == gpu_ns
    assert sum(r["range_pct"] for r in gpu) == pytest.approx(100.0)
    for kind, rows in (("memcpy", memcpy), ("memset", memset)):
        mine = [op for op in held if op[0] == kind]
        assert sum(r["calls"] for r in rows) == len(mine)
        assert sum(r["total_ns"] for r in rows) == sum(op[3] - op[2] for op in mine)
        assert sum(r["range_pct"] for r in rows) == pytest.approx(100 * sum(op[3] - op[2] for op in mine) / gpu_ns)
    assert sum(r["calls"] for r in launch) == sum(1 for op in held if op[0] == "kernel")


def test_api_report_inside_backward_equals_sqlite(cs336):
    db, src = cs336
    ranges = [r for r in src.ranges if r[3] == "Backward"]
    held = [c for c in src.api if any(r[2] == c[2] and r[0] <= c[0] and c[1] <= r[1] for r in ranges)]
    by_name = defaultdict(list)
    for c in held:
        by_name[c[3]].append(c[1] - c[0])
    # the ranges' CPU time: the 5 Backward ranges of one thread do not overlap
    cpu_ns = sum(r[1] - r[0] for r in ranges)
    with traceql.open(db) as ws:
        rows = ws.report("api", range="Backward").to_pylist()
    assert {r["name"]: (r["calls"], r["total_ns"]) for r in rows} == {
        n: (len(v), sum(v)) for n, v in by_name.items()}
    for r in rows:
        assert r["range_pct"] == pytest.approx(100 * r["total_ns"] / cpu_ns, rel=1e-12)


def test_each_operation_counts_once_and_words_match(cs336):
    """Ranges named 'Forward' sit inside the 'Warm-up Step N' ranges, next to 'Backward': naming
    all three counts each operation once (their union), and the shares add up to 100."""
    db, src = cs336
    names = ("Warm-up Step 1", "Forward", "Backward")
    union = {id(op): op for n in names for op in src.held(n)}
    kernels = [op for op in union.values() if op[0] == "kernel"]
    step1 = [op for op in src.held("Warm-up Step 1") if op[0] == "kernel"]
    with traceql.open(db) as ws:
        rows = ws.report("kernel", range=list(names)).to_pylist()
        gpu = ws.report("gpu", range=list(names)).to_pylist()
        named = ws.report("kernel", range="Warm-up Step 1").to_pylist()
        words = ws.report("kernel", range_match=["UP STEP 1"]).to_pylist()  # a word, any case
    assert sum(r["calls"] for r in rows) == len(kernels) == 17024
    assert sum(r["total_ns"] for r in rows) == sum(op[3] - op[2] for op in kernels)
    assert sum(r["range_pct"] for r in gpu) == pytest.approx(100.0)
    assert sum(r["calls"] for r in named) == len(step1)
    assert sum(r["total_ns"] for r in named) == sum(op[3] - op[2] for op in step1)
    assert named == words


def test_filter_bypasses_stored_rows_and_keeps_where(cs336):
    db, _ = cs336
    with traceql.open(db) as ws:
        everything = ws.report("kernel")  # stored at ingest
        inside = ws.report("kernel", range="Backward")
        both = ws.report("kernel", range="Backward", where="name LIKE 'ampere_sgemm%'")
        per_trace = ws.report("kernel", range="Backward", per_trace=True)
    assert sum(everything.column("calls").to_pylist()) == 17032
    assert sum(inside.column("calls").to_pylist()) == 6642
    assert set(both.column("name").to_pylist()) == {n for n in inside.column("name").to_pylist()
                                                    if n.startswith("ampere_sgemm")}
    assert both.column("range_pct").to_pylist() == [
        r["range_pct"] for r in inside.to_pylist() if r["name"].startswith("ampere_sgemm")]
    assert per_trace.column("trace_id").to_pylist() == [1] * per_trace.num_rows
    assert per_trace.column("range_pct").to_pylist() == inside.column("range_pct").to_pylist()
    assert "range_pct" not in everything.column_names


def test_unknown_range_and_wrong_report(cs336):
    db, _ = cs336
    with traceql.open(db) as ws:
        with pytest.raises(UsageError, match=r"no NVTX range of the workspace matches 'Backwards'; did you mean Backward"):
            ws.report("kernel", range="Backwards")
        with pytest.raises(UsageError, match="--range applies to the reports of operations"):
            ws.report("range", range="Backward")


def test_cli_range_option(cs336, tmp_path):
    db, _ = cs336
    proc = cli("--db", str(db), "report", "--by", "kernel", "--range", "Backward", "--limit", "2", "--format", "csv")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "name,calls,total_ns,pct,range_pct,avg_ns,med_ns,min_ns,max_ns,stddev_ns"
    assert lines[1].startswith("ampere_sgemm_128x64_nn,180,117829130,")
    proc = cli("--db", str(db), "report", "--by", "kernel", "--range", "Backward", "--limit", "1",
               "--sort", "Range(%)", "-c", "name,range_pct", env={"COLUMNS": "80"})
    assert proc.returncode == 0, proc.stderr
    assert "Range(%)" in proc.stdout and "ampere_sgemm_128x64_nn" in proc.stdout
    proc = cli("--db", str(db), "report", "--by", "kernel", "--range", "Nope")
    assert proc.returncode != 0 and "no NVTX range" in proc.stderr


def test_plot_kernels_inside_a_range(cs336, tmp_path):
    pytest.importorskip("matplotlib")
    db, _ = cs336
    out = tmp_path / "bwd.png"
    with traceql.open(db) as ws:
        fig = ws.plot("kernel", out, range="Backward", limit=5)
        top = ws.report("kernel", range="Backward", limit=5).to_pylist()
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "inside NVTX ranges 'Backward'" in fig.axes[0].get_title(loc="left").replace("\n", " ")
    bars = fig.axes[0].containers[0]
    assert len(bars) == 5
    notes = " ".join(t.get_text() for t in fig.axes[0].texts)
    assert f"({top[0]['range_pct']:.1f}%)" in notes


@pytest.fixture(scope="module")
def dlprof(tmp_path_factory):
    return ingested(tmp_path_factory, DLPROF), Source(trace_file(DLPROF))


def test_op_reports_inside_matching_ranges_equal_sqlite(dlprof):
    """The PyTorch reports (op, kernel-op, layer) under --range-match, on a PyProf/emit_nvtx
    trace: the kernels of the ranges whose name contains 'conv2d' (PyProf markers
    'torch.nn.functional.conv2d', 'aten::conv2d, seq = N', trace markers through Conv2d.forward),
    each once, against sqlite3."""
    db, src = dlprof
    held = src.held(None, word="conv2d")
    gpu_ns = sum(op[3] - op[2] for op in held)
    kernels = sorted(op[3] - op[2] for op in held if op[0] == "kernel")
    with traceql.open(db) as ws:
        kernel = ws.report("kernel", range_match="conv2d").to_pylist()
        op = ws.report("op", range_match="conv2d").to_pylist()
        kop = ws.report("kernel-op", range_match="Conv2D").to_pylist()
        layer = ws.report("layer", range_match="conv2d").to_pylist()
    assert (len(kernels), sum(kernels)) == (48, 547898)
    assert sum(r["calls"] for r in kernel) == len(kernels) and sum(r["total_ns"] for r in kernel) == sum(kernels)
    assert sorted(r["sil"] for r in kop) == kernels
    assert sum(r["range_pct"] for r in kop) == pytest.approx(100 * sum(kernels) / gpu_ns)
    assert {r["op"]: (r["calls"], r["total_ns"]) for r in op} == {"aten::conv2d": (2, 540602),
                                                                  "aten::max_pool2d": (2, 7296)}
    assert sum(r["total_ns"] for r in op) == sum(kernels)
    for rows in (op, layer):
        for r in rows:
            assert r["range_pct"] == pytest.approx(100 * r["total_ns"] / gpu_ns, rel=1e-12)
    assert [(r["layer"], r["kernels"], r["total_ns"]) for r in layer] == [("[no layer]", 48, 547898)]
