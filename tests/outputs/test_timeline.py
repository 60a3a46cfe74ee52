"""`traceql export --format perfetto`: the Chrome trace event JSON timeline.

The structure is checked against the trace event format (required keys and types per phase,
metadata events, flow pairs, async pairs, nesting per track), and the events of a window are
counted against the contract views with the window rule computed here in Python."""

import gzip
import json
import shutil
from collections import Counter, defaultdict

import duckdb
import pytest

import traceql
from fixtures.gen_nsys import generate
from traceql.query import library
from traceql.core.errors import UsageError
from traceql.outputs.timeline import parse_time

from ..util import cli
from ..util import ingested

SAXPY = "pipit-saxpy-mpi-cuda-nsys2022.2/saxpy-mpi-cuda_nsys_perlmutter0.sqlite"
U32 = 2**32 - 1


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    root = tmp_path_factory.mktemp("timeline")
    generate(root / "gen.sqlite", layout="3", kernels=200, seed=0)
    db = root / "ws.duckdb"
    traceql.ingest([root / "gen.sqlite"], db=db)
    return db


def middle(db):
    with traceql.open(db) as ws:
        t = ws.traces().to_pylist()[0]
    third = (t["end_ts"] - t["start_ts"]) // 3
    return t["start_ts"] + third, t["end_ts"] - third


# ------------------------------------------------------------------------------ checks

def ns(value):
    """A JSON time in microseconds back to integer ns."""
    return round(value * 1000)


REQUIRED = {  # phase -> keys an event of that phase must have (trace event format)
    "X": ("name", "cat", "ts", "dur", "pid", "tid"),
    "i": ("name", "cat", "ts", "pid", "tid", "s"),
    "b": ("name", "cat", "id", "ts", "pid"),
    "e": ("name", "cat", "id", "ts", "pid"),
    "s": ("name", "cat", "id", "ts", "pid", "tid"),
    "f": ("name", "cat", "id", "ts", "pid", "tid", "bp"),
    "M": ("name", "pid", "args"),
    "C": ("name", "cat", "ts", "pid", "args"),
}


