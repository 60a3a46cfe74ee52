"""memory_event and report --by memory against independent walks of the source files: the
PyTorch profiler's '[memory]' events read with the json module, nsys's
CUDA_GPU_MEMORY_USAGE_EVENTS read with sqlite3.

Each GPU's peak allocated bytes: the largest 'Total Allocated' (PyTorch since 2022: bert-small,
Qwen), the peak of the running sum of 'Bytes' from the capture's start (PyTorch 2021: both
ResNet-50 training traces), the running sum of device allocations minus frees (nsys, Extra-P's
exports). The live allocations at the peak (allocated in the capture, not freed by the event
that reached the peak) and the op around each are walked the same way."""

from __future__ import annotations

import functools
import gzip
import json
import sqlite3
from decimal import ROUND_HALF_UP, Decimal

import pytest

import traceql

from ..intervals import holding
from ..util import ingested, trace_file

KINETO = {
    "bert": "kineto-tracelens-h100-bert-small/gaunernst_bert-small-uncased__1016001.json.gz",
    "qwen": "kineto-tracelens-h100-qwen0.5b/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
    "resnet_a": "kineto-tbplugin-resnet50-memory-2021/worker0.1623143089861.pt.trace.json.gz",
    "resnet_b": "kineto-tbplugin-resnet50-memory-2021/worker0.1623143566756.pt.trace.json.gz",
}
NSYS = {
    "extrap_profile1": "extrap-windows-gtx1060-nsys2022.1/profile1.sqlite",
    "extrap_con_kernel": "extrap-windows-gtx1060-nsys2022.1/con_kernel.sqlite",
}


def us_to_ns(value) -> int:
    return int((Decimal(value) * 1000).quantize(Decimal(1), rounding=ROUND_HALF_UP))


@functools.lru_cache(maxsize=None)
def kineto_events(path) -> list[dict]:
    """The traceEvents of a Kineto file (floats as Decimal), parsed once per test module: a
    ResNet-50 trace of 2021 costs 1.3 CPU s to parse and was parsed up to nine times in a module.
    Read only; each module that uses it clears it when done (forget_kineto_events)."""
    with gzip.open(path, "rb") as fh:
        return json.load(fh, parse_float=Decimal)["traceEvents"]


@pytest.fixture(scope="module", autouse=True)
def forget_kineto_events():
    """Free the parsed files (about 150 MB each) when the module is done."""
    yield
    kineto_events.cache_clear()


def kineto_walk(path):
    """The GPU memory events of a Kineto file in (ts, file) order, and its CPU ops by thread."""
    events = kineto_events(path)
    mem, ops = [], {}
    for i, e in enumerate(events):
        if e.get("name") == "[memory]" and e.get("ph") == "i":
            a = e["args"]
            if a["Device Type"] == 1:
                mem.append(dict(ts=us_to_ns(e["ts"]), row=i, device=a["Device Id"], bytes=a["Bytes"],
                                addr=a.get("Addr"), total=a.get("Total Allocated"), pid=e["pid"], tid=e["tid"],
                                reserved=a.get("Total Reserved")))
        elif e.get("ph") == "X" and e.get("cat") in ("cpu_op", "Operator", "user_annotation"):
            start = us_to_ns(e["ts"])
            ops.setdefault((e["pid"], e["tid"]), []).append((start, start + us_to_ns(e["dur"]), e["name"]))
    mem.sort(key=lambda m: (m["ts"], m["row"]))
    return mem, ops


