"""PyTorch profiler (Kineto) JSON traces: the reader, and the contract rows checked against
independent computations over the same files.

The independent side reads each file with Python's json module (numbers as decimal.Decimal, so
the microseconds are exact) and applies the documented conversion by hand: ns = the decimal
value x 1000, rounded to a whole ns halves away from zero. It never uses traceql's SQL.

The 11 real traces of ../shared/traces/kineto-* (third-party files, not in the repository) are
ingested once per session; the tests on them skip with a reason when the folder is absent.
Generated traces (fixtures/gen_kineto.py) test attribution and the parser's edge cases.
"""

from __future__ import annotations

import bisect
import gzip
import json
from collections import Counter, defaultdict
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import pytest

import traceql
from fixtures.gen_kineto import generate
from traceql.sources import kineto
from traceql.sources.detect import detect
from traceql.core.errors import InputError, UnsupportedVersionError

from ..util import NO_TRACES, TRACES, ingested

REAL = {  # folder -> file
    "kineto-hta-alexnet-a100": "benchmark_result_2869224_1695835535_trace.json.gz",
    "kineto-hta-amd-mi250": "mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    "kineto-hta-ddp-v100-rank0": "rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    "kineto-hta-legacy-categories": "inference_rank_1.json.gz",
    "kineto-hta-nccl-data": "nccl_data.json.gz",
    "kineto-hta-torchrec-a100-rank0": "rank0.json.gz",
    "kineto-hta-triton": "triton_example.json.gz",
    "kineto-tbplugin-resnet50-2021": "worker0.pt.trace.json.gz",
    "kineto-tracelens-b200-vllm": "eager_trace.json.gz",
    "kineto-tracelens-h100-bert-small": "gaunernst_bert-small-uncased__1016001.json.gz",
    "kineto-tracelens-h100-qwen0.5b": "Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
}
# category names per kind, as the files write them (2020-2021 builds capitalise them)
KINDS = {"kernel": {"kernel", "Kernel"}, "memcpy": {"gpu_memcpy", "Memcpy"}, "memset": {"gpu_memset", "Memset"},
         "api": {"cuda_runtime", "cuda_driver", "Runtime"},
         "range": {"cpu_op", "Operator", "user_annotation", "gpu_user_annotation"}}


def ns(value) -> int:
    """The documented conversion, by hand: microseconds (exact decimal) to whole ns, halves away from zero."""
    return int((Decimal(value) * 1000).quantize(Decimal(1), rounding=ROUND_HALF_UP))


def load(path: Path) -> dict:
    opener = gzip.open if path.read_bytes()[:2] == b"\x1f\x8b" else open
    with opener(path, "rb") as fh:
        doc = json.load(fh, parse_float=Decimal)
    return doc if isinstance(doc, dict) else {"traceEvents": doc}