def check_structure(doc, id_stride=None):
    """Assert that doc is a valid trace event file; return its events by phase. id_stride: flow
    ids are a trace's op ids plus a multiple of it (a timeline of several traces)."""
    assert set(doc) == {"traceEvents", "otherData"}
    events = doc["traceEvents"]
    assert isinstance(events, list)
    by_phase = defaultdict(list)
    for ev in events:
        ph = ev["ph"]
        assert ph in REQUIRED, ev
        missing = [k for k in REQUIRED[ph] if k not in ev]
        assert not missing, (missing, ev)
        assert isinstance(ev["name"], str) and ev["name"], ev
        assert isinstance(ev["pid"], int) and 0 <= ev["pid"] <= U32, ev
        if "tid" in ev:
            assert isinstance(ev["tid"], int) and 0 <= ev["tid"] <= U32, ev
        if ph != "M":
            assert isinstance(ev["ts"], (int, float)), ev
            assert isinstance(ev["cat"], str), ev
            # exact ns whether a reader rounds or truncates (Perfetto truncates ts * 1000)
            assert int(ev["ts"] * 1000) == ns(ev["ts"]), ev
        if ph == "X":
            assert isinstance(ev["dur"], (int, float)) and ev["dur"] >= 0, ev
            assert int(ev["dur"] * 1000) == ns(ev["dur"]), ev
        if "args" in ev:
            assert isinstance(ev["args"], dict), ev
        if ph == "i":
            assert ev["s"] in ("t", "p", "g")
        if ph == "f":
            assert ev["bp"] == "e"
        if ph == "C":  # a counter: numbers only
            assert ev["args"] and all(isinstance(v, int) for v in ev["args"].values()), ev
        if ph == "M":
            assert ev["name"] in ("process_name", "thread_name", "process_sort_index", "thread_sort_index"), ev
            if ev["name"].endswith("_name"):
                assert isinstance(ev["args"]["name"], str) and ev["args"]["name"]
            else:
                assert isinstance(ev["args"]["sort_index"], int)
            if ev["name"].startswith("thread"):
                assert "tid" in ev
        by_phase[ph].append(ev)

    # metadata: every process and every thread with events has exactly one name
    names = Counter((ev["name"], ev["pid"], ev.get("tid")) for ev in by_phase["M"])
    assert all(n == 1 for n in names.values()), names
    for ph in "Xisf":
        for ev in by_phase[ph]:
            assert ("process_name", ev["pid"], None) in names, ev
            assert ("thread_name", ev["pid"], ev["tid"]) in names, ev
    for ev in by_phase["b"] + by_phase["C"]:
        assert ("process_name", ev["pid"], None) in names, ev

    # async slices: one begin and one end per (cat, id), the end not before the begin
    begins = {(ev["cat"], ev["id"]): ev for ev in by_phase["b"]}
    ends = {(ev["cat"], ev["id"]): ev for ev in by_phase["e"]}
    assert len(begins) == len(by_phase["b"]) and len(ends) == len(by_phase["e"])
    assert begins.keys() == ends.keys()
    for key, b in begins.items():
        assert ends[key]["name"] == b["name"] and ends[key]["pid"] == b["pid"]
        assert ns(ends[key]["ts"]) >= ns(b["ts"])

    # complete events nest on each track: viewers drop one that partly overlaps another
    tracks = defaultdict(list)
    for ev in by_phase["X"] + by_phase["i"]:
        tracks[(ev["pid"], ev["tid"])].append((ns(ev["ts"]), ns(ev["ts"]) + ns(ev.get("dur", 0)), ev))
    for spans in tracks.values():
        spans.sort(key=lambda s: (s[0], -s[1]))
        open_ends = []
        for start, end, ev in spans:
            while open_ends and open_ends[-1] <= start:
                open_ends.pop()
            assert not open_ends or end <= open_ends[-1], ("partial overlap", ev)
            open_ends.append(end)

    # flows: one start and one finish per id, each inside a slice of its track that the
    # arrow belongs to: the launching API call and the GPU operation with that op_id
    starts = {ev["id"]: ev for ev in by_phase["s"]}
    finishes = {ev["id"]: ev for ev in by_phase["f"]}
    assert len(starts) == len(by_phase["s"]) and len(finishes) == len(by_phase["f"])
    assert starts.keys() == finishes.keys()
    for fid, s in starts.items():
        f = finishes[fid]
        assert s["cat"] == f["cat"] == "launch" and s["name"] == f["name"]
        assert any(x["cat"] == "cuda_api" and ns(x["ts"]) <= ns(s["ts"]) <= ns(x["ts"]) + ns(x["dur"])
                   for _, _, x in tracks[(s["pid"], s["tid"])]), s
        assert any(x["cat"] in ("kernel", "memcpy", "memset") and x["args"]["op_id"] == fid % (id_stride or fid + 1)
                   and ns(x["ts"]) <= ns(f["ts"]) <= ns(x["ts"]) + ns(x["dur"])
                   for _, _, x in tracks[(f["pid"], f["tid"])]), f
    return by_phase


def in_window(ts, end, start, stop):
    """The documented rule: overlap with [start, stop); an event without length: start <= ts < stop."""
    if start is None and stop is None:
        return True
    if end > ts:
        return (stop is None or ts < stop) and (start is None or end > start)
    return (start is None or start <= ts) and (stop is None or ts < stop)


def expected(db, start, stop):
    """Per kind, the ids the window holds, from the contract views."""
    con = duckdb.connect(str(db), read_only=True)
    trace_end = con.execute("SELECT end_ts FROM trace").fetchone()[0]

    def ids(sql):
        return {i for i, ts, end in con.execute(sql).fetchall()
                if in_window(ts, trace_end if end is None else max(end, ts), start, stop)}

    out = {
        "range": ids("SELECT range_id, ts, ts + dur FROM nvtx_range WHERE style = 'push/pop'"),
        "async": ids("SELECT range_id, ts, ts + dur FROM nvtx_range WHERE style = 'start/end'"),
        "mark": ids("SELECT mark_id, ts, ts FROM nvtx_mark"),
        "api": ids("SELECT api_id, ts, ts + dur FROM api_call"),
        "kernel": ids("SELECT kernel_id, ts, ts + dur FROM kernel"),
        "memcpy": ids("SELECT memcpy_id, ts, ts + dur FROM memcpy"),
        "memset": ids("SELECT memset_id, ts, ts + dur FROM memset"),
    }
    ops = out["kernel"] | out["memcpy"] | out["memset"]
    out["flow"] = {op for op, api in con.execute("SELECT op_id, api_id FROM launch WHERE api_id IS NOT NULL")
                   .fetchall() if op in ops and api in out["api"]}
    con.close()
    return out


