"""The code behind each kernel (issue 27): call_stack and op_stack, kernel-op's `trace` column,
`report --by source` and `export --format folded`, checked against independent computations
over the source files: PyProf's own parse output (oracle/net.dict) and the NVTX markers read
with sqlite3 (nvprof, lm-a); CUDA_CALLCHAINS walked with sqlite3 and Extra-P's resolved call
paths (nsys --cudabacktrace, extrap); the python_function events of a PyTorch profiler trace
recorded with with_stack=True, read with json (bert-small)."""

import ast
import gzip
import json
import re
import sqlite3
import struct
from collections import defaultdict

import pytest

import traceql
from traceql.core.errors import UsageError

from ..util import cli
from ..util import trace_file

LM = "nvprof-pytorch-emit-nvtx-lm-v100-a"
EXTRAP = "extrap-a100x4-sampled-callchains-old-nsys/ex-gpu.s10.sqlite"
BERT = "kineto-tracelens-h100-bert-small/gaunernst_bert-small-uncased__1016001.json.gz"

# PyProf's filter of trace-marker frames (apex/pyprof/parse/kernel.py, filterTrace): substrings
PYPROF_LIBRARY = ("/torch/nn/modules/", "/torch/nn/functional.py", "/torch/tensor.py", "/torch/autograd/__init__.py",
                  "/torch/_jit_internal.py", "/pyprof/nvtx/nvmarker.py", "/apex/optimizers/", "/torch/_utils.py",
                  "/torch/optim/")


def pyprof_filter(frames):
    return [f for f in frames if not any(lib in f for lib in PYPROF_LIBRARY)]


def ro(path):
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


# ------------------------------------------------------------------------------ lm-a (PyProf)

@pytest.fixture(scope="module")
def lm(tmp_path_factory):
    folder = trace_file(LM)
    db = tmp_path_factory.mktemp("stacks_lm") / "ws.duckdb"
    traceql.ingest([folder / "net.sql"], db=db)
    oracle = [ast.literal_eval(line) for line in (folder / "oracle" / "net.dict").read_text().splitlines()]
    with traceql.open(db) as ws:
        rows = ws.report("kernel-op", columns="all").to_pylist()
    return db, folder, oracle, rows


def marker_ranges(path):
    """The NVTX ranges of an nvprof file: (tid, start, end, name), paired by marker id."""
    con = ro(path)
    names = dict(con.execute("SELECT _id_, value FROM StringTable"))
    starts, ends = {}, {}
    for flags, ts, mid, obj, name in con.execute(
            "SELECT flags, timestamp, id, objectId, name FROM CUPTI_ACTIVITY_KIND_MARKER"):
        if flags == 2:
            starts[mid] = (ts, struct.unpack("<II", bytes(obj[:8]))[1], names[name])
        elif flags == 4:
            ends[mid] = ts
    con.close()
    return [(tid, ts, ends[mid], name) for mid, (ts, tid, name) in starts.items()]


def backward_traces(path):
    """seq -> the user's frames of a backward kernel of that seq, by an independent rule: the
    forward op range 'name, seq = N' (on a thread other than the backward node's) and the
    innermost PyProf trace marker around it on its thread, filtered as PyProf filters."""
    ranges = marker_ranges(path)
    markers = defaultdict(list)
    for tid, s, e, name in ranges:
        if name.startswith("{'traceMarker': ["):
            markers[tid].append((s, e, ast.literal_eval(name)["traceMarker"]))
    out = {}
    for tid, s, e, name in ranges:
        m = re.fullmatch(r"(\w+), seq = (\d+)", name)
        if not m or "Backward" in m.group(1):
            continue
        around = [x for x in markers[tid] if x[0] <= s and e <= x[1]]
        if around:
            out.setdefault(int(m.group(2)), set()).add(tuple(pyprof_filter(max(around, key=lambda x: x[0])[2])))
    return out


