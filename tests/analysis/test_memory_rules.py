"""The memory rules of analyze (queries/analyze/memory_leak.sql, allocator_churn.sql,
memory_peak.sql) against independent walks of the source files (json, sqlite3) and on generated
traces (fixtures/gen_memory.py) where each finding must fire and must not.

Real traces: both ResNet-50 training traces of 2021 (six ProfilerSteps, levels from the running
sum of Bytes, no Total Reserved), one of them perturbed with a leak (an allocation per step that is
never freed: every later level rises with it), bert-small (Total Allocated and Total Reserved, one
step, an H100's memory in deviceProperties) and Extra-P's nsys exports (driver allocations, the
GPU's memory in TARGET_INFO_GPU, an NVTX range 'main' in profile1 only)."""

from __future__ import annotations

import gzip
import json
from decimal import Decimal

import pytest

import traceql
from fixtures.gen_memory import ACTIVATION, SEGMENT, generate
from traceql.analysis import analyze

from ..derive.test_memory import forget_kineto_events  # noqa: F401 - the fixture: the parsed files freed after the module
from ..derive.test_memory import kineto_events, kineto_walk, memory_workspace, nsys_walk, us_to_ns
from ..util import cli, source_rows, trace_file

RESNET = "kineto-tbplugin-resnet50-memory-2021/worker0.1623143089861.pt.trace.json.gz"
RESNET_B = "kineto-tbplugin-resnet50-memory-2021/worker0.1623143566756.pt.trace.json.gz"
BERT = "kineto-tracelens-h100-bert-small/gaunernst_bert-small-uncased__1016001.json.gz"
PROFILE1 = "extrap-windows-gtx1060-nsys2022.1/profile1.sqlite"
CON_KERNEL = "extrap-windows-gtx1060-nsys2022.1/con_kernel.sqlite"
LEAK = 5_000_000  # bytes the perturbed ResNet trace leaks per step
RULES = ["memory_leak", "memory_peak", "allocator_churn"]


def leaky_copy(src, dst):
    """SRC with one more '[memory]' allocation of LEAK bytes on GPU 0 at 1 us into each CPU
    ProfilerStep, never freed (PyTorch 2021's format: no address): every later level is higher."""
    with gzip.open(src, "rb") as fh:
        trace = json.load(fh, parse_float=Decimal)
    steps = [e for e in trace["traceEvents"] if e.get("ph") == "X" and str(e.get("name")).startswith("ProfilerStep#")]
    assert len(steps) == 6
    for s in steps:
        trace["traceEvents"].append({"ph": "i", "s": "t", "name": "[memory]", "pid": s["pid"], "tid": s["tid"],
                                     "ts": s["ts"] + 1, "args": {"Device Type": 1, "Device Id": 0, "Bytes": LEAK}})
    # json.dumps, not json.dump(trace, fh): only a one-shot encoding takes json's C encoder (the
    # same text; leaky_copy 3.9 -> 2.1 CPU s)
    text = json.dumps(trace, default=lambda d: int(d) if d == int(d) else float(d))
    with gzip.open(dst, "wt", encoding="utf-8", compresslevel=1) as fh:  # level 9: 6.4 CPU s, 1: 5.8
        fh.write(text)
    return dst


def kineto_steps(path):
    """(name, start ns, end ns) of each ProfilerStep, once (the earliest of the CPU range and its GPU copy)."""
    events = kineto_events(path)
    first = {}
    for e in events:
        if e.get("ph") == "X" and str(e.get("name")).startswith("ProfilerStep#"):
            s = us_to_ns(e["ts"])
            if e["name"] not in first or s < first[e["name"]][0]:
                first[e["name"]] = (s, s + us_to_ns(e["dur"]))
    return sorted((s, e, n) for n, (s, e) in first.items())


def step_of(steps, ts):
    for i, (s, e, n) in enumerate(steps, 1):
        if s <= ts < e:
            return i, n
    return None, None