def nsys_walk(path):
    """Device-memory events of an nsys export in (start, rowid) order, frees negative."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    rows = con.execute("SELECT rowid, start, deviceId, bytes, memoryOperationType, address "
                       "FROM CUDA_GPU_MEMORY_USAGE_EVENTS WHERE memKind = 2 ORDER BY start, rowid").fetchall()
    con.close()
    return [dict(ts=start, row=rowid, device=dev, bytes=-b if op == 1 else b, addr=addr, total=None, pid=None,
                 tid=None, reserved=None) for rowid, start, dev, b, op, addr in rows]


def peak_walk(mem):
    """Per device: (peak bytes, index in mem of the first event reaching it, live allocations then
    as {address: event}). The level is the recorded total when there is one, else the running sum."""
    out = {}
    for dev in sorted({m["device"] for m in mem}):
        level, best, at, live, live_at = 0, None, None, {}, None
        for i, m in enumerate(mem):
            if m["device"] != dev:
                continue
            if m["addr"] is not None:
                if m["bytes"] > 0:
                    live[m["addr"]] = m
                else:
                    live.pop(m["addr"], None)
            level = m["total"] if m["total"] is not None else level + m["bytes"]
            if best is None or level > best:
                best, at, live_at = level, i, dict(live)
        out[dev] = (best, at, live_at)
    return out


def innermost(ops, pid, tid, ts):
    """The op of the thread open at ts that started last (ts <= t < end), the longer first on ties."""
    inside = [(s, -(e - s), n) for s, e, n in ops.get((pid, tid), []) if s <= ts < e]
    return max(inside)[2] if inside else None


def memory_workspace(tmp_path_factory):
    """(workspace, {name: trace_id}, {name: source path}) of KINETO and NSYS, ingested once for
    the session (tests/util.py ingested): tests/analysis/test_memory_rules.py reads it too."""
    paths = {k: trace_file(v) for k, v in {**KINETO, **NSYS}.items()}
    db = ingested(tmp_path_factory, *KINETO.values(), *NSYS.values())
    with traceql.open(db) as w:
        by_path = {r["path"]: r["trace_id"] for r in w.sql("SELECT path, trace_id FROM trace").to_pylist()}
    return db, {k: by_path[str(p)] for k, p in paths.items()}, paths


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    db, ids, paths = memory_workspace(tmp_path_factory)
    with traceql.open(db) as w:
        yield w, ids, paths


@pytest.fixture(scope="module")
def walks(ws):
    _, _, paths = ws
    out = {}
    for k, p in paths.items():
        mem, ops = kineto_walk(p) if k in KINETO else (nsys_walk(p), {})
        out[k] = (mem, ops, peak_walk(mem))
    return out


def rows(w, sql, **params):
    return w.sql(sql, params).to_pylist()


@pytest.mark.parametrize("name", [*KINETO, *NSYS])
def test_peak_allocated_per_gpu(ws, walks, name):
    w, ids, _ = ws
    mem, _, peaks = walks[name]
    got = rows(w, "SELECT device_id, count(*) AS n, max(allocated) AS peak FROM memory_event "
                  "WHERE trace_id = $t AND mem_kind = 'Device' GROUP BY device_id ORDER BY device_id", t=ids[name])
    assert [(r["device_id"], r["n"], r["peak"]) for r in got] == [
        (dev, sum(1 for m in mem if m["device"] == dev), peak) for dev, (peak, _, _) in sorted(peaks.items())]
    assert len(mem) > 0


def test_known_peaks(walks):
    """The figures of issue 38, as the walks find them."""
    assert walks["resnet_a"][2][0][0] == walks["resnet_b"][2][0][0] == 2_791_636_480
    assert walks["bert"][2][0][0] == 101_305_344
    assert walks["qwen"][2][0][0] == 2_088_508_416
    assert walks["extrap_profile1"][2][0][0] == 20_000_000


@pytest.mark.parametrize("name", ["bert", "qwen", "extrap_profile1", "extrap_con_kernel"])
def test_live_allocations_at_peak(ws, walks, name):
    """The allocations live when each GPU first reached its peak, and the op around each."""
    w, ids, _ = ws
    mem, ops, peaks = walks[name]
    for dev, (_, at, live) in peaks.items():
        peak_ts = mem[at]["ts"]
        got = rows(w, """
            WITH d AS (SELECT * FROM memory_event WHERE trace_id = $t AND device_id = $d AND mem_kind = 'Device'),
            p AS (SELECT min(memory_event_id) AS id FROM d WHERE allocated = (SELECT max(allocated) FROM d))
            SELECT a.ts, a.bytes, a.address, r.name
            FROM memory_event a CROSS JOIN p
            LEFT JOIN nvtx_range r ON r.trace_id = a.trace_id AND r.range_id = a.range_id
            WHERE a.trace_id = $t AND a.device_id = $d AND a.mem_kind = 'Device' AND a.bytes > 0
              AND a.memory_event_id <= p.id AND (a.free_event_id IS NULL OR a.free_event_id > p.id)
            ORDER BY a.memory_event_id""", t=ids[name], d=dev)
        want = sorted(live.values(), key=lambda m: (m["ts"], m["row"]))
        assert [(r["ts"], r["bytes"], r["address"]) for r in got] == [(m["ts"], m["bytes"], m["addr"]) for m in want]
        assert [r["name"] for r in got] == [innermost(ops, m["pid"], m["tid"], m["ts"]) for m in want]
        assert max(r["ts"] for r in got) <= peak_ts
        if name in KINETO:
            assert sum(r["name"] is not None for r in got) > 0


def test_ranges_of_every_event(ws, walks):
    """Every GPU memory event of bert-small sits in the op the walk finds around it."""
    w, ids, _ = ws
    mem, ops, _ = walks["bert"]
    got = rows(w, "SELECT r.name FROM memory_event m LEFT JOIN nvtx_range r ON r.trace_id = m.trace_id "
                  "AND r.range_id = m.range_id WHERE m.trace_id = $t AND m.mem_kind = 'Device' "
                  "ORDER BY m.memory_event_id", t=ids["bert"])
    assert [r["name"] for r in got] == [innermost(ops, m["pid"], m["tid"], m["ts"]) for m in mem]


def python_stacks(path):
    """(ts, row in the file, frames outermost first or None) of each '[memory]' event: the
    python_function events open on its thread then (ts <= t < ts + dur, zero-length ones hold
    nothing), walked in the json."""
    events = kineto_events(path)
    frames = {}
    for e in events:
        if e.get("cat") == "python_function" and e.get("ph") == "X" and us_to_ns(e["dur"]) > 0:
            s = us_to_ns(e["ts"])
            frames.setdefault((e["pid"], e["tid"]), []).append((s, s + us_to_ns(e["dur"]), e["name"]))
    out = []
    asked = {}  # (pid, tid) -> (t, t, index in out) of each event on that thread
    for i, e in enumerate(events):
        if e.get("name") == "[memory]" and e.get("ph") == "i":
            t = us_to_ns(e["ts"])
            asked.setdefault((e["pid"], e["tid"]), []).append((t, t, len(out)))
            out.append((t, i, None))
    for lane, queries in asked.items():  # the frames with ts <= t < ts + dur, outermost first (intervals.holding)
        for (t, _, k), held in zip(queries, holding(frames.get(lane, []), queries, half_open=True)):
            out[k] = (t, out[k][1], [f[2] for f in held] or None)
    return out


@pytest.mark.parametrize("name", ["bert", "qwen"])
def test_report_location_of_live_allocations(ws, walks, name):
    """report --by memory groups the live allocations at the peak by op and code line too: the
    innermost of the user's frames of each allocation's Python stack (walked in the json; which
    frames are the user's is call_stack.is_user's rule), bytes per (op, line) as the walk sums."""
    w, ids, paths = ws
    mem, ops, peaks = walks[name]
    stacks = {row: frames for _, row, frames in python_stacks(paths[name])}
    user = {r["frame"]: r["u"] for r in rows(w, "SELECT frame, bool_and(is_user) AS u FROM call_stack "
                                                 "WHERE trace_id = $t GROUP BY frame", t=ids[name])}
    table = w.report("memory", trace_id=ids[name], columns="all").to_pylist()
    for dev, (_, _, live) in peaks.items():
        want = {}
        for m in live.values():
            frames = stacks[m["row"]] or []
            mine = [f for f in frames if user[f]] or frames
            key = (innermost(ops, m["pid"], m["tid"], m["ts"]), mine[-1] if mine else None)
            want[key] = want.get(key, 0) + m["bytes"]
        got = {}
        for r in table:
            if r["device"] == dev and r["allocations"] is not None:
                got[(r["op"], r["location"])] = got.get((r["op"], r["location"]), 0) + r["live_bytes"]
        assert got == want
        assert all(loc is not None for _, loc in want)


@pytest.mark.parametrize("name", ["bert", "qwen"])
def test_stack_of_every_event(ws, name):
    """Each memory event's Python stack (with_stack=True): the python_function events open on its
    thread at the event, outermost first (ts <= t < ts + dur; zero-length frames hold nothing),
    walked in the json; an event with none open would have no stack."""
    w, ids, paths = ws
    want = sorted(python_stacks(paths[name]))
    got = rows(w, """
        SELECT m.memory_event_id, (SELECT list(c.frame ORDER BY c.level) FROM call_stack c
                                   WHERE c.trace_id = m.trace_id AND c.stack_id = m.stack_id) AS frames
        FROM memory_event m WHERE m.trace_id = $t ORDER BY m.memory_event_id""", t=ids[name])
    assert [r["frames"] for r in got] == [f for _, _, f in want]
    assert sum(f is not None for _, _, f in want) > 200
    assert len({tuple(f) for _, _, f in want if f}) > 10  # many code lines, not one stack for all


def test_ingest_stats(ws, walks):
    w, ids, _ = ws
    got = {(r["trace_id"], r["key"]): r["value"] for r in rows(
        w, "SELECT trace_id, key, value FROM ingest_stats WHERE starts_with(key, 'memory_event.')")}
    resnet_events = len(walks["resnet_a"][0])
    assert got[(ids["resnet_a"], "memory_event.without_address")] >= resnet_events
    for name in ("bert", "qwen", "extrap_profile1", "extrap_con_kernel"):  # every free paired, every block freed
        assert (ids[name], "memory_event.free_without_allocation") not in got
        assert (ids[name], "memory_event.allocation_not_freed") not in got
    assert not any(k[1] == "memory_event.held_before_capture" for k in got)
    assert rows(w, "SELECT count(*) AS n FROM memory_event WHERE allocated < 0")[0]["n"] == 0


def profiler_step(ops, ts):
    """The ProfilerStep#N range open at ts on any thread."""
    found = [n for spans in ops.values() for s, e, n in spans if n.startswith("ProfilerStep#") and s <= ts < e]
    return found[0] if found else None


