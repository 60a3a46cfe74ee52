"""Everyday traces: what a user waits for on the few-MB exports most people have.

    make bench-small                          # writes bench/SMALL.md
    python bench/small.py --runs 5 --out bench/SMALL.md --json bench/data/small.json

Inputs: the three largest Nsight Systems exports in ../shared/traces (2-4 MB). Per input, in
one run and in this order, every figure the wall time of a fresh child process (Python
start-up, imports, opening the workspace or file, printing), best of --runs:

1. SQLite: Python's sqlite3 scanning every column ingest reads (the floor, as in
   bench/run.py), and the nsys-stats-style reports as SQL over the export (kernel, api,
   summary, range), run in-process on the open file: the least any tool reading the export
   must do (a command adds about 0.02 s of Python start-up to these);
2. traceql: `ingest` into a new workspace, start-up (`traceql --version` and `sql 'SELECT 1'`),
   then `summary` and every `report --by NAME` with its defaults, printing the table to a file
   as a person would see it (COLUMNS=120);
3. nsys-ai (bench/data/nsysai-venv, made by `make bench`): `warm` on a cold cache (its
   ingest), `--help` (its start-up: it has no --version), `skill run top_kernels` (kernel),
   `skill run nvtx_layer_breakdown` (range) and `summary`.

Goals (issue 20): ingest <= 0.5 s, every report <= 0.2 s, start-up (`sql 'SELECT 1'`) <= 0.15 s,
and traceql faster than nsys-ai on every command both have.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import shutil
import sqlite3
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("bench_run", HERE / "run.py")
bench = importlib.util.module_from_spec(_spec)
sys.modules["bench_run"] = bench  # dataclasses look their module up here
_spec.loader.exec_module(bench)

REPO, DATA, TRACES = bench.REPO, bench.DATA, bench.TRACES
REPORTS = ("kernel", "api", "memcpy", "memset", "gpu", "stream", "device", "thread", "launch", "range", "op",
           "kernel-op", "layer")
NSYSAI = {"kernel": ["skill", "run", "top_kernels"], "range": ["skill", "run", "nvtx_layer_breakdown"],
          "summary": ["summary"], "startup": ["--help"]}
BASELINE = ("kernel", "api", "summary", "range")
GOALS = {"ingest": 0.5, "report": 0.2, "startup": 0.15}


def inputs(n: int = 3) -> list[Path]:
    files = sorted(TRACES.glob("*/*.sqlite"), key=lambda p: -p.stat().st_size) if TRACES.is_dir() else []
    return files[:n]


def run(args: list[str], env: dict | None = None, timeout: float | None = None, cwd: Path = REPO):
    """bench/run.py's run_child, plus the CPU seconds (user + system, all threads) the child
    used: on a machine that other work keeps busy, wall time grows while CPU time barely does."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = bench.run_child(args, env=env, timeout=timeout, cwd=cwd)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    p.cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return p


def best(fn, runs: int) -> dict:
    results = [fn() for _ in range(runs)]
    ok = [r for r in results if r.rc == 0]
    if not ok:
        return dict(secs=None, cpu=None, problem=bench._failure(results[-1]), load=results[-1].load)
    b = min(ok, key=lambda r: r.secs)
    return dict(secs=b.secs, cpu=min(r.cpu for r in ok), runs=len(results), rss_mb=max(r.rss_mb for r in ok),
                load=b.load, all=[round(r.secs, 4) for r in ok])