def exported(by_phase):
    """Per kind, the ids the file holds."""
    out = defaultdict(set)
    cat_kind = {"cuda_api": "api", "kernel": "kernel", "memcpy": "memcpy", "memset": "memset", "nvtx": "range"}
    id_key = {"api": "api_id", "range": "range_id", "kernel": "op_id", "memcpy": "op_id", "memset": "op_id"}
    for ev in by_phase["X"]:
        kind = cat_kind[ev["cat"]]
        out[kind].add(ev["args"][id_key[kind]])
    out["mark"] = {ev["args"]["mark_id"] for ev in by_phase["i"]}
    out["async"] = {ev["id"] for ev in by_phase["b"]}
    out["flow"] = {ev["id"] for ev in by_phase["s"]}
    return out


# ------------------------------------------------------------------------------ tests

def test_window_in_the_middle_matches_the_views(workspace, tmp_path):
    start, stop = middle(workspace)
    out = tmp_path / "trace.json"
    with traceql.open(workspace) as ws:
        result = ws.export_perfetto(out, start=start, end=stop)
    doc = json.loads(out.read_text())
    by_phase = check_structure(doc)
    want = expected(workspace, start, stop)
    got = exported(by_phase)
    for kind in want:
        assert got[kind] == want[kind], kind
        assert result.counts.get(kind, 0) == len(want[kind]), kind
    # the window really cuts: some of everything inside, and less than the whole trace
    everything = expected(workspace, None, None)
    for kind in ("range", "api", "kernel", "memcpy", "flow"):
        assert 0 < len(want[kind]) < len(everything[kind]), kind
    assert len(want["async"]) >= 1  # start/end ranges that span the window are kept whole
    assert doc["otherData"]["window_start_ns"] == start and doc["otherData"]["window_end_ns"] == stop
    # per event type, the counts the phases imply
    assert len(by_phase["b"]) == len(by_phase["e"]) == len(want["async"])
    assert len(by_phase["s"]) == len(by_phase["f"]) == len(want["flow"])


def test_whole_trace_times_and_tracks(workspace, tmp_path):
    out = tmp_path / "all.json"
    with traceql.open(workspace) as ws:
        ws.export_perfetto(out)
        kernels = {r["kernel_id"]: r for r in ws.sql("SELECT kernel_id, ts, dur, device_id, stream_id FROM kernel")
                   .to_pylist()}
        devices = {r["device_id"]: r["name"] for r in ws.sql("SELECT device_id, name FROM device").to_pylist()}
    doc = json.loads(out.read_text())
    by_phase = check_structure(doc)
    assert {k: len(v) for k, v in exported(by_phase).items()} == \
        {k: len(v) for k, v in expected(workspace, None, None).items()}
    # kernels keep their exact ns (session clock: no origin subtracted)
    assert doc["otherData"]["origin_ns"] == 0
    for ev in by_phase["X"]:
        if ev["cat"] == "kernel":
            k = kernels[ev["args"]["op_id"]]
            assert (ns(ev["ts"]), ns(ev["dur"])) == (k["ts"], k["dur"])
    # one process per GPU named after it, one thread per stream
    meta = {(ev["name"], ev["pid"], ev.get("tid")): ev["args"] for ev in by_phase["M"]}
    gpu_pids = {ev["pid"] for ev in by_phase["X"] if ev["cat"] == "kernel"}
    assert sorted(meta[("process_name", p, None)]["name"] for p in gpu_pids) == \
        sorted(f"GPU {d} ({n})" for d, n in devices.items() if n)
    streams = {(ev["pid"], ev["tid"]) for ev in by_phase["X"] if ev["cat"] in ("kernel", "memcpy", "memset")}
    with traceql.open(workspace) as ws:
        n = ws.sql("SELECT count(*) AS n FROM (SELECT DISTINCT device_id, context_id, stream_id FROM kernel UNION "
                   "SELECT device_id, context_id, stream_id FROM memcpy UNION "
                   "SELECT device_id, context_id, stream_id FROM memset)").to_pylist()[0]["n"]
    assert len(streams) == n > 1
    for pid, tid in streams:
        assert meta[("thread_name", pid, tid)]["name"].startswith("Stream ")
    # CPU events keep the OS pid and tid
    with traceql.open(workspace) as ws:
        threads = {(r["pid"], r["tid"]) for r in ws.sql("SELECT pid, tid FROM api_call").to_pylist()}
    assert {(ev["pid"], ev["tid"]) for ev in by_phase["X"] if ev["cat"] == "cuda_api"} == threads