def test_trace_column_equals_pyprof_for_forward_kernels(lm):
    """All 284 kernels in PyProf's order, same durations; the 207 forward kernels' `trace`
    equals PyProf's `trace` (the user's frames of the innermost trace marker, library frames
    filtered), 42 of them empty in both."""
    _, _, oracle, rows = lm
    assert len(rows) == len(oracle) == 284
    assert [r["sil"] for r in rows] == [o["kDuration"] for o in oracle]
    forward = [(r, o) for r, o in zip(rows, oracle) if o["dir"] == "fprop"]
    assert len(forward) == 207
    for r, o in forward:
        assert (r["trace"].split(" > ") if r["trace"] else []) == o["trace"], o["kShortName"]
    assert sum(1 for _, o in forward if not o["trace"]) == 42


def test_backward_kernels_take_their_forward_ops_code_line(lm):
    """PyProf's parse leaves the trace of the 77 backward kernels empty (their launching thread,
    autograd's, has no markers); traceql gives each the code line of its forward op: the
    innermost trace marker around the forward range of the kernel's seq, found here from the
    marker table with sqlite3."""
    db, folder, oracle, rows = lm
    expected = backward_traces(folder / "net.sql")
    backward = [(r, o) for r, o in zip(rows, oracle) if o["dir"] == "bprop"]
    assert len(backward) == 77 and all(not o["trace"] for _, o in backward)
    for r, o in backward:
        (seq,) = o["seqId"]
        assert len(expected[seq]) == 1
        assert tuple(r["trace"].split(" > ")) in expected[seq], (o["kShortName"], seq)
    with traceql.open(db) as ws:
        via = dict(ws.execute("SELECT via::VARCHAR, count(*) FROM op_stack WHERE op_kind = 'kernel' GROUP BY 1").fetchall())
    assert via == {"launch": 165, "forward op": 77}  # 42 forward kernels have no stack