def leak_walk(mem, steps, skip=1, min_iterations=3, min_growth=1 << 20):
    """Per device: the end level of each steady-state step (after the last event in it) and the
    leak verdict, from the capture's events (running sum of Bytes, or Total Allocated)."""
    out = {}
    for dev in sorted({m["device"] for m in mem}):
        level, ends = 0, {}
        for m in mem:
            if m["device"] != dev:
                continue
            level = m["total"] if m["total"] is not None else level + m["bytes"]
            i, n = step_of(steps, m["ts"])
            if i is not None and i > skip:
                ends[i] = (n, level)
        seq = [ends[i] for i in sorted(ends)]
        rising = all(b[1] > a[1] for a, b in zip(seq, seq[1:]))
        leak = len(seq) >= min_iterations and rising and seq[-1][1] - seq[0][1] >= min_growth
        out[dev] = (seq, leak)
    return out


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    """tests/derive/test_memory.py's workspace (one ingest for both modules; it holds Qwen as
    well) with the leaky copy of ResNet added."""
    db, mine, theirs = memory_workspace(tmp_path_factory)
    names = {"resnet": "resnet_a", "resnet_b": "resnet_b", "bert": "bert", "qwen": "qwen",
             "profile1": "extrap_profile1", "con_kernel": "extrap_con_kernel"}
    ids = {k: mine[v] for k, v in names.items()}
    paths = {k: theirs[v] for k, v in names.items()}
    assert [str(paths[k]) for k in ("resnet", "resnet_b", "bert", "profile1", "con_kernel")] == \
        [str(trace_file(r)) for r in (RESNET, RESNET_B, BERT, PROFILE1, CON_KERNEL)]
    paths["leaky"] = leaky_copy(paths["resnet"], tmp_path_factory.mktemp("memrules") / "leaky.pt.trace.json.gz")
    [res] = traceql.ingest([paths["leaky"]], db=db)
    ids["leaky"] = res.trace_id
    with traceql.open(db) as w:
        yield w, ids, paths


def evidence(w, rule, **params):
    return analyze.analyze(w, [rule], params=params).evidence[rule].to_pylist()


@pytest.mark.parametrize("name", ["resnet", "resnet_b", "leaky"])
def test_leak_on_resnet(real, name):
    w, ids, paths = real
    mem, _ = kineto_walk(paths[name])
    steps = kineto_steps(paths[name])
    assert [n for _, _, n in steps][:1] in (["ProfilerStep#5"], ["ProfilerStep#16"])
    walked = leak_walk(mem, steps)
    assert list(walked) == [0]
    seq, leak = walked[0]
    assert len(seq) == 5
    rows = [r for r in evidence(w, "memory_leak") if r["trace_id"] == ids[name]]
    assert leak == (name == "leaky")
    if not leak:
        assert rows == []
        return
    growth = seq[-1][1] - seq[0][1]
    assert growth >= 4 * LEAK  # the leak shows whatever the steps do besides
    assert rows == [dict(trace_id=ids[name], device_id=0, iterations=5, first_iteration=seq[0][0],
                         last_iteration=seq[-1][0], first_end_bytes=seq[0][1], last_end_bytes=seq[-1][1],
                         growth_bytes=growth, growth_per_iteration_bytes=growth // 4, unfreed_bytes=None,
                         unfreed_allocations=None, holder=None, recoverable_ns=0, note=None)]


def test_leak_thresholds_on_resnet(real):
    """The unperturbed ResNet's end levels as the walk finds them; the rule follows min_growth_bytes
    and min_iterations on the leaky copy exactly at the walk's growth."""
    w, ids, paths = real
    seq, _ = leak_walk(kineto_walk(paths["leaky"])[0], kineto_steps(paths["leaky"]))[0]
    growth = seq[-1][1] - seq[0][1]
    hit = [r for r in evidence(w, "memory_leak", min_growth_bytes=growth) if r["trace_id"] == ids["leaky"]]
    assert [r["growth_bytes"] for r in hit] == [growth]
    assert not [r for r in evidence(w, "memory_leak", min_growth_bytes=growth + 1) if r["trace_id"] == ids["leaky"]]
    assert not [r for r in evidence(w, "memory_leak", min_iterations=6) if r["trace_id"] == ids["leaky"]
                and r["recoverable_ns"] is not None]
    plain, _ = leak_walk(kineto_walk(paths["resnet"])[0], kineto_steps(paths["resnet"]), min_growth=0)[0]
    levels = [lv for _, lv in plain]
    leaky_levels = [lv for _, lv in seq]
    # the perturbation moves each step's end level up by the leaks before it
    assert [b - a for a, b in zip(levels, leaky_levels)] == [LEAK * k for k in range(2, 7)]