@pytest.mark.parametrize("name", [*KINETO, *NSYS])
def test_report_by_memory(ws, walks, name):
    """report --by memory: each GPU's peak, when, the iteration, and the live bytes per op at the
    peak, against the walk (Python API; the CLI prints the same table)."""
    w, ids, _ = ws
    mem, ops, peaks = walks[name]
    table = w.report("memory", trace_id=ids[name], columns="all").to_pylist()
    assert {r["device"] for r in table} == set(peaks)
    for dev, (peak, at, live) in peaks.items():
        got = [r for r in table if r["device"] == dev]
        first = got[0]
        assert first["peak_bytes"] == peak
        assert all(r["peak_bytes"] == peak for r in got)
        assert first["iteration"] == profiler_step(ops, mem[at]["ts"])
        start = w.sql("SELECT start_ts FROM trace WHERE trace_id = $t", {"t": ids[name]}).to_pylist()[0]["start_ts"]
        assert first["peak_at_ns"] == mem[at]["ts"] - start
        held = {}
        for m in live.values():
            op = innermost(ops, m["pid"], m["tid"], m["ts"])
            held[op] = held.get(op, 0) + m["bytes"]
        by_op = {}
        for r in got:
            if r["holder"] in ("[before the capture]", "[unknown: no addresses]"):
                continue
            by_op[r["op"]] = by_op.get(r["op"], 0) + r["live_bytes"]
        assert by_op == held
        rest = {r["holder"]: r["live_bytes"] for r in got if r["allocations"] is None}
        if mem[0]["addr"] is None:  # 2021: no addresses, nothing paired
            assert rest == {"[unknown: no addresses]": peak} and held == {}
        elif peak != sum(held.values()):
            assert rest == {"[before the capture]": peak - sum(held.values())}
        else:
            assert rest == {}
        assert sum(r["live_bytes"] for r in got) == peak