def events(doc: dict, kind: str) -> list[dict]:
    return [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") in KINDS[kind]]


def real_kineto(tmp_path_factory) -> Path:
    """A workspace of every real Kineto trace of REAL, ingested once for the suite (tests/util.py
    ingested; tests/sources/test_kineto_oracles.py and tests/derive/test_op_comm_recompute.py read
    it too, each by trace id), its derived families built then (all three read them)."""
    return ingested(tmp_path_factory, *(f"{d}/{f}" for d, f in REAL.items()), derived=True)


def trace_ids(ws) -> dict[str, int]:
    """{folder of the source file: trace_id} of a workspace."""
    return {Path(r["path"]).parent.name: r["trace_id"] for r in ws.sql("SELECT path, trace_id FROM trace").to_pylist()}


@pytest.fixture(scope="module")
def real_ws(tmp_path_factory):
    if not TRACES.is_dir():
        pytest.skip(NO_TRACES)
    paths = [TRACES / d / f for d, f in REAL.items()]
    missing = [p for p in paths if not p.exists()]
    if missing:
        pytest.skip(f"{missing[0]} not present ({NO_TRACES})")
    with traceql.open(real_kineto(tmp_path_factory)) as ws:
        yield ws, trace_ids(ws)


@pytest.fixture(scope="module", params=sorted(REAL))
def real_doc(request):
    """(folder, its file's JSON), parsed once: pytest runs every test of one folder's file before
    the next file's (a module-scoped parameter), instead of parsing each file once per test."""
    path = TRACES / request.param / REAL[request.param]
    if not path.exists():
        pytest.skip(f"{path} not present ({NO_TRACES})")
    return request.param, load(path)


def one(ws, sql, params=None):
    return ws.sql(sql, params or {}).to_pylist()


# ----------------------------------------------------------------------------- the must-show

def test_kernel_count_and_time_equal_the_json(real_ws, real_doc):
    """Kernel count and summed kernel time (exact ns) equal an independent count of the file's
    ph 'X' events of category kernel (Kernel in 2020-2021 files)."""
    ws, ids = real_ws
    folder, doc = real_doc
    kernels = events(doc, "kernel")
    got = one(ws, "SELECT count(*) AS n, sum(dur) AS total FROM kernel WHERE trace_id = $t", {"t": ids[folder]})[0]
    assert got["n"] == len(kernels) > 0
    assert got["total"] == sum(ns(e["dur"]) for e in kernels)
    # every kernel, start and duration, exactly
    rows = ws.sql("SELECT ts, dur FROM kernel WHERE trace_id = $t", {"t": ids[folder]})
    assert Counter(zip(rows["ts"].to_pylist(), rows["dur"].to_pylist())) == \
        Counter((ns(e["ts"]), ns(e["dur"])) for e in kernels)


def test_other_views_equal_the_json(real_ws, real_doc):
    """Copies, memsets, API calls and ranges: counts and summed durations; devices; rank."""
    ws, ids = real_ws
    folder, doc = real_doc
    t = {"t": ids[folder]}
    for view, kind in (("memcpy", "memcpy"), ("memset", "memset"), ("api_call", "api"), ("nvtx_range", "range")):
        evs = events(doc, kind)
        got = one(ws, f"SELECT count(*) AS n, coalesce(sum(dur), 0) AS total FROM {view} WHERE trace_id = $t", t)[0]
        assert (got["n"], got["total"]) == (len(evs), sum(ns(e["dur"]) for e in evs)), view
    copies = Counter(e["name"] for e in events(doc, "memcpy"))
    names = {"HtoD": "Host-to-Device", "DtoH": "Device-to-Host", "DtoD": "Device-to-Device"}
    got = Counter({r["k"]: r["n"] for r in one(
        ws, "SELECT copy_kind || ' ' || src_kind || ' ' || dst_kind AS k, count(*) AS n FROM memcpy "
            "WHERE trace_id = $t GROUP BY 1", t)})
    assert got == Counter({f"{names[n.split()[1]]} {n.split('(')[1].split(' -> ')[0]} {n.split(' -> ')[1][:-1]}": c
                           for n, c in copies.items()})
    props = doc.get("deviceProperties", [])
    described = one(ws, "SELECT device_id, name, sm_count, total_memory FROM device WHERE trace_id = $t "
                        "AND name IS NOT NULL ORDER BY device_id", t)
    assert described == [{"device_id": p["id"], "name": p["name"], "sm_count": p.get("numSms"),
                          "total_memory": p.get("totalGlobalMem")} for p in sorted(props, key=lambda p: p["id"])]
    dist = doc.get("distributedInfo", {})
    trace = one(ws, "SELECT source_format, rank, rank_source, world_size, world_size_source, host, host_source, "
                    "schema_version, utc_offset_ns, clock FROM trace WHERE trace_id = $t", t)[0]
    assert (trace["source_format"], trace["rank"], trace["world_size"]) == \
        ("kineto", dist.get("rank"), dist.get("world_size"))
    recorded = lambda value: None if value is None else "recorded"  # noqa: E731
    assert (trace["rank_source"], trace["world_size_source"]) == (recorded(dist.get("rank")),
                                                                  recorded(dist.get("world_size")))
    assert (trace["host"], trace["host_source"]) == (doc.get("host_name"), recorded(doc.get("host_name")))
    assert trace["schema_version"] == (None if "schemaVersion" not in doc else str(doc["schemaVersion"]))
    if "baseTimeNanoseconds" in doc:
        assert (trace["clock"], trace["utc_offset_ns"]) == ("session", doc["baseTimeNanoseconds"])
    else:
        assert (trace["clock"], trace["utc_offset_ns"]) == ("epoch", 0)


def test_launch_pairs_each_gpu_op_with_the_call_of_its_correlation(real_ws, real_doc):
    """Every GPU event whose correlation id a CUDA call of the file carries is launched by that
    call (its name and start); the others have no launch, as counted here."""
    ws, ids = real_ws
    folder, doc = real_doc
    calls = {e["args"]["correlation"]: e for e in events(doc, "api") if "correlation" in e.get("args", {})}
    gpu = events(doc, "kernel") + events(doc, "memcpy") + events(doc, "memset")
    want = Counter((ns(e["ts"]), calls[c]["name"] if c in calls else None, ns(calls[c]["ts"]) if c in calls else None)
                   for e in gpu for c in [e["args"].get("correlation")])
    rows = one(ws, "SELECT o.ts, l.api_name, l.api_ts FROM gpu_op o JOIN launch l USING (trace_id, op_id) "
                   "WHERE trace_id = $t", {"t": ids[folder]})
    assert Counter((r["ts"], r["api_name"], r["api_ts"]) for r in rows) == want


def test_not_read_events_are_counted(real_ws):
    ws, ids = real_ws
    folder = "kineto-tracelens-b200-vllm"
    doc = load(TRACES / folder / REAL[folder])
    n = sum(1 for e in doc["traceEvents"] if e.get("cat") == "python_function")
    got = one(ws, "SELECT value FROM ingest_stats WHERE trace_id = $t AND key = 'kineto.events_not_read.python_function.X'",
              {"t": ids[folder]})
    assert got == [{"value": n}] and n == 15230


# ----------------------------------------------------------------------------- generated traces

@pytest.fixture(scope="module")
def gen_ws(tmp_path_factory):
    d = tmp_path_factory.mktemp("gen_kineto")
    path = d / "train.json.gz"
    expected = generate(path, kernels=3000, seed=3, layers=3)
    db = d / "ws.duckdb"
    traceql.ingest([path], db=db)
    with traceql.open(db) as ws:
        yield ws, path, expected


def _nest(evs):
    """Per thread, each X event's enclosing events of the given list: brute force by time."""
    by_tid = defaultdict(list)
    for e in evs:
        by_tid[(e["pid"], e["tid"])].append(e)
    return by_tid


def test_generated_counts(gen_ws):
    ws, path, expected = gen_ws
    doc = load(path)
    got = one(ws, "SELECT (SELECT count(*) FROM kernel) AS k, (SELECT sum(dur) FROM kernel) AS kns, "
                  "(SELECT count(*) FROM memcpy) AS c, (SELECT count(*) FROM memset) AS s, "
                  "(SELECT count(*) FROM api_call) AS a, (SELECT count(*) FROM torch_op) AS ops")[0]
    assert (got["k"], got["kns"]) == (expected["kernels"], expected["kernel_ns"]) == \
        (len(events(doc, "kernel")), sum(ns(e["dur"]) for e in events(doc, "kernel")))
    assert (got["c"], got["s"], got["a"]) == (expected["gpu_memcpy"], expected["gpu_memset"], expected["cuda_runtime"])
    assert got["ops"] == expected["cpu_op"]  # every cpu_op is a torch op


def test_generated_attribution_by_brute_force(gen_ws):
    """Each kernel's innermost enclosing range (op_range.is_innermost) is, computed here by brute
    force, the latest-started cpu_op or user_annotation of the launching thread that encloses
    the launching call; and every range holds exactly the kernels launched inside it by any
    thread of its process."""
    ws, path, _ = gen_ws
    doc = load(path)
    calls = {e["args"]["correlation"]: e for e in events(doc, "api")}
    ranges = [e for e in events(doc, "range") if e["cat"] != "gpu_user_annotation"]
    want_inner, want_held = Counter(), Counter()
    # per range, the calls starting inside it (bisect over the calls sorted by start), so that the
    # check stays linear in the pairs rather than kernels x ranges
    by_start = sorted((ns(c["ts"]), ns(c["ts"]) + ns(c["dur"]), corr) for corr, c in calls.items())
    starts = [cs for cs, _, _ in by_start]
    held_by = {}
    for r in ranges:
        rs, re_ = ns(r["ts"]), ns(r["ts"]) + ns(r["dur"])
        for cs, ce, corr in by_start[bisect.bisect_left(starts, rs):bisect.bisect_right(starts, re_)]:
            if ce <= re_:
                held_by.setdefault(corr, []).append(r)
    for k in events(doc, "kernel"):
        c = calls[k["args"]["correlation"]]
        holding = held_by.get(k["args"]["correlation"], [])
        own = [r for r in holding if r["tid"] == c["tid"]]
        inner = max(own or holding, key=lambda r: (ns(r["ts"]), -ns(r["dur"])))
        want_inner[(ns(k["ts"]), inner["name"])] += 1
        for r in holding:
            want_held[(r["name"], ns(r["ts"]), "thread" if r["tid"] == c["tid"] else "process")] += ns(k["dur"])
    rows = one(ws, "SELECT k.ts, n.name FROM op_range o JOIN kernel k ON k.kernel_id = o.op_id "
                   "JOIN nvtx_range n ON n.range_id = o.range_id WHERE o.op_kind = 'kernel' AND o.is_innermost")
    assert Counter((r["ts"], r["name"]) for r in rows) == want_inner
    rows = one(ws, "SELECT n.name, n.ts, o.attribution::VARCHAR AS a, sum(k.dur) AS d FROM op_range o "
                   "JOIN kernel k ON k.kernel_id = o.op_id JOIN nvtx_range n ON n.range_id = o.range_id "
                   "WHERE o.op_kind = 'kernel' GROUP BY ALL")
    assert Counter({(r["name"], r["ts"], r["a"]): r["d"] for r in rows}) == want_held
    # '## backward ##' on the main thread holds the autograd thread's kernels as 'process' work
    back = one(ws, "SELECT sum(own_kernel_ns) AS own, sum(other_kernel_ns) AS other FROM range_gpu g "
                   "JOIN nvtx_range n USING (trace_id, range_id) WHERE n.name = '## backward ##'")[0]
    assert back["own"] == 0 and back["other"] == sum(
        v for (name, _, a), v in want_held.items() if name == "## backward ##" and a == "process") > 0


def check_fwdbwd_flows(ws, trace_id: int, doc: dict) -> int:
    """Kineto's fwdbwd flows link a forward op to the backward node it created, independently of
    torch_op's pairing by (process, seq): for every flow, the backward node (or engine wrapper)
    around the flow's end has a forward partner that encloses the flow's start, on the flow's
    start thread, with the node's seq. (The flow may start at an op nested in the partner: the
    rule pairs with the outermost of nested ops sharing the seq.) Returns the flows checked."""
    starts = {e["id"]: e for e in doc["traceEvents"] if e.get("cat") == "fwdbwd" and e["ph"] == "s"}
    flows = [(starts[e["id"]], e) for e in doc["traceEvents"] if e.get("cat") == "fwdbwd" and e["ph"] == "f"]
    ops = one(ws, "SELECT range_id, tid, ts, dur, kind::VARCHAR AS kind, seq, fwd_range_id FROM torch_op "
                  "WHERE trace_id = $t", {"t": trace_id})
    by_id = {o["range_id"]: o for o in ops}
    backward = defaultdict(list)
    for o in ops:
        if o["kind"] in ("backward_node", "engine_wrapper"):
            backward[o["tid"]].append(o)
    for s, f in flows:
        t = ns(f["ts"])
        node = max((o for o in backward[f["tid"]] if o["ts"] <= t <= o["ts"] + o["dur"]), key=lambda o: o["ts"])
        partner = by_id[node["fwd_range_id"]]
        assert partner["ts"] <= ns(s["ts"]) <= partner["ts"] + partner["dur"], (s, f)
        assert (partner["tid"], partner["seq"]) == (s["tid"], node["seq"])
    return len(flows)


def test_generated_backward_pairs_match_the_fwdbwd_flows(gen_ws):
    ws, path, expected = gen_ws
    assert check_fwdbwd_flows(ws, 1, load(path)) == expected["flows_fwdbwd"] > 0


@pytest.mark.parametrize("folder, flows", [("kineto-hta-ddp-v100-rank0", 905), ("kineto-hta-nccl-data", 543),
                                           ("kineto-hta-amd-mi250", 4)])
def test_real_backward_pairs_match_the_fwdbwd_flows(real_ws, folder, flows):
    ws, ids = real_ws
    assert check_fwdbwd_flows(ws, ids[folder], load(TRACES / folder / REAL[folder])) == flows


def test_generated_torch_op_fields_and_flops(gen_ws):
    ws, path, _ = gen_ws
    rows = one(ws, "SELECT t.sizes, t.dtypes, t.seq, t.generation::VARCHAR AS g FROM torch_op t "
                   "WHERE t.name = 'aten::addmm' ORDER BY t.ts LIMIT 1")
    assert rows[0]["sizes"] == "[[120], [32, 400], [400, 120], [], []]"
    assert rows[0]["dtypes"] == "float32,float32,float32,,"
    assert rows[0]["g"] == "kineto" and rows[0]["seq"] is not None
    # aten::addmm(bias [120], x [32, 400], w [400, 120]): 2*M*N*K + M*N FLOPs on its gemm kernel
    flops = one(ws, "SELECT DISTINCT ko.flops, ko.dtype FROM kernel_op ko JOIN torch_op t ON t.range_id = ko.op_range_id "
                    "WHERE t.name = 'aten::addmm' AND t.sizes LIKE '[[120], [32, 400]%'")
    assert flops == [{"flops": 2 * 32 * 120 * 400 + 32 * 120, "dtype": "fp32"}]


def test_epoch_microseconds_are_exact(tmp_path):
    """Epoch microseconds with nanoseconds (19 significant digits) survive exactly; a float64 would not."""
    path = tmp_path / "epoch.json"
    generate(path, kernels=200, seed=5, epoch=True)
    db = tmp_path / "ws.duckdb"
    traceql.ingest([path], db=db)
    doc = load(path)
    want = sorted(ns(e["ts"]) for e in events(doc, "kernel"))
    with traceql.open(db) as ws:
        assert ws.sql("SELECT ts FROM kernel ORDER BY ts")["ts"].to_pylist() == want
        assert ws.sql("SELECT clock FROM trace")["clock"].to_pylist() == ["epoch"]
    assert any(int(float(str(e["ts"])) * 1000) != ns(e["ts"]) for e in events(doc, "kernel"))


# ----------------------------------------------------------------------------- the parser

def _write(path: Path, text: str, gz: bool = False) -> Path:
    data = text.encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


EV = ('{{"ph": "X", "cat": "kernel", "name": {name}, "pid": 0, "tid": 7, "ts": {ts}, "dur": {dur}, '
      '"args": {{"device": 0, "stream": 7, "correlation": {c}, "grid": [1, 2, 3], "nested": [{{"a": 1}}, {{"b": 2}}]}}}}')


def _doc(n: int, before: str = '"schemaVersion": 1', after: str = '"traceName": "x", "list": [{"a": 1}]') -> str:
    evs = ",\n".join(EV.format(name=json.dumps(f"k{i}<{{lambda()#1}}, {{x}}>}}, {{"), ts=f"{1000 + i}.5", dur="1.25", c=i)
                     for i in range(n))
    return "{" + (before + ", " if before else "") + '"traceEvents": [' + evs + "]" + (", " + after if after else "") + "}"


def _staged(tmp_path, path) -> list[tuple]:
    import duckdb

    from traceql.core.resources import read_schema
    con = duckdb.connect()
    con.execute("ATTACH ':memory:' AS raw")
    report = kineto.stage(con, path, read_schema("kineto/raw.sql"))
    rows = con.execute("SELECT name, ts, dur, args FROM raw.kineto_event ORDER BY src_row").fetchall()
    return rows, report.members


@pytest.mark.parametrize("block", [64, 333, 1 << 20])
@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("split_min", [0, 1 << 30])
def test_blocks_cut_only_between_events(tmp_path, monkeypatch, block, gz, split_min):
    """Names hold '}, {', args hold arrays of objects, members come before and after the array:
    with blocks smaller than one event or larger than the file, every event is read once, whole;
    its raw values (ts, dur, args) split by Arrow or cut by their lengths alike."""
    monkeypatch.setattr(kineto, "BLOCK", block)
    monkeypatch.setattr(kineto, "SPLIT_MIN", split_min)
    path = _write(tmp_path / ("t.json.gz" if gz else "t.json"), _doc(50), gz)
    rows, members = _staged(tmp_path, path)
    assert [r[0] for r in rows] == [f"k{i}<{{lambda()#1}}, {{x}}>}}, {{" for i in range(50)]
    assert [(r[1], r[2]) for r in rows] == [(f"{1000 + i}.5", "1.25") for i in range(50)]
    assert json.loads(rows[7][3])["nested"] == [{"a": 1}, {"b": 2}]
    assert members == {"schemaVersion": 1, "traceName": "x", "list": [{"a": 1}]}


@pytest.mark.parametrize("split_min", [0, 1 << 30])
def test_string_ids_read_alike_in_arrow_and_in_python(monkeypatch, split_min):
    """pid, tid and id values as real traces hold them (integers; 'Spans', 'Traces'; 2021's tids
    as strings of digits) and odd ones: the integer and the text, the same by both ways. A string
    is read as an integer when it is an optional minus and at most 18 ASCII digits, blanks
    around them allowed; '--5' and other digits are text only (the loop raised on '--5')."""
    monkeypatch.setattr(kineto, "SPLIT_MIN", split_min)
    values = [7, None, "Spans", " 42 ", "-7", "--5", "\u0663", "1234567890123456789", "-123456789012345678",
              "", "12a", 2 ** 40, "0005"]
    ints, texts = kineto._int_or_text(values)
    assert ints.to_pylist() == [7, None, None, 42, -7, None, None, None, -123456789012345678,
                                None, None, 2 ** 40, 5]
    assert texts.to_pylist() == [None, None, "Spans", " 42 ", "-7", "--5", "\u0663", "1234567890123456789",
                                 "-123456789012345678", "", "12a", None, "0005"]
    other = kineto._int_or_text([True, 1.5, {"a": 1}, 2 ** 70, "3"])  # (the loop, whatever the size)
    assert other[0].to_pylist() == [None, None, None, None, 3]
    assert other[1].to_pylist() == [None, "1.5", '{"a":1}', None, "3"]


@pytest.mark.parametrize("split_min", [0, 1 << 30])
def test_raw_column_keeps_every_value_whole(monkeypatch, split_min):
    """_raw_column: each msgspec.Raw as its text, '' for an absent one, by either way; a value
    holding a NUL (not JSON, but never split apart) too."""
    import msgspec

    monkeypatch.setattr(kineto, "SPLIT_MIN", split_min)
    texts = [b"1.5", b"", b'{"a": [1, 2],\n "b": "x"}', b"", b"-7e3", b"x\0y", b"\xc3\xa9"]
    column = kineto._raw_column([msgspec.Raw(t) for t in texts])
    assert column.to_pylist() == [t.decode() for t in texts]


@pytest.mark.parametrize("text", [
    '[' + EV.format(name='"a"', ts=1, dur=2, c=1) + ']',                     # a bare array
    '{"traceEvents": [' + EV.format(name='"a"', ts=1, dur=2, c=1) + ']}',    # no other members
    '{"traceEvents": [\n' + EV.format(name='"a"', ts=1, dur=2, c=1) + '\n]\n, "deviceProperties": [{"id": 0}]}',
])
def test_document_shapes(tmp_path, text):
    rows, _ = _staged(tmp_path, _write(tmp_path / "t.json", text))
    assert [(r[0], r[1], r[2]) for r in rows] == [("a", "1", "2")]


def test_empty_trace_ingests(tmp_path):
    path = _write(tmp_path / "t.json", '{"schemaVersion": 1, "traceEvents": []}')
    traceql.ingest([path], db=tmp_path / "ws.duckdb")
    with traceql.open(tmp_path / "ws.duckdb") as ws:
        assert ws.sql("SELECT count(*) AS n FROM kernel")["n"].to_pylist() == [0]


@pytest.mark.parametrize("text, message", [
    ('{"traceEvents": [' + EV.format(name='"a"', ts=1, dur=2, c=1), "truncated or damaged JSON"),
    ('{"traceEvents": [{"ph": "X", "name": "a}, {"}', "truncated or damaged JSON"),
    ('{"schemaVersion": 1, "events": []}', "not a PyTorch profiler (Kineto) trace"),
    ('{"schemaVersion": 0, "traceEvents": []}', "schemaVersion '0' is not supported"),
])
def test_damaged_files_are_one_line_errors(tmp_path, text, message):
    path = _write(tmp_path / "t.json", text)
    with pytest.raises((InputError, UnsupportedVersionError)) as err:
        traceql.ingest([path], db=tmp_path / "ws.duckdb")
    assert message in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "ws.duckdb").exists()