def test_leak_abstains_without_iterations(real):
    w, ids, paths = real
    rows = {r["trace_id"]: r for r in evidence(w, "memory_leak") if r["recoverable_ns"] is None}
    assert len(kineto_steps(paths["qwen"])) < 3  # Qwen's steps, by the json walk: too few as well
    assert sorted(rows) == sorted([ids["bert"], ids["qwen"], ids["profile1"], ids["con_kernel"]])
    assert rows[ids["bert"]]["iterations"] == 0 and "fewer than min_iterations = 3" in rows[ids["bert"]]["note"]


def capacity(name, path):
    if name.startswith("profile1") or name.startswith("con_kernel"):
        return source_rows(path, "SELECT totalMemory FROM TARGET_INFO_GPU WHERE cuDevice = 0 AND totalMemory > 0")[0][0]
    with gzip.open(path, "rb") as fh:
        props = json.load(fh)["deviceProperties"]
    return next(p["totalGlobalMem"] for p in props if p["id"] == 0)


def reserved_walk(path):
    """Total Reserved of GPU 0's '[memory]' events in (ts, file) order; [] when not recorded."""
    events = kineto_events(path)
    mem = [(us_to_ns(e["ts"]), i, e["args"]) for i, e in enumerate(events)
           if e.get("name") == "[memory]" and e.get("ph") == "i" and e["args"]["Device Type"] == 1]
    return [(ts, a["Total Reserved"]) for ts, _, a in sorted(mem, key=lambda m: m[:2]) if "Total Reserved" in a]


@pytest.mark.parametrize("name", ["resnet", "bert", "profile1", "con_kernel"])
def test_peak_against_capacity(real, name):
    w, ids, paths = real
    mem = nsys_walk(paths[name]) if name in ("profile1", "con_kernel") else kineto_walk(paths[name])[0]
    level, peak = 0, 0
    for m in mem:
        level = m["total"] if m["total"] is not None else level + m["bytes"]
        peak = max(peak, level)
    reserved = [r for _, r in reserved_walk(paths[name])] if name in ("resnet", "bert") else []
    in_use = max([peak, *reserved])
    cap = capacity(name, paths[name])
    pct = round(100 * in_use / cap, 2)
    assert pct < 90  # none of these runs came near its GPU's memory
    assert not [r for r in evidence(w, "memory_peak") if r["trace_id"] == ids[name]]
    rows = [r for r in evidence(w, "memory_peak", headroom_pct=100 - pct + 0.001) if r["trace_id"] == ids[name]]
    assert [(r["device_id"], r["peak_bytes"], r["peak_reserved_bytes"], r["capacity_bytes"], r["in_use_bytes"],
             float(r["peak_pct"]), r["headroom_bytes"], r["recoverable_ns"]) for r in rows] == \
        [(0, peak, max(reserved) if reserved else None, cap, in_use, pct, cap - in_use, 0)]
    assert not [r for r in evidence(w, "memory_peak", headroom_pct=100 - pct - 0.01) if r["trace_id"] == ids[name]]