def iteration_walk(mem, ops):
    """Per (device, ProfilerStep): the peak of the level over the step's events (ts in [start,
    end) of the step's CPU range), the first event reaching it, the level before the step's first
    event and after its last, and the live allocations at that peak by innermost op."""
    spans = {}
    for ranges in ops.values():
        for s, e, n in ranges:
            if n.startswith("ProfilerStep#") and (n not in spans or s < spans[n][0]):
                spans[n] = (s, e)
    steps = sorted((s, e, n) for n, (s, e) in spans.items())
    out = {}
    for dev in sorted({m["device"] for m in mem}):
        events = [m for m in mem if m["device"] == dev]
        levels, level = [], 0
        for m in events:
            level = m["total"] if m["total"] is not None else level + m["bytes"]
            levels.append(level)
        for k, (s, e, name) in enumerate(steps, start=1):
            idx = [i for i, m in enumerate(events) if s <= m["ts"] < e]
            if not idx:
                continue
            peak = max(levels[i] for i in idx)
            at = next(i for i in idx if levels[i] == peak)
            first = idx[0]
            start = levels[first - 1] if first else levels[first] - events[first]["bytes"]
            live = {}
            for m in events[:at + 1]:
                if m["addr"] is not None:
                    if m["bytes"] > 0:
                        live[m["addr"]] = m
                    else:
                        live.pop(m["addr"], None)
            held = {}
            for m in live.values():
                op = innermost(ops, m["pid"], m["tid"], m["ts"])
                held[op] = held.get(op, 0) + m["bytes"]
            out[(dev, name)] = dict(step=k, peak=peak, ts=events[at]["ts"], start=start, end=levels[idx[-1]],
                                    reserved=events[at]["reserved"], held=held,
                                    addressed=events[at]["addr"] is not None)
    return out


