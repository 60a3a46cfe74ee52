"""traceql diff on before/after pairs made from the real traces, next to nsys-ai's `diff --no-ai`.

    python bench/diff_pairs.py                      # writes bench/data/diff_pairs.json, prints a summary
    python bench/diff_pairs.py --out bench/DIFF.md  # and the markdown report

../shared/traces holds no before/after pair of one program, so the pairs are made from single
Nsight Systems exports (copies in bench/data/diff-pairs/; the originals are never written):

- halves: the export cut into two time windows, each keeping the rows (kernels, copies, memsets,
  API calls, NVTX ranges, synchronization, ...) that start inside it: the same program, one
  stretch of iterations against the next. Nothing changed: every call of a change is a false
  positive.
- halves + 20 %: the same, with one kernel (the one of the median total time among those with
  10 or more instances per half) made 20 % longer in the second half (each instance's end moved;
  what follows it on the stream is not): exactly that kernel should be called slower.
- ranks: the processes of a multi-process export, each alone (one rank of a job against another).

Per pair, both tools run as fresh child processes on the same two files: `traceql diff A B
--format json` (it ingests both into a temporary workspace) and `nsys-ai diff A B --no-ai
--format json` (bench/data/nsysai-venv, made by `make bench`; its cache is written next to the
copies). Wall and CPU seconds (user + system of the child) of each; what each calls changed.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sqlite3
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("bench_small", HERE / "small.py")
small = importlib.util.module_from_spec(_spec)
sys.modules["bench_small"] = small
_spec.loader.exec_module(small)
bench = small.bench
REPO, DATA, TRACES = bench.REPO, bench.DATA, bench.TRACES

SLOWDOWN = 1.2
# (pair name, export under ../shared/traces, 'halves' or 'ranks', slow one kernel down in B,
# for 'halves' the NVTX range whose START..END is cut in two (None: first to last kernel) and the
# NVTX range of one iteration, cut before)
CS336 = "cs336-jsun-train-fwdbwd-rtx3070ti-nsys2025.1/result.sqlite"
H100 = "nsysai-h100-2gpu-pytorch-nsys2026.2/h100_2gpu_1s.sqlite"
RESNET = "kineto-tbplugin-resnet50-2021/worker0.pt.trace.json.gz"
PAIRS = [
    ("cs336 halves", CS336, "halves", False, ("Benchmark Forward Only", "Forward")),
    ("cs336 halves, one kernel +20 %", CS336, "halves", True, ("Benchmark Forward Only", "Forward")),
    ("h100 rank 0 vs rank 1", H100, "ranks", False, None),
    ("h100 rank 0 vs rank 1, one kernel +20 %", H100, "ranks", True, None),
    ("h100 halves (two phases)", H100, "halves", False, None),
    ("resnet50 Kineto halves", RESNET, "kineto-halves", False, None),
    ("resnet50 Kineto halves, one kernel +20 %", RESNET, "kineto-halves", True, None),
]


def _tables_with(con, column: str) -> list[str]:
    out = []
    for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
        cols = [r[1] for r in con.execute(f'PRAGMA table_info("{name}")')]
        if column in cols:
            out.append(name)
    return out


def _copy(src: Path, dst: Path) -> sqlite3.Connection:
    for p in (dst, Path(str(dst) + ".nsys-cache")):
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()
    shutil.copyfile(src, dst)
    os.chmod(dst, 0o644)
    return sqlite3.connect(dst)


def _window(src: Path, range_name: str | None, step_name: str | None) -> tuple[int, int, int]:
    """(lo, mid, hi): the START..END of the NVTX range range_name (None: first to last kernel) and
    where to cut it in two: the start of the step_name range nearest its middle (between two
    iterations), else the middle."""
    con = sqlite3.connect(f"file:{src}?mode=ro", uri=True)
    text = "coalesce(n.text, s.value)"
    try:
        if range_name:
            lo, hi = con.execute(
                f'SELECT min(start), max("end") FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId '
                f"WHERE {text} = ?", (range_name,)).fetchone()
        else:
            lo, hi = con.execute('SELECT min(start), max("end") FROM CUPTI_ACTIVITY_KIND_KERNEL').fetchone()
        mid = lo + (hi - lo) // 2
        if step_name:
            starts = [t for (t,) in con.execute(
                f"SELECT start FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId WHERE {text} = ? "
                "AND start > ? AND start < ?", (step_name, lo, hi))]
            mid = min(starts, key=lambda t: abs(t - mid), default=mid)
        return lo, mid, hi
    finally:
        con.close()


def cut(src: Path, dst: Path, lo: int, hi: int) -> None:
    """dst: src with only the rows of its time-stamped tables that start in [lo, hi) (NVTX ranges:
    that lie inside it)."""
    con = _copy(src, dst)
    try:
        for table in _tables_with(con, "start"):
            con.execute(f'DELETE FROM "{table}" WHERE start < ? OR start >= ?', (lo, hi))
        # an NVTX range kept whole or not at all (one cut in two would enclose only half its work)
        if "NVTX_EVENTS" in _tables_with(con, "end"):
            con.execute('DELETE FROM NVTX_EVENTS WHERE "end" IS NOT NULL AND "end" > ?', (hi,))
        for table in _tables_with(con, "timestamp"):
            con.execute(f'DELETE FROM "{table}" WHERE timestamp < ? OR timestamp >= ?', (lo, hi))
        con.commit()
    finally:
        con.close()


def keep_process(src: Path, dst: Path, pid: int) -> None:
    """dst: src with only the rows of process pid (CUPTI rows by globalPid, the others by globalTid)."""
    con = _copy(src, dst)
    try:
        for table in _tables_with(con, "start"):
            cols = [r[1] for r in con.execute(f'PRAGMA table_info("{table}")')]
            if "globalPid" in cols:
                con.execute(f'DELETE FROM "{table}" WHERE globalPid / 16777216 % 16777216 <> ?', (pid,))
            elif "globalTid" in cols:
                con.execute(f'DELETE FROM "{table}" WHERE globalTid / 16777216 % 16777216 <> ?', (pid,))
        con.commit()
    finally:
        con.close()


def slow_down(path: Path) -> str:
    """Make one kernel 20 % longer (see the module doc); returns its name."""
    con = sqlite3.connect(path)
    try:
        rows = con.execute(
            "SELECT k.demangledName, count(*), sum(k.\"end\" - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k "
            "GROUP BY 1 HAVING count(*) >= 10 ORDER BY 3, 1").fetchall()
        name_id = rows[len(rows) // 2][0]
        con.execute('UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = start + CAST(round(("end" - start) * ?) AS INT) '
                    "WHERE demangledName = ?", (SLOWDOWN, name_id))
        con.commit()
        return con.execute("SELECT value FROM StringIds WHERE id = ?", (name_id,)).fetchone()[0]
    finally:
        con.close()


def make_pair(name: str, rel: str, how: str, slower: bool, arg, out: Path) -> dict:
    src = TRACES / rel
    stem = f"{name.split()[0]}-{how}{'-slower' if slower else ''}"
    a, b = out / f"{stem}-a.sqlite", out / f"{stem}-b.sqlite"
    info = {"pair": name, "source": rel, "how": how}
    if how == "kineto-halves":
        a, b = a.with_suffix("").with_suffix(".json.gz"), b.with_suffix("").with_suffix(".json.gz")
        info.update(kineto_halves(src, a, b, slower))
        info["a"], info["b"] = str(a), str(b)
        return info
    if how == "halves":
        lo, mid, hi = _window(src, *(arg or (None, None)))
        cut(src, a, lo, mid)
        cut(src, b, mid, hi)
        info["window_ns"] = [lo, mid, hi]
    else:
        con = sqlite3.connect(f"file:{src}?mode=ro", uri=True)
        pids = [p for (p,) in con.execute("SELECT DISTINCT globalPid / 16777216 % 16777216 FROM "
                                          "CUPTI_ACTIVITY_KIND_KERNEL ORDER BY 1")]
        con.close()
        keep_process(src, a, pids[0])
        keep_process(src, b, pids[1])
        info["pids"] = pids[:2]
    if slower:
        info["slowed"] = slow_down(b)
    info["a"], info["b"] = str(a), str(b)
    return info


def kineto_halves(src: Path, a: Path, b: Path, slower: bool, at_us: float | None = None) -> dict:
    """A PyTorch profiler trace cut at the ProfilerStep nearest its middle (at_us: at that time in
    the trace's microseconds instead, nothing left out before or after): A the steps before, B
    those after (events by their start, GPU work by its launching call's; metadata on both sides). slower: one kernel of B (the
    median total time among those with 10 or more instances) 20 % longer."""
    import gzip

    with gzip.open(src, "rt", encoding="utf-8") as fh:
        doc = json.load(fh)
    events = doc["traceEvents"]
    steps = sorted((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))) for e in events
                   if str(e.get("name", "")).startswith("ProfilerStep#") and e.get("ph") == "X")
    if at_us is not None:
        lo, hi, mid = float("-inf"), float("inf"), float(at_us)
    else:
        lo, hi, mid = steps[0][0], steps[-1][1], steps[len(steps) // 2][0]
    timed = [e for e in events if e.get("ph") != "M" and "ts" in e]
    meta = [e for e in events if e.get("ph") == "M" or "ts" not in e]
    # GPU work goes with the call that launched it (the GPU runs behind: a step's last kernels start
    # after the next step began), flows with their correlation id; everything else by its start.
    # GPU work without its launching call in the steps is left out (resnet50's first step holds 708
    # kernels launched before the profiler started)
    side = {}
    for e in timed:
        if str(e.get("cat", "")).lower() in ("runtime", "cuda_runtime", "cuda_driver"):
            corr = (e.get("args") or {}).get("correlation")
            if corr is not None and lo <= float(e["ts"]) < hi:
                side[corr] = float(e["ts"]) >= mid

    def in_b(e):
        corr = (e.get("args") or {}).get("correlation") if e.get("ph") == "X" else e.get("id")
        if str(e.get("cat", "")).lower() not in ("runtime", "cuda_runtime", "cuda_driver") and corr in side:
            return side[corr]
        return float(e["ts"]) >= mid

    gpu = ("kernel", "memcpy", "memset", "gpu_memcpy", "gpu_memset")
    timed = [e for e in timed if ((e.get("args") or {}).get("correlation") in side if str(e.get("cat", "")).lower()
                                  in gpu else lo <= float(e["ts"]) < hi)]
    halves = [[e for e in timed if not in_b(e)], [e for e in timed if in_b(e)]]
    info = {"steps": [sum(1 for s in steps if s[0] < mid), sum(1 for s in steps if s[0] >= mid)]}
    if slower:
        totals: dict = {}
        for e in halves[1]:
            if str(e.get("cat")).lower() == "kernel":
                n, t = totals.get(e["name"], (0, 0.0))
                totals[e["name"]] = (n + 1, t + float(e["dur"]))
        names = sorted((t, name) for name, (n, t) in totals.items() if n >= 10)
        info["slowed"] = names[len(names) // 2][1]
        for e in halves[1]:
            if str(e.get("cat")).lower() == "kernel" and e["name"] == info["slowed"]:
                e["dur"] = round(float(e["dur"]) * SLOWDOWN, 3)
    for path, part in ((a, halves[0]), (b, halves[1])):
        with gzip.open(path, "wt", encoding="utf-8") as fh:
            json.dump({**doc, "traceEvents": part + meta}, fh)
    return info


def run_traceql(a: Path, b: Path) -> dict:
    p = small.run([sys.executable, "-m", "traceql", "diff", str(a), str(b), "--format", "json"],
                  env={"PYTHONPATH": str(REPO)}, timeout=600)
    out = {"secs": round(p.secs, 2), "cpu": round(p.cpu, 2), "rc": p.rc}
    if p.rc != 0:
        out["problem"] = bench._failure(p)
        return out
    doc = json.loads(p.out)
    s = doc["summary"]
    out["verdict"] = s["verdict"]
    out["iterations"] = [s["a"]["iterations"], s["b"]["iterations"]]
    out["headline"] = {h["key"]: [round(h["delta_pct"], 2) if h["delta_pct"] is not None else None, h["verdict"],
                                  h["q_value"]] for h in s["headline"]}
    rows = doc["rows"]
    out["rows"] = len(rows)
    out["changed"] = [[r["section"], r["key"], r["verdict"],
                       None if r["delta_pct"] is None else round(r["delta_pct"], 1),
                       None if r["effect_pct"] is None else round(r["effect_pct"], 1), r["q_value"]]
                      for r in rows if r["changed"]]
    out["untested"] = sum(1 for r in rows if r["verdict"] == "untested")
    return out


def run_nsysai(n, a: Path, b: Path) -> dict:
    if n.problem:
        return {"problem": n.problem}
    p = small.run([str(n.exe), "diff", str(a), str(b), "--no-ai", "--format", "json",
                 "--limit", "1000"], env=n.env(), timeout=900)
    out = {"secs": round(p.secs, 2), "cpu": round(p.cpu, 2), "rc": p.rc}
    try:
        doc = json.loads(p.out)
    except ValueError:
        out["problem"] = bench._failure(p)
        return out
    out["verdict"] = doc.get("verdict")
    out["step_time_pct"] = (doc.get("step_time") or {}).get("delta_pct")
    out["regressions"] = [[r.get("demangled") or r.get("key"), r.get("classification"), r.get("delta_ns")]
                          for r in doc.get("top_regressions") or []]
    out["improvements"] = [[r.get("demangled") or r.get("key"), r.get("classification"), r.get("delta_ns")]
                           for r in doc.get("top_improvements") or []]
    out["nvtx_changes"] = len(doc.get("nvtx_regressions") or []) + len(doc.get("nvtx_improvements") or [])
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", type=Path, default=DATA / "diff_pairs.json")
    ap.add_argument("--no-nsys-ai", action="store_true")
    ap.add_argument("--only", metavar="WORD", default=None, help="only the pairs whose name contains WORD")
    ap.add_argument("--nsys-ai-data", type=Path, default=DATA, metavar="DIR",
                    help="the folder holding nsysai-venv and nsysai-home (`make bench` makes them in bench/data)")
    a = ap.parse_args(argv)
    out = DATA / "diff-pairs"
    out.mkdir(parents=True, exist_ok=True)
    n = bench.find_nsysai(a.nsys_ai_data / "nsysai-venv", a.nsys_ai_data / "nsysai-home")
    if a.no_nsys_ai:
        n.problem = "skipped (--no-nsys-ai)"
    results = []
    for name, rel, how, slower, arg in PAIRS:
        if a.only and a.only not in name:
            continue
        if not (TRACES / rel).exists():
            print(f"{name}: {rel} not found, skipped", file=sys.stderr)
            continue
        info = make_pair(name, rel, how, slower, arg, out)
        info["traceql"] = run_traceql(Path(info["a"]), Path(info["b"]))
        info["nsys-ai"] = (run_nsysai(n, Path(info["a"]), Path(info["b"])) if how != "kineto-halves"
                           else {"problem": "reads no PyTorch profiler traces"})
        results.append(info)
        t = info["traceql"]
        print(f"{name}: traceql {t.get('verdict', t.get('problem'))}, {len(t.get('changed', []))} rows changed, "
              f"{t.get('secs')} s ({t.get('cpu')} s CPU); nsys-ai rc {info['nsys-ai'].get('rc')}, "
              f"{info['nsys-ai'].get('secs')} s ({info['nsys-ai'].get('cpu')} s CPU)", file=sys.stderr)
    a.json.write_text(json.dumps({"nsys-ai": n.version, "machine": bench.machine(), "pairs": results}, indent=1, default=str) + "\n")
    print(f"wrote {a.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