def test_churn_on_nsys_driver_allocations(real):
    """profile1's driver allocations inside its one 'main' range, as one iteration: pairs of each
    size from sqlite3; con_kernel has no NVTX range and abstains."""
    w, ids, paths = real
    (start, end), = source_rows(paths["profile1"], "SELECT e.start, e.end FROM NVTX_EVENTS e "
                                "LEFT JOIN StringIds s ON s.id = e.textId WHERE coalesce(e.text, s.value) = 'main'")
    sizes = source_rows(paths["profile1"], "SELECT bytes, sum(memoryOperationType = 0), sum(memoryOperationType = 1) "
                        "FROM CUDA_GPU_MEMORY_USAGE_EVENTS WHERE memKind = 2 AND start >= ? AND start < ? "
                        "GROUP BY bytes ORDER BY bytes", start, end)
    expect = sorted(((size, min(a, f), a, f) for size, a, f in sizes if min(a, f) >= 1), key=lambda x: -x[0] * x[1])
    assert expect  # 11 pairs of 4 MB and 4 of 40 kB
    rows = evidence(w, "allocator_churn", name="main", skip_iterations=0, min_pairs=1)
    mine = [r for r in rows if r["trace_id"] == ids["profile1"]]
    assert [(r["size_bytes"], r["pairs"], r["allocations"], r["frees"]) for r in mine] == expect
    assert {(r["device_id"], r["iteration"], r["source"], r["churned_bytes"] == r["pairs"] * r["size_bytes"])
            for r in mine} == {(0, "main", "cudaMalloc", True)}
    top = max(p for _, p, _, _ in expect)
    assert not [r for r in evidence(w, "allocator_churn", name="main", skip_iterations=0, min_pairs=top + 1)
                if r["trace_id"] == ids["profile1"] and r["recoverable_ns"] is not None]
    (note,) = [r["note"] for r in rows if r["trace_id"] == ids["con_kernel"]]
    assert "no steady-state iteration" in note and "NVTX ranges named main" in note


def test_churn_on_pytorch(real):
    """ResNet 2021 records no Total Reserved: the rule abstains. bert-small's one step, taken as
    the iteration: the changes of Total Reserved inside it, by size, from the json walk."""
    w, ids, paths = real
    assert reserved_walk(paths["resnet"]) == []
    rows = evidence(w, "allocator_churn")
    notes = {r["trace_id"]: r["note"] for r in rows if r["recoverable_ns"] is None}
    assert "no Total Reserved" in notes[ids["resnet"]] and "no Total Reserved" in notes[ids["resnet_b"]]
    assert "no steady-state iteration (after skipping 1)" in notes[ids["bert"]]
    (s, e, _), = kineto_steps(paths["bert"])
    res = reserved_walk(paths["bert"])
    counts = {}
    for (_, before), (ts, after) in zip(res, res[1:]):
        if s <= ts < e and after != before:
            a, f = counts.get(abs(after - before), (0, 0))
            counts[abs(after - before)] = (a + (after > before), f + (after < before))
    expect = sorted(((size, min(a, f)) for size, (a, f) in counts.items() if min(a, f) >= 1),
                    key=lambda x: (-x[0] * x[1], x[0]))
    got = [(r["size_bytes"], r["pairs"]) for r in evidence(w, "allocator_churn", skip_iterations=0, min_pairs=1)
           if r["trace_id"] == ids["bert"]]
    assert got == expect


# ------------------------------------------------------------------------ generated traces

@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("memgen")
    cases = {"leak": dict(leak_bytes=3 << 20), "clean": {}, "churn": dict(churn=3), "churn_once": dict(churn=1),
             "peak": dict(peak_bytes=15 << 30), "below": dict(peak_bytes=14 << 30)}
    written = {k: generate(tmp / f"{k}.json", **v) for k, v in cases.items()}
    db = tmp / "ws.duckdb"
    ids = {k: r.trace_id for k, r in zip(cases, traceql.ingest([tmp / f"{k}.json" for k in cases], db=db))}
    with traceql.open(db) as w:
        yield w, ids, written, db