def test_folded_export_parses_and_adds_up(lm, tmp_path):
    """`export --format folded`: 'frame;...;kernel value' lines, values adding up to the trace's
    kernel time (PyProf's durations and the source's kernel table agree), each (stack, kernel)
    once with the summed time of its kernels."""
    db, folder, oracle, rows = lm
    out = tmp_path / "lm.folded"
    proc = cli("--db", str(db), "export", "--format", "folded", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    lines = out.read_text().splitlines()
    assert proc.stdout.startswith(f"wrote {len(lines)} stacks to ")
    parsed = []
    for line in lines:
        m = re.fullmatch(r"(\S(?:.*\S)?) (\d+)", line)
        assert m, line
        frames = m.group(1).split(";")
        assert all(f and f == f.strip() for f in frames), line
        parsed.append((tuple(frames), int(m.group(2))))
    con = ro(folder / "net.sql")
    (kernel_ns,) = con.execute("SELECT sum(\"end\" - start) FROM CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL").fetchone()
    con.close()
    assert sum(v for _, v in parsed) == kernel_ns == sum(o["kDuration"] for o in oracle) == 8270633
    expected = defaultdict(int)
    for r in rows:
        frames = tuple(r["trace"].split(" > ")) if r["trace"] else ("[no stack]",)
        expected[frames + (r["kernel"],)] += r["sil"]
    assert dict(parsed) == dict(expected) and len(parsed) == len(expected) == 48
    assert [v for _, v in parsed] == sorted((v for _, v in parsed), reverse=True)
    again = cli("--db", str(db), "export", "--format", "folded", "-o", str(out))
    assert again.returncode != 0 and "--overwrite" in again.stderr


def test_source_report_groups_by_innermost_user_frame(lm):
    db, _, _, rows = lm
    by_frame = defaultdict(int)
    for r in rows:
        by_frame[r["trace"].split(" > ")[-1] if r["trace"] else "[no stack]"] += r["sil"]
    with traceql.open(db) as ws:
        source = ws.report("source").to_pylist()
        stacks = ws.report("source", group_by="stack").to_pylist()
        ops = ws.execute("SELECT count(*), sum(dur) FROM gpu_op").fetchone()
    assert {r["location"]: r["kernel_ns"] for r in source if r["kernels"]} == dict(by_frame)
    assert (sum(r["ops"] for r in source), sum(r["total_ns"] for r in source)) == ops
    assert source[0]["location"] == "profile2.py:111" and source[0]["kernel_ns"] == by_frame["profile2.py:111"]
    assert sum(r["total_ns"] for r in stacks) == ops[1]
    assert {r["location"] for r in stacks} >= {"profile2.py:314 > profile2.py:256 > profile2.py:111"}


# ------------------------------------------------------------------------------ extrap (CUDA backtraces)

def test_native_stacks_equal_a_walk_of_cuda_callchains(tmp_path):
    """Each kernel's stack is its launching call's backtrace: the class-67 duplicate of the call
    (same thread, correlation id) names a callchain; callchainId k is CUDA_CALLCHAINS id k + 1
    here (Extra-P's resolved call paths, stored in the file, agree). Frames outermost first:
    symbol or unresolved address, module."""
    path = trace_file(EXTRAP)
    db = tmp_path / "ws.duckdb"
    traceql.ingest([path], db=db)
    con = ro(path)
    strings = dict(con.execute("SELECT id, value FROM StringIds"))
    chains = defaultdict(list)
    for cid, depth, symbol, module, ip in con.execute(
            "SELECT id, stackDepth, symbol, module, originalIP FROM CUDA_CALLCHAINS ORDER BY id, stackDepth DESC"):
        chains[cid].append((strings.get(symbol) or f"0x{ip:x}", strings.get(module)))
    call_chain = dict(con.execute("SELECT correlationId, callchainId FROM CUPTI_ACTIVITY_KIND_RUNTIME "
                                  "WHERE eventClass = 67"))
    api = {c: strings[n].rsplit("_v", 1)[0] for c, n in con.execute(
        "SELECT correlationId, nameId FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass <> 67")}
    extrap = dict(con.execute("SELECT correlationId, callpath FROM EXTRAP_RESOLVED_CALLPATHS"))
    kernels = [c for (c,) in con.execute("SELECT correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start")]
    con.close()
    with traceql.open(db) as ws:
        got = ws.execute("""
            SELECT k.correlation_id, list((c.frame, c.module) ORDER BY c.level) AS frames,
                   string_agg(c.frame, ' > ' ORDER BY c.level) FILTER (WHERE c.is_user) AS trace,
                   any_value(s.via)::VARCHAR AS via, any_value(c.source)::VARCHAR AS source
            FROM kernel k JOIN op_stack s ON s.trace_id = k.trace_id AND s.op_id = k.kernel_id
            JOIN call_stack c ON c.trace_id = s.trace_id AND c.stack_id = s.stack_id
            GROUP BY k.correlation_id, k.ts ORDER BY k.ts""").fetchall()
        calls = ws.execute("SELECT count(*), count(stack_id) FROM api_call").fetchone()
    got = [dict(zip(("correlation_id", "frames", "trace", "via", "source"), g)) for g in got]
    assert [g["correlation_id"] for g in got] == kernels and len(kernels) == 6
    assert calls == (18, 18)  # every call has its backtrace; the 18 duplicates are not calls
    for g in got:
        expected = chains[call_chain[g["correlation_id"]] + 1]
        assert [tuple(f.values()) if isinstance(f, dict) else tuple(f) for f in g["frames"]] == expected
        symbols = [f for f, _ in expected if not f.startswith("0x")]
        assert "->".join(symbols + [api[g["correlation_id"]]]) == extrap[g["correlation_id"]]
        assert (g["via"], g["source"]) == ("launch", "cuda_backtrace")
    # the user's frames: the program's own functions (not the C runtime, not cudart's entry points)
    assert got[0]["trace"] == "main > init_array(double*, unsigned long) > init_array(double*, unsigned long)"


# ------------------------------------------------------------------------------ bert-small (Kineto with_stack)

def test_python_stacks_of_a_pytorch_profiler_trace(tmp_path):
    """Each CUDA call's Python stack: the python_function events open on its thread when it
    started, outermost first (JSON read with json, nesting by start and end)."""
    path = trace_file(BERT)
    db = tmp_path / "ws.duckdb"
    traceql.ingest([path], db=db)
    events = json.loads(gzip.open(path).read())["traceEvents"]
    frames = defaultdict(list)
    for e in events:
        if e.get("cat") == "python_function" and e.get("ph") == "X" and float(e["dur"]) > 0:
            frames[(e["pid"], e["tid"])].append((float(e["ts"]), float(e["ts"]) + float(e["dur"]), e["name"]))
    expected = {}
    for e in events:
        if e.get("cat") in ("cuda_runtime", "cuda_driver"):
            t = float(e["ts"])
            open_ = sorted((f for f in frames[(e["pid"], e["tid"])] if f[0] <= t < f[1]), key=lambda f: (f[0], -f[1]))
            expected[e["args"]["correlation"]] = [f[2] for f in open_]
    with traceql.open(db) as ws:
        got = dict(ws.execute("""
            SELECT a.correlation_id, list(c.frame ORDER BY c.level)
            FROM api_call a JOIN call_stack c ON c.trace_id = a.trace_id AND c.stack_id = a.stack_id
            GROUP BY 1""").fetchall())
        no_stack = ws.execute("SELECT count(*) FROM api_call WHERE stack_id IS NULL").fetchone()[0]
        user = dict(ws.execute("SELECT frame, bool_and(is_user) FROM call_stack GROUP BY 1").fetchall())
    assert got == {c: f for c, f in expected.items() if f}
    assert no_stack == sum(1 for f in expected.values() if not f)
    assert len(got) > 100
    # PyTorch's own files, built-ins and the standard library are not the user's code; models are
    assert user["transformers/models/bert/modeling_bert.py(364): forward"] is True
    assert not any(v for f, v in user.items() if f.startswith(("torch/", "<built-in")))


def test_source_options_and_errors(lm, tmp_path):
    """--group values belong to their report; a trace that is not there is an error."""
    db = lm[0]
    proc = cli("--db", str(db), "report", "--by", "source", "--group", "path")
    assert proc.returncode == 2 and "--group path: --by source groups by frame or stack" in proc.stderr
    proc = cli("--db", str(db), "report", "--by", "kernel", "--group", "stack")
    assert proc.returncode == 2 and "--group applies to --by range or source only" in proc.stderr
    proc = cli("--db", str(db), "export", "--format", "folded", "--per-trace", "-o", str(tmp_path / "x"))
    assert proc.returncode == 2 and "do not apply to --format folded" in proc.stderr
    with traceql.open(db) as ws:
        with pytest.raises(UsageError, match="99"):
            ws.export_folded(tmp_path / "x.folded", trace_id=99)
    assert not (tmp_path / "x.folded").exists()


def test_every_library_frame_rule_compiles_in_python_and_duckdb():
    """The rules of schemas/stacks/library_frames.csv are the package's own and are not compiled at
    ingest: each one, and each source's alternation, compiles in Python and in DuckDB (RE2), and
    the standard-library rule knows os.py but not a user's train.py."""
    import duckdb

    from traceql.derive import callstacks

    con = duckdb.connect()
    patterns = callstacks.library_patterns()
    assert set(patterns) == {(s, f) for s in callstacks.SOURCES for f in callstacks.FIELDS}
    for key, pattern in patterns.items():
        re.compile(pattern)
        assert con.execute("SELECT regexp_matches('', ?)", [pattern]).fetchone()[0] is False, key
    stdlib = callstacks._stdlib_pattern()
    assert re.search(stdlib, "os.py") and not re.search(stdlib, "train.py")