@pytest.mark.parametrize("name", [*KINETO])
def test_report_by_memory_per_iteration(ws, walks, name):
    """report --by memory --per-iteration: each GPU's peak in each ProfilerStep, when, the level
    at the step's start and end, reserved at the peak, and the live bytes per op then."""
    w, ids, _ = ws
    mem, ops, _ = walks[name]
    want = iteration_walk(mem, ops)
    table = w.report("memory", trace_id=ids[name], columns="all", per_iteration=True).to_pylist()
    start = w.sql("SELECT start_ts FROM trace WHERE trace_id = $t", {"t": ids[name]}).to_pylist()[0]["start_ts"]
    assert {(r["device"], r["iteration"]) for r in table} == set(want)
    for (dev, it), x in want.items():
        got = [r for r in table if (r["device"], r["iteration"]) == (dev, it)]
        first = got[0]
        assert (first["step"], first["peak_bytes"], first["peak_at_ns"], first["start_bytes"], first["end_bytes"],
                first["reserved_bytes"]) == (x["step"], x["peak"], x["ts"] - start, x["start"], x["end"],
                                             x["reserved"])
        by_op = {}
        for r in got:
            if r["allocations"] is not None:
                by_op[r["op"]] = by_op.get(r["op"], 0) + r["live_bytes"]
        assert by_op == x["held"]
        assert sum(r["live_bytes"] for r in got) == x["peak"]
    if name.startswith("resnet"):  # six training steps, each back to the level it began at
        assert len(want) == 6 and all(x["start"] == x["end"] for x in want.values())
        assert max(x["peak"] for x in want.values()) == 2_791_636_480


def test_report_per_iteration_cli(ws):
    """--per-iteration on the command line: a row per step; refused by a report it does not apply to."""
    from ..util import cli as run

    w, ids, _ = ws
    proc = run("--db", str(w.path), "report", "--by", "memory", "--per-iteration", "--trace", str(ids["resnet_a"]),
               "--format", "csv")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[0] == ("trace_id,device,peak_bytes,peak_at_ns,iteration,start_bytes,end_bytes,reserved_bytes,"
                        "holder,location,live_bytes,allocations,pct")
    assert [ln.split(",")[4] for ln in lines[1:]] == [f"ProfilerStep#{k}" for k in range(5, 11)]
    proc = run("--db", str(w.path), "report", "--by", "kernel", "--per-iteration")
    assert proc.returncode == 2 and "--per-iteration" in proc.stderr