def test_generated_findings_fire_and_do_not(generated):
    w, ids, written, _ = generated
    a = analyze.analyze(w, RULES)
    found = {(r["trace_id"], r["rule"]): r["findings"] for r in a.findings.to_pylist()}
    fired = {(k, rule) for k, t in ids.items() for rule in RULES if found[(t, rule)]}
    assert fired == {("leak", "memory_leak"), ("churn", "allocator_churn"), ("peak", "memory_peak")}
    assert a.failed(["memory_leak"]) == ["memory_leak"]

    levels = written["leak"]["levels"]
    ends = {}
    for step, level in levels:
        ends[step] = level
    (row,) = a.evidence["memory_leak"].to_pylist()
    assert row == dict(trace_id=ids["leak"], device_id=0, iterations=5, first_iteration="ProfilerStep#2",
                       last_iteration="ProfilerStep#6", first_end_bytes=ends[2], last_end_bytes=ends[6],
                       growth_bytes=4 * (3 << 20), growth_per_iteration_bytes=3 << 20, unfreed_bytes=5 * (3 << 20),
                       unfreed_allocations=5, holder="ProfilerStep#* > aten::cat", recoverable_ns=0, note=None)
    churn = [r for r in a.evidence["allocator_churn"].to_pylist() if r["recoverable_ns"] is not None]
    assert [(r["trace_id"], r["iteration"], r["size_bytes"], r["pairs"], r["churned_bytes"]) for r in churn] == \
        [(ids["churn"], f"ProfilerStep#{i}", SEGMENT, 3, 3 * SEGMENT) for i in range(2, 7)]
    (peak,) = a.evidence["memory_peak"].to_pylist()
    assert (peak["trace_id"], peak["peak_bytes"], peak["capacity_bytes"], float(peak["peak_pct"])) == \
        (ids["peak"], 15 << 30, 16 << 30, 93.75)
    # thresholds move the verdicts exactly
    assert [r["trace_id"] for r in evidence(w, "memory_peak", headroom_pct=12.5)] == [ids["peak"], ids["below"]]
    assert [r["trace_id"] for r in evidence(w, "allocator_churn", min_pairs=1)
            if r["recoverable_ns"] is not None] == [ids["churn"]] * 5 + [ids["churn_once"]] * 5
    assert evidence(w, "memory_leak", min_growth_bytes=4 * (3 << 20) + 1) == []
    assert ACTIVATION not in {r["size_bytes"] for r in evidence(w, "allocator_churn", min_pairs=1)}


def test_cli_text_and_fail_on(generated):
    _, ids, _, db = generated
    out = cli("analyze", "--db", db, "--trace", ids["leak"], "--rule", "memory_leak", "--fail-on", "memory_leak",
              env={"COLUMNS": "100"})
    assert out.returncode == 8, out.stderr
    assert "memory_leak: 1 GPU, growth 12.6 MB" in out.stdout
    assert "ProfilerStep#* > aten::cat" in out.stdout
    ok = cli("analyze", "--db", db, "--trace", ids["clean"], "--rule", "memory_leak", "--rule", "memory_peak",
             "--rule", "allocator_churn", "--fail-on", "any")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    quiet = " ".join(ok.stdout.split())
    assert "No findings: allocator_churn (" in quiet and ", memory_leak (" in quiet and ", memory_peak (headroom_pct=10%)" in quiet


# ------------------------------------------------------------------------ Perfetto counters

def exported_counters(w, trace_id, tmp_path):
    """The 'C' events of `traceql export --format perfetto` of one trace, after the structure
    check: (on GPU 0's process, ts in ns on the trace clock, allocated, reserved), and the file."""
    from ..outputs.test_timeline import check_structure, ns

    out = tmp_path / f"t{trace_id}.json"
    run = cli("export", "--db", w.path, "--format", "perfetto", "--trace", trace_id, "-o", out)
    assert run.returncode == 0, run.stderr
    doc = json.loads(out.read_text())
    by_phase = check_structure(doc)
    origin = doc["otherData"]["origin_ns"]
    gpu = {ev["pid"] for ev in by_phase["M"] if ev["name"] == "process_name" and ev["args"]["name"].startswith("GPU 0")}
    got = [(ev["pid"] in gpu, ns(ev["ts"]) + origin, ev["args"].get("allocated"), ev["args"].get("reserved"))
           for ev in by_phase["C"]]
    stored = w.sql("SELECT ts, arg_max(allocated, memory_event_id) AS a, arg_max(reserved, memory_event_id) AS r "
                   "FROM memory_event WHERE trace_id = $t AND mem_kind = 'Device' GROUP BY ts ORDER BY ts",
                   {"t": trace_id}).to_pylist()
    assert got == [(True, r["ts"], r["a"], r["r"]) for r in stored]
    assert doc["otherData"]["events"]["memory"] == len(got)
    return got