def test_partly_overlapping_events_get_a_track_of_their_own(workspace, tmp_path):
    """A kernel made to start inside its predecessor on the same stream and end after it."""
    db = tmp_path / "overlap.duckdb"
    shutil.copy(workspace, db)
    con = duckdb.connect(str(db))
    a, b = con.execute(
        "SELECT k1.kernel_id, k2.kernel_id FROM kernel k1 JOIN kernel k2 ON k2.device_id = k1.device_id "
        "AND k2.stream_id = k1.stream_id AND k2.context_id = k1.context_id AND k2.ts > k1.ts + k1.dur "
        "ORDER BY k1.kernel_id, k2.ts LIMIT 1").fetchone()
    con.execute("UPDATE kernel SET ts = (SELECT ts + dur // 2 FROM kernel WHERE kernel_id = ?), dur = "
                "(SELECT dur FROM kernel WHERE kernel_id = ?) WHERE kernel_id = ?", [a, a, b])
    con.close()
    out = tmp_path / "overlap.json"
    with traceql.open(db) as ws:
        result = ws.export_perfetto(out)
    by_phase = check_structure(json.loads(out.read_text()))  # nesting holds on every track
    assert result.overlap_tracks == 1
    moved = [ev for ev in by_phase["X"] if ev["cat"] == "kernel" and ev["args"]["op_id"] == b][0]
    name = [ev for ev in by_phase["M"] if ev["name"] == "thread_name" and ev["tid"] == moved["tid"]][0]
    assert name["args"]["name"].endswith("(overlap 1)")
    assert result.counts["kernel"] == 200


def test_gzip_and_cli(workspace, tmp_path):
    start, stop = middle(workspace)
    out = tmp_path / "t.json.gz"
    proc = cli("--db", str(workspace), "export", "--format", "perfetto", "-o", str(out),
               "--start", f"{start}", "--end", f"{stop}ns")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"wrote trace 1 from ts {start} to {stop} to {out}: ")
    assert proc.stderr == ""
    with gzip.open(out, "rt") as fh:
        doc = json.load(fh)
    check_structure(doc)
    assert {k: len(v) for k, v in exported(check_structure(doc)).items()} == \
        {k: len(v) for k, v in expected(workspace, start, stop).items()}
    again = cli("--db", str(workspace), "export", "--format", "perfetto", "-o", str(out))
    assert again.returncode == 2 and "exists; use --overwrite" in again.stderr
    assert cli("--db", str(workspace), "export", "--format", "perfetto", "-o", str(out), "--overwrite").returncode == 0


@pytest.mark.parametrize("args, message", [
    (["--start", "soon"], "--start soon: not a time"),
    (["--start", "2s", "--end", "1s"], "--end 1s is not after --start 2s"),
    (["--per-trace"], "--per-trace applies to csv and parquet"),
    (["--trace", "9"], "--trace 9: no such trace"),
])
def test_cli_usage_errors(workspace, tmp_path, args, message):
    proc = cli("--db", str(workspace), "export", "--format", "perfetto", "-o", str(tmp_path / "x.json"), *args)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("traceql: error: ") and message in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "x.json").exists()