def test_rounding_rule_and_string_ids(tmp_path):
    """More than three decimals round to whole ns halves away from zero; string pids and tids
    (2021 writers) are read as numbers; the GPU stream comes from args."""
    text = ('{"traceEvents": ['
            '{"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 11, "tid": "1890023232", '
            '"ts": 10.0005, "dur": 2.0004999, "args": {"correlation": 5}},'
            '{"ph": "X", "cat": "Kernel", "name": "k", "pid": 0, "tid": "stream 7", "ts": 20.0015, "dur": 1e-3, '
            '"args": {"device": 0, "stream": 7, "correlation": 5}}]}')
    path = _write(tmp_path / "t.json", text)
    assert detect(path).source_format == "kineto"
    traceql.ingest([path], db=tmp_path / "ws.duckdb")
    with traceql.open(tmp_path / "ws.duckdb") as ws:
        assert one(ws, "SELECT pid, tid, ts, dur FROM api_call") == [
            {"pid": 11, "tid": 1890023232, "ts": 10001, "dur": 2000}]
        assert one(ws, "SELECT pid, stream_id, ts, dur FROM kernel") == [
            {"pid": 11, "stream_id": 7, "ts": 20002, "dur": 1}]
    assert (ns("10.0005"), ns("2.0004999"), ns("20.0015"), ns("-0.0005")) == (10001, 2000, 20002, -1)