def measure(src: Path, data: Path, nsysai, runs: int) -> dict:
    db = data / f"small_{src.stem}.duckdb"
    out: dict = dict(name=src.parent.name, file=src.name, size_mb=src.stat().st_size / 1e6,
                     counts=bench.source_counts(src))
    bench.log(f"{src.parent.name}: SQLite")
    _, out["floor"] = bench.best_of(lambda: bench.measure_floor(src), runs, 30)
    out["baseline"] = {}
    for op in BASELINE:
        _, b = bench.best_of(lambda op=op: bench.measure_baseline(src, op, 60.0), runs, 30)
        out["baseline"][op] = b
    # as users run it: bytecode cached (a shell with PYTHONDONTWRITEBYTECODE=1 would compile every
    # edited module again at each start), the table fitted to 120 columns
    env = {"PYTHONPATH": str(REPO), "COLUMNS": "120", "PYTHONDONTWRITEBYTECODE": ""}
    cmd = [sys.executable, "-m", "traceql"]

    def ingest():
        for p in (db, db.with_name(db.name + ".wal")):
            p.unlink(missing_ok=True)
        return run(cmd + ["--db", str(db), "ingest", str(src)], env=env)

    bench.log(f"{src.parent.name}: traceql")
    t: dict = {"ingest": best(ingest, runs)}
    t["version"] = best(lambda: run(cmd + ["--version"], env=env), runs)
    t["startup"] = best(lambda: run(cmd + ["--db", str(db), "sql", "SELECT 1"], env=env), runs)
    t["summary"] = best(lambda: run(cmd + ["--db", str(db), "summary"], env=env), runs)
    for by in REPORTS:
        t[by] = best(lambda by=by: run(cmd + ["--db", str(db), "report", "--by", by], env=env), runs)
    out["traceql"] = t
    if nsysai is not None and not nsysai.problem:
        bench.log(f"{src.parent.name}: nsys-ai")
        path = bench.nsysai_input(src, data)
        nsyenv = {**nsysai.env(), "PYTHONDONTWRITEBYTECODE": ""}
        cache = path.with_suffix(".nsys-cache")

        def warm():
            shutil.rmtree(cache, ignore_errors=True)
            return run([str(nsysai.exe), "warm", str(path)], env=nsyenv, timeout=600, cwd=data)

        n: dict = {"ingest": best(warm, runs)}
        for op, args in NSYSAI.items():
            tail = [] if op == "startup" else [str(path)]
            n[op] = best(lambda args=args, tail=tail: run([str(nsysai.exe)] + args + tail,
                                                                     env=nsyenv, timeout=600, cwd=data), runs)
        out["nsysai"] = n
    else:
        out["nsysai"] = dict(problem=nsysai.problem if nsysai is not None else "not measured (--no-nsys-ai)")
    return out


# -- the report -----------------------------------------------------------------------------

def fs(x) -> str:
    return "—" if x is None else f"{x:.3f}"


def verdict(secs, goal) -> str:
    if secs is None:
        return "—"
    return "met" if secs <= goal else f"missed by {secs - goal:.3f} s ({secs / goal:.1f}×)"