def test_window_options_only_for_perfetto(workspace, tmp_path):
    proc = cli("--db", str(workspace), "export", "--format", "csv", "-o", str(tmp_path / "d"), "--start", "1s")
    assert proc.returncode == 2 and "--start and --end apply to --format perfetto" in proc.stderr


def test_one_of_several_traces(tmp_path):
    """--trace ID: one trace of several (all of them: tests/outputs/test_job_timeline.py)."""
    db = tmp_path / "two.duckdb"
    generate(tmp_path / "a.sqlite", layout="3", kernels=20, seed=1)
    generate(tmp_path / "b.sqlite", layout="2", kernels=20, seed=2)
    traceql.ingest([tmp_path / "a.sqlite", tmp_path / "b.sqlite"], db=db)
    with traceql.open(db) as ws:
        result = ws.export_perfetto(tmp_path / "x.json", trace_id=2, start="+0", end="+1ms")
        with pytest.raises(UsageError, match="--align-clocks lines up the clocks of several traces; this timeline "
                                             "shows one"):
            ws.export_perfetto(tmp_path / "y.json", trace_id=2, align_clocks=True)
    assert result.trace_id == 2
    check_structure(json.loads((tmp_path / "x.json").read_text()))


def test_parse_time():
    assert parse_time("1500") == (1500, False)
    assert parse_time("1.5s") == (1_500_000_000, False)
    assert parse_time("200ms") == (200_000_000, False)
    assert parse_time("2.5us") == (2500, False)
    assert parse_time("+10 ms") == (10_000_000, True)
    assert parse_time(".5s") == (500_000_000, False)
    assert parse_time(None) == (None, False)
    for bad in ("", "s", "-1s", "1.5 h", "1e3", "1,5s"):
        with pytest.raises(UsageError):
            parse_time(bad, "--start")


def test_real_trace(tmp_path, tmp_path_factory):
    """A real nsys export: every kernel and copy with its launch arrow, names from the trace."""
    db = ingested(tmp_path_factory, SAXPY)
    with traceql.open(db) as ws:
        result = ws.export_perfetto(tmp_path / "saxpy.json")
    by_phase = check_structure(json.loads((tmp_path / "saxpy.json").read_text()))
    assert result.counts == {"range": 22, "api": 57, "kernel": 5, "memcpy": 15, "flow": 20}
    names = {ev["args"]["name"] for ev in by_phase["M"] if ev["name"].endswith("_name")}
    assert {"./saxpy-mpi-cuda", "MPI Rank 0", "GPU 0 (NVIDIA A100-SXM4-40GB)", "Stream 7"} <= names


def test_parts_give_the_same_timeline(workspace, tmp_path, monkeypatch):
    """Large timelines are sorted and written in parts of about PART_ROWS rows (by start
    time): the events are the same, each on the same named track."""
    import traceql.outputs.timeline as timeline

    def events(path):
        doc = json.loads(path.read_text())
        names = {(ev["pid"], ev.get("tid")): ev["args"]["name"] for ev in doc["traceEvents"]
                 if ev["ph"] == "M" and ev["name"].endswith("_name")}
        return sorted(json.dumps({**ev, "pid": names[(ev["pid"], None)], "tid": names.get((ev["pid"], ev.get("tid")))},
                                 sort_keys=True) for ev in doc["traceEvents"] if ev["ph"] != "M")

    start = middle(workspace)[0]
    query = library.get("_internal/timeline")
    with traceql.open(workspace) as ws:
        ws.export_perfetto(tmp_path / "one.json", start=start)
        monkeypatch.setattr(timeline, "PART_ROWS", 50)
        total, parts = timeline.time_parts(ws, query, library.bind(query, {"trace_id": 1, "start": start, "origin": 0}))
        assert len(parts) > 5 and total > 50 * 5
        ws.export_perfetto(tmp_path / "parts.json", start=start)
    check_structure(json.loads((tmp_path / "parts.json").read_text()))
    assert events(tmp_path / "one.json") == events(tmp_path / "parts.json")