def test_kineto_ns_every_shape_equals_the_documented_rule():
    """kineto_ns (schemas/kineto/common/labels.sql) against the rule computed with Decimal: the
    fast path (an optional '-', up to 16 digits, up to three decimals), the split at the point
    (blanks around the number) and DECIMAL(38, 3) (an exponent, more decimals); anything that is
    not a JSON number, or nothing, is NULL."""
    import duckdb

    from traceql.core.resources import read_schema

    sql = read_schema("kineto/common/labels.sql")
    start = sql.index("CREATE OR REPLACE TEMP MACRO kineto_ns")
    con = duckdb.connect()
    con.execute(sql[start:sql.index(";", start)])
    numbers = ["0", "-0", "7", "-7", "1.5", "-0.5", "1.25", "1.125", "-1.125", "0.001", "-0.001", "00012.3",
               "1700000000123456.789", "-1234567890123456.7", "9223372036854775", "1.1255", "-0.0005", "2.0004999",
               "1e3", "1.5E3", "-2.5e-4", " 12", "12.5 "]
    other = ['"12"', "true", "null", "", "{}", "[1]", None]  # (the JSON values a Raw can hold)
    got = con.execute("SELECT list(kineto_ns(v) ORDER BY i) FROM (SELECT unnest($v) AS v, generate_subscripts($v, 1) AS i)",
                      {"v": numbers + other}).fetchone()[0]
    assert got == [ns(v) for v in numbers] + [None] * len(other)