def render(results: list[dict], meta: dict) -> str:
    L: list[str] = []
    add = L.append
    add("# Everyday traces: traceql, nsys-ai and SQLite on the three largest real exports")
    add("")
    add(f"Written by `{meta['command']}` on {meta['date']}, measuring traceql {meta['rev']}. Machine: "
        f"{meta['machine']}. Python {meta['python']}, DuckDB {meta['duckdb']}, SQLite {meta['sqlite']}"
        + (f", nsys-ai {meta['nsysai']}" if meta.get("nsysai") else "") + ". "
        f"Every time is the wall time in seconds of a fresh process, best of {meta['runs']} "
        "(`bench/small.py` says what each command is); SQLite baselines run in-process on the open file. "
        "`load` is the 1-minute load average when the measurement started (the benchmark itself "
        "accounts for about 1 on this 2-core machine).")
    add("")
    add("| input | size (MB) | kernels | API calls | NVTX events |")
    add("|---|---:|---:|---:|---:|")
    for r in results:
        c = r["counts"]
        add(f"| {r['name']} | {r['size_mb']:.1f} | {c['kernels']:,} | {c['api']:,} | {c['nvtx']:,} |")
    add("")
    add("## Side by side")
    add("")
    add("| command | " + " | ".join(f"{r['name']}: traceql / nsys-ai / SQLite" for r in results) + " |")
    add("|---|" + "---:|" * len(results))
    rows = [("ingest (nsys-ai: warm; SQLite: floor scan)", "ingest", "ingest", "floor"),
            ("start-up (traceql `--version`, nsys-ai `--help`)", "version", "startup", None),
            ("start-up (`sql 'SELECT 1'`)", "startup", None, None),
            ("summary", "summary", "summary", "summary")]
    rows += [(f"report --by {by}", by, by if by in NSYSAI else None, by if by in BASELINE else None)
             for by in REPORTS]
    for label, t_key, n_key, b_key in rows:
        cells = []
        for r in results:
            t = r["traceql"][t_key]["secs"]
            n = (r["nsysai"].get(n_key) or {}).get("secs") if n_key and "problem" not in r["nsysai"] else None
            if b_key == "floor":
                b = r["floor"]["secs"]
            else:
                b = r["baseline"][b_key]["secs"] if b_key else None
            cells.append(f"{fs(t)} / {fs(n)} / {fs(b)}")
        add(f"| {label} | " + " | ".join(cells) + " |")
    add("")
    add("CPU seconds (user + system, every thread) of the same commands, best of the runs: a figure "
        "that other work on the machine barely changes, unlike wall time.")
    add("")
    add("| command | " + " | ".join(f"{r['name']}: traceql / nsys-ai" for r in results) + " |")
    add("|---|" + "---:|" * len(results))
    for label, t_key, n_key, _ in rows:
        cells = []
        for r in results:
            t = r["traceql"][t_key].get("cpu")
            n = (r["nsysai"].get(n_key) or {}).get("cpu") if n_key and "problem" not in r["nsysai"] else None
            cells.append(f"{fs(t)} / {fs(n)}")
        add(f"| {label} | " + " | ".join(cells) + " |")
    add("")
    add("## Goals")
    add("")
    add("Verdicts on wall time; CPU seconds in brackets.")
    add("")
    add("| goal | input | measured | verdict |")
    add("|---|---|---:|---|")
    for r in results:
        t = r["traceql"]
        def m(k):
            return f"{fs(t[k]['secs'])} ({fs(t[k].get('cpu'))})"

        add(f"| ingest ≤ 0.5 s | {r['name']} | {m('ingest')} | {verdict(t['ingest']['secs'], 0.5)} |")
        add(f"| start-up ≤ 0.15 s (`sql 'SELECT 1'`) | {r['name']} | {m('startup')} "
            f"| {verdict(t['startup']['secs'], 0.15)} |")
        add(f"| start-up ≤ 0.15 s (`--version`) | {r['name']} | {m('version')} "
            f"| {verdict(t['version']['secs'], 0.15)} |")
        worst = max(("summary",) + REPORTS, key=lambda k: t[k]["secs"] or 0)
        within = sum(1 for k in ("summary",) + REPORTS if (t[k]["secs"] or 99) <= 0.2)
        add(f"| every report ≤ 0.2 s (slowest: {worst}; {within} of {len(REPORTS) + 1} within) | {r['name']} "
            f"| {m(worst)} | {verdict(t[worst]['secs'], 0.2)} |")
        n = r["nsysai"]
        if "problem" in n:
            add(f"| faster than nsys-ai | {r['name']} | nsys-ai: {n['problem']} | — |")
            continue
        for key, label in (("ingest", "ingest vs warm"), ("kernel", "report --by kernel vs top_kernels"),
                           ("range", "report --by range vs nvtx_layer_breakdown"), ("summary", "summary"),
                           ("version", "start-up (--version vs --help)")):
            nk = "startup" if key == "version" else key
            ts, ns = t[key]["secs"], (n.get(nk) or {}).get("secs")
            if ts is None or ns is None:
                why = (n.get(nk) or {}).get("problem")
                add(f"| faster than nsys-ai: {label} | {r['name']} | — | nsys-ai: {why} |")
                continue
            add(f"| faster than nsys-ai: {label} | {r['name']} | {fs(ts)} vs {fs(ns)} "
                f"| {'met' if ts < ns else 'missed'} (nsys-ai ÷ traceql = {ns / ts:.2f}) |")
    add("")
    add("Loads during the traceql measurements: " + "; ".join(
        f"{r['name']}: ingest {r['traceql']['ingest']['load']:.2f}, reports "
        f"{min(r['traceql'][k]['load'] for k in REPORTS):.2f}-{max(r['traceql'][k]['load'] for k in REPORTS):.2f}"
        for r in results) + ".")
    return "\n".join(L) + "\n"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--inputs", type=int, default=3, help="the N largest .sqlite exports of ../shared/traces")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--no-nsys-ai", action="store_true")
    ap.add_argument("--nsys-ai-venv", type=Path, default=DATA / "nsysai-venv")
    ap.add_argument("--wait-load", type=float, default=None, help="first wait until the load average is below this")
    ap.add_argument("--wait-max", type=float, default=600.0)
    ap.add_argument("--render", type=Path, default=None, metavar="JSON", help="only write the report again")
    args = ap.parse_args(argv)
    if args.render:
        saved = json.loads(args.render.read_text())
        text = render(saved["results"], saved["meta"])
    else:
        import duckdb

        srcs = inputs(args.inputs)
        if not srcs:
            raise SystemExit(f"no exports in {TRACES}")
        nsysai = None
        if not args.no_nsys_ai:
            nsysai = bench.find_nsysai(args.nsys_ai_venv, args.nsys_ai_venv.with_name("nsysai-home"))
            if nsysai.problem:
                bench.log(f"nsys-ai: {nsysai.problem}")
        if args.wait_load is not None:
            bench.wait_for_quiet(args.wait_load, time.time() + args.wait_max)
        DATA.mkdir(parents=True, exist_ok=True)
        results = [measure(src, DATA, nsysai, args.runs) for src in srcs]
        cmd = "make bench-small" if os.environ.get("MAKELEVEL") else "python bench/small.py"
        meta = dict(command=f"{cmd} ({' '.join(argv if argv is not None else sys.argv[1:])})".replace(" ()", ""),
                    date=time.strftime("%Y-%m-%d %H:%M"), machine=bench.machine(), rev=bench.traceql_revision(),
                    python=platform.python_version(), duckdb=duckdb.__version__, sqlite=sqlite3.sqlite_version,
                    nsysai=nsysai.version if nsysai is not None and not nsysai.problem else "", runs=args.runs)
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(dict(meta=meta, results=results), indent=1, default=str))
        text = render(results, meta)
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