def test_report_cli(ws):
    """The CLI end to end (a process of its own, reading the workspace)."""
    from ..util import cli as run

    w, ids, _ = ws
    proc = run("--db", str(w.path), "report", "--by", "memory", "--trace", str(ids["bert"]), "--format", "csv")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[0] == ("trace_id,device,peak_bytes,peak_at_ns,iteration,reserved_bytes,holder,location,live_bytes,"
                        "allocations,pct")
    assert lines[1].startswith(f"{ids['bert']},0,101305344,") and ",ProfilerStep#6,121634816,[before the capture],,91360768,," in lines[1]
    assert ",ProfilerStep#6 > aten::linear > aten::addmm,transformers/models/bert/modeling_bert.py(786): forward," in lines[2]


def test_plot_by_memory(ws, walks, tmp_path):
    """plot --by memory draws each GPU's levels: the figure's solid line of GPU 0 peaks at the
    walk's peak, and the PNG is written."""
    pytest.importorskip("matplotlib")
    w, ids, _ = ws
    for name in ("bert", "resnet_a"):
        out = tmp_path / f"{name}.png"
        fig = w.plot("memory", out, trace_id=ids[name])
        assert out.stat().st_size > 10_000
        ax = fig.axes[0]
        solid = [line for line in ax.get_lines() if line.get_label().startswith("GPU 0 allocated")]
        assert len(solid) == 1
        unit = ax.get_ylabel()
        scale = {"(GB)": 1e9, "(MB)": 1e6}[unit.split()[-1]]
        assert max(solid[0].get_ydata()) * scale == pytest.approx(walks[name][2][0][0], rel=1e-12)
    with pytest.raises(traceql.UsageError, match="one trace"):
        w.plot("memory", tmp_path / "all.png")


def test_pool_events_are_counted(tmp_path):
    """CUDA_GPU_MEMORY_POOL_EVENTS (no real export here has rows: the table as nsys writes it,
    added to a copy of Extra-P's profile1 with three pool events) are counted in ingest_stats,
    not read as allocations: memory_event is what it is without them."""
    import shutil

    src = tmp_path / "profile1_pools.sqlite"
    shutil.copyfile(trace_file(NSYS["extrap_profile1"]), src)
    con = sqlite3.connect(src)
    con.executescript("""
        CREATE TABLE CUDA_GPU_MEMORY_POOL_EVENTS (
            start INTEGER NOT NULL, globalPid INTEGER NOT NULL, deviceId INTEGER NOT NULL, address INTEGER NOT NULL,
            operationType INTEGER NOT NULL, poolType INTEGER NOT NULL, correlationId INTEGER, minBytesToKeep INTEGER,
            localMemoryPoolReleaseThreshold INTEGER, localMemoryPoolSize INTEGER, localMemoryPoolUtilizedSize INTEGER);
        INSERT INTO CUDA_GPU_MEMORY_POOL_EVENTS
        SELECT min(start) + i, min(globalPid), 0, 140000000000 + i, i % 3, 0, NULL, NULL, 0, 33554432, 0
        FROM CUDA_GPU_MEMORY_USAGE_EVENTS, (SELECT 0 AS i UNION ALL SELECT 1 UNION ALL SELECT 2) GROUP BY i;""")
    con.commit()
    con.close()
    db = tmp_path / "ws.duckdb"
    traceql.ingest([src], db=db)
    with traceql.open(db) as w:
        stats = rows(w, "SELECT key, value FROM ingest_stats WHERE starts_with(key, 'memory_event.')")
        got = rows(w, "SELECT count(*) AS n, max(allocated) AS peak FROM memory_event WHERE mem_kind = 'Device'")
    assert {r["key"]: r["value"] for r in stats} == {"memory_event.pool_events_not_read": 3}
    mem = nsys_walk(src)
    assert got == [{"n": len(mem), "peak": peak_walk(mem)[0][0]}] and got[0]["peak"] == 20_000_000