def _insert_threads() -> list:
    import threading

    return [t for t in threading.enumerate() if t.name == "traceql-kineto-insert"]


def test_failed_insert_stops_the_staging(tmp_path, monkeypatch):
    """The batches are inserted by a thread of their own (kineto._Inserter): an insert that fails
    (here the 31st event breaks a CHECK) is raised by stage, whose reading stops, and the thread
    is gone."""
    import duckdb

    from traceql.core.resources import read_schema
    monkeypatch.setattr(kineto, "BLOCK", 333)  # many small batches
    ddl = read_schema("kineto/raw.sql").replace("args VARCHAR\n", "args VARCHAR CHECK (src_row <> 30)\n")
    assert ddl != read_schema("kineto/raw.sql")
    con = duckdb.connect()
    con.execute("ATTACH ':memory:' AS raw")
    with pytest.raises(duckdb.ConstraintException, match="CHECK"):
        kineto.stage(con, _write(tmp_path / "t.json", _doc(200)), ddl)
    assert not _insert_threads()
    assert con.execute("SELECT count(*) FROM raw.kineto_event").fetchone()[0] < 200


def test_damaged_json_stops_the_insert_thread(tmp_path, monkeypatch):
    """Bad JSON after some batches were queued: stage raises the reader's error, and the insert
    thread is gone."""
    import duckdb

    from traceql.core.resources import read_schema
    monkeypatch.setattr(kineto, "BLOCK", 333)
    text = _doc(200)
    cut = text.index('"k150<')
    con = duckdb.connect()
    con.execute("ATTACH ':memory:' AS raw")
    with pytest.raises(InputError):
        kineto.stage(con, _write(tmp_path / "t.json", text[:cut] + "{{{" + text[cut:]), read_schema("kineto/raw.sql"))
    assert not _insert_threads()