def test_perfetto_memory_counters_nsys(real, tmp_path):
    """`export --format perfetto` draws each GPU's memory as a counter track of its process: one
    'C' event per time, the level after the last event then, as memory_event holds it and as the
    running sum of profile1's device allocations minus frees (sqlite3) finds it."""
    w, ids, paths = real
    got = exported_counters(w, ids["profile1"], tmp_path)
    level, last = 0, {}
    for m in nsys_walk(paths["profile1"]):
        level += m["bytes"]
        last[m["ts"]] = level
    assert [(ts, a, r) for _, ts, a, r in got] == [(ts, last[ts], None) for ts in sorted(last)]
    assert len(got) == 30 and max(a for _, _, a, _ in got) == 20_000_000


def test_perfetto_memory_counters_reserved(generated, tmp_path):
    """The generated churn trace: allocated and reserved as its '[memory]' events record them (json)."""
    w, ids, written, db = generated
    got = exported_counters(w, ids["churn"], tmp_path)
    path = db.parent / "churn.json"
    events = [e for e in json.loads(path.read_text())["traceEvents"] if e["name"] == "[memory]"]
    last = {e["ts"] * 1000: (e["args"]["Total Allocated"], e["args"]["Total Reserved"]) for e in events}
    assert [(ts, a, r) for _, ts, a, r in got] == [(ts, *last[ts]) for ts in sorted(last)]
    assert {r for _, _, _, r in got} == {2 * SEGMENT, 3 * SEGMENT}


def test_job_timeline_memory_counters(tmp_path):
    """The timeline of several traces (traceql.outputs.job_timeline) draws each trace's GPU memory
    in its process group as 'GPU N memory' counters: per trace the levels of memory_event, at ts
    moved onto the job axis (ts + the trace's shift - its job's origin, otherData), and the
    running sum of each export's device allocations minus frees (sqlite3)."""
    from traceql.outputs.job_timeline import ID_STRIDE

    from ..outputs.test_timeline import check_structure, ns

    paths = [trace_file(PROFILE1), trace_file(CON_KERNEL)]
    db = tmp_path / "ws.duckdb"
    ids = [r.trace_id for r in traceql.ingest(paths, db=db)]
    out = tmp_path / "job.json"
    run = cli("export", "--db", db, "--format", "perfetto", "-o", out)
    assert run.returncode == 0, run.stderr
    doc = json.loads(out.read_text())
    by_phase = check_structure(doc, id_stride=ID_STRIDE)
    groups = {ev["pid"]: ev["args"]["name"] for ev in by_phase["M"] if ev["name"] == "process_name"}
    other = doc["otherData"]
    origin = {t: j["origin_utc_ns"] for j in other["jobs"] for t in j["trace_ids"]}
    shift = {t["trace_id"]: t["shift_ns"] for t in other["traces"]}
    with traceql.open(db) as w:
        for trace_id, path in zip(ids, paths):
            pid = next(p for p, name in groups.items() if f"trace {trace_id}" in name)
            got = [(ev["name"], ns(ev["ts"]) - shift[trace_id] + origin[trace_id], ev["args"]["allocated"])
                   for ev in by_phase["C"] if ev["pid"] == pid]
            stored = w.sql("SELECT ts, arg_max(allocated, memory_event_id) AS a FROM memory_event "
                           "WHERE trace_id = $t AND mem_kind = 'Device' GROUP BY ts ORDER BY ts",
                           {"t": trace_id}).to_pylist()
            assert got == [("GPU 0 memory", r["ts"], r["a"]) for r in stored]
            level, last = 0, {}
            for m in nsys_walk(path):
                level += m["bytes"]
                last[m["ts"]] = level
            assert [a for _, _, a in got] == [last[ts] for ts in sorted(last)]
    assert other["events"]["memory"] == len(by_phase["C"]) == 30 + 10
