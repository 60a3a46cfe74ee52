"""The first answer about a new file, traceql against nsys-ai 0.3.0 and the SQLite floor, in one run.

    python bench/first.py --runs 3 --out bench/FIRST.md --json bench/data/first.json
    python bench/first.py --runs 1 --sizes 250000 1000000 --out bench/FIRST.md   # with the scaling curve

What a user waits for after `nsys export`: the answer about a new file in one command
(`traceql report --by kernel FILE`, `--by range`, `--by op`, `summary FILE`: the file ingested into a
fresh workspace, then answered, in one process), against nsys-ai's
answer on a cold cache (its cache folder removed first: `skill run top_kernels`, `skill run
nvtx_layer_breakdown`, `summary`; it has no op report). Inputs: the three largest Nsight Systems
exports in ../shared/traces and, with --sizes, the generated PyTorch-shaped exports of
fixtures/gen_torch.py (bench/data/torch_<kernels>.sqlite, made by bench/scaling.py). traceql and
nsys-ai run in turn, A B A B, --runs times; every figure is the median, with the CPU seconds (user +
system of every process of the answer, os.wait4): the machine is shared and its load (given per
row) stretches wall time far more than CPU time.

Also measured: the same first kernel answer in two commands (`traceql ingest FILE`, then the
report: two processes, as before a report took a file), start-up (`--version`, `sql 'SELECT 1'`,
each answer's report from a workspace of each export, against `python -c pass` and `python -c
'import duckdb'`), and with --sizes the full ingest (TRACEQL_DERIVE=eager: every derived table)
per size: CPU seconds, ns per kernel, peak RSS, and the SQLite floor (Python's sqlite3 scanning
every column ingest reads, bench/run.py).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run as bench  # noqa: E402 - bench/run.py, next to this file

REPO, DATA, TRACES = bench.REPO, bench.DATA, bench.TRACES
ANSWERS = {"kernel": ["report", "--by", "kernel"], "range": ["report", "--by", "range"],
           "op": ["report", "--by", "op"], "summary": ["summary"]}
NSYSAI = {"kernel": ["skill", "run", "top_kernels"], "range": ["skill", "run", "nvtx_layer_breakdown"],
          "op": None, "summary": ["summary"]}
ENV = {"PYTHONPATH": str(REPO), "COLUMNS": "120", "PYTHONDONTWRITEBYTECODE": ""}


def small_inputs(n: int = 3) -> list[Path]:
    files = sorted(TRACES.glob("*/*.sqlite"), key=lambda p: -p.stat().st_size) if TRACES.is_dir() else []
    return files[:n]


def _sum(procs) -> dict:
    failed = next((p for p in procs if p.rc != 0), None)  # the first: a failed ingest, not the report after it
    return dict(secs=sum(p.secs for p in procs), cpu=sum(p.cpu for p in procs), rss_mb=max(p.rss_mb for p in procs),
                load=procs[0].load, ok=failed is None, err="" if failed is None else failed.err[-300:])


def traceql_first(src: Path, answer: str, two: bool = False) -> dict:
    """traceql's first ANSWER about SRC on a fresh workspace: one command (`traceql ANSWER SRC`),
    or with TWO `traceql ingest SRC` and then the answer."""
    db = DATA / f"first_{os.getpid()}.duckdb"
    for p in (db, db.with_name(db.name + ".wal")):
        p.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "traceql", "--db", str(db)]
    try:
        if not two:
            return _sum([bench.run_child(cmd + ANSWERS[answer] + [str(src)], env=ENV, timeout=3600)])
        return _sum([bench.run_child(cmd + ["ingest", str(src)], env=ENV, timeout=3600),
                     bench.run_child(cmd + ANSWERS[answer], env=ENV, timeout=3600)])
    finally:
        db.unlink(missing_ok=True)


def nsysai_first(n: bench.NsysAi, src: Path, answer: str) -> dict | None:
    if NSYSAI[answer] is None:
        return None
    path = bench.nsysai_input(src, DATA)
    shutil.rmtree(path.with_suffix(".nsys-cache"), ignore_errors=True)
    for lock in path.parent.glob(path.stem + ".nsys-cache*"):
        lock.unlink(missing_ok=True)
    env = {**n.env(), "PYTHONDONTWRITEBYTECODE": ""}
    return _sum([bench.run_child([str(n.exe)] + NSYSAI[answer] + [str(path)], env=env, timeout=3600, cwd=DATA)])


def median(rows: list[dict | None]) -> dict | None:
    rows = [r for r in rows if r is not None]
    if not rows:
        return None
    if not all(r["ok"] for r in rows):
        bad = next(r for r in rows if not r["ok"])
        return dict(secs=None, cpu=None, problem=bad["err"].strip().splitlines()[-1:] or ["failed"], load=bad["load"])
    return {k: statistics.median(r[k] for r in rows) for k in ("secs", "cpu", "rss_mb", "load")}


def measure_input(src: Path, nsysai, runs: int, answers, two: bool = True) -> dict:
    out = dict(name=src.parent.name if src.parent != DATA else src.stem, counts=bench.source_counts(src),
               size_mb=src.stat().st_size / 1e6)
    floors = [bench.measure_floor(src) for _ in range(runs)]
    out["floor"] = {k: statistics.median(f[k] for f in floors) for k in ("secs", "cpu", "load")}
    for answer in answers:
        bench.log(f"{out['name']}: first {answer} answer")
        t, e, n = [], [], []
        for _ in range(runs):
            t.append(traceql_first(src, answer))
            if answer == "kernel" and two:
                e.append(traceql_first(src, answer, two=True))
            if nsysai is not None and not nsysai.problem:
                n.append(nsysai_first(nsysai, src, answer))
        out[answer] = dict(traceql=median(t), two=median(e), nsysai=median(n))
    return out


def startup(dbs: dict[str, Path], runs: int) -> dict:
    """Start-up commands on the first workspace, and every answer's report on each workspace of
    DBS (name -> a workspace of that export, every family built)."""
    first = next(iter(dbs.values()))
    cmds = {"python -c pass": [sys.executable, "-c", "pass"],
            "python -c 'import duckdb'": [sys.executable, "-c", "import duckdb"],
            "traceql --version": [sys.executable, "-m", "traceql", "--version"],
            "traceql sql 'SELECT 1'": [sys.executable, "-m", "traceql", "--db", str(first), "sql", "SELECT 1"]}
    for name, db in dbs.items():
        for answer, args in ANSWERS.items():
            cmds[f"traceql {' '.join(args)} ({name})"] = [sys.executable, "-m", "traceql", "--db", str(db)] + args
    out = {}
    for name, cmd in cmds.items():
        procs = [bench.run_child(cmd, env=ENV) for _ in range(runs + 1)][1:]  # the first warms the caches
        out[name] = dict(secs=statistics.median(p.secs for p in procs), cpu=statistics.median(p.cpu for p in procs),
                         load=procs[0].load, ok=all(p.rc == 0 for p in procs))
    return out


def scaling(kernels: int, runs: int) -> dict:
    src = DATA / f"torch_{kernels}.sqlite"
    if not src.exists():
        raise SystemExit(f"{src}: missing; generate it with `python bench/scaling.py --kernels {kernels} --out -`")
    db = DATA / f"first_scale_{kernels}.duckdb"
    floor = bench.measure_floor(src)
    rows = []
    for _ in range(runs):
        for p in (db, db.with_name(db.name + ".wal")):
            p.unlink(missing_ok=True)
        bench.log(f"torch_{kernels}: full ingest")
        rows.append(bench.run_child([sys.executable, "-m", "traceql", "--db", str(db), "ingest", str(src)],
                                    env={**ENV, "TRACEQL_DERIVE": "eager"}, timeout=7200))
    db.unlink(missing_ok=True)
    p = min(rows, key=lambda r: r.cpu)
    return dict(kernels=kernels, floor=floor, secs=p.secs, cpu=p.cpu, rss_mb=max(r.rss_mb for r in rows), load=p.load,
                ok=p.rc == 0, err=p.err[-300:] if p.rc else "")


# -- the report ----------------------------------------------------------------------------

def f3(x) -> str:
    return "—" if x is None else f"{x:.3f}"


def cell(m: dict | None) -> str:
    if m is None:
        return "—"
    if m.get("secs") is None:
        return "failed"
    return f"{m['secs']:.2f} s ({m['cpu']:.2f} CPU)"


def ratio(a: dict | None, b: dict | None, key: str) -> str:
    if not a or not b or a.get(key) is None or b.get(key) is None or not b[key]:
        return "—"
    return f"{a[key] / b[key]:.2f}×"


def render(results: list[dict], start: dict, scale: list[dict], meta: dict) -> str:
    L = [
        "# The first answer: traceql, nsys-ai 0.3.0 and SQLite, in one run",
        "",
        f"Written by `{meta['command']}` on {meta['date']}, traceql {meta['rev']}. {meta['machine']}; Python "
        f"{meta['python']}, DuckDB {meta['duckdb']}, nsys-ai {meta['nsysai'] or 'not measured'}. Every figure is the "
        f"median of {meta['runs']} runs ({meta.get('size_runs', 1)} on the generated exports; traceql and nsys-ai in turn; "
        f"{meta.get('startup_runs', meta['runs'])} for the start-up commands); "
        "`bench/first.py` says what runs. "
        "**The machine was shared and loaded** (1-minute load average given per row, on 2 cores): wall times are "
        "stretched by the load several times over, CPU seconds (user + system of every process of the answer) "
        "much less; compare the ratios of one row, not rows of different loads.",
        "",
        "## First answers on a new file (one command: `traceql report --by kernel FILE`, ingest included; "
        "nsys-ai on a cold cache)",
        "",
        "| input | answer | traceql | traceql, ingest then answer (two commands) | nsys-ai | traceql ÷ nsys-ai (wall / CPU) | SQLite floor | load |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        c = r["counts"]
        for answer in ANSWERS:
            if answer not in r:
                continue
            m = r[answer]
            L.append(f"| {r['name']} ({c.get('kernels', 0):,} kernels) | {answer} | {cell(m['traceql'])} | "
                     f"{cell(m['two'])} | {cell(m['nsysai'])} | {ratio(m['traceql'], m['nsysai'], 'secs')} / "
                     f"{ratio(m['traceql'], m['nsysai'], 'cpu')} | {f3(r['floor']['secs'])} s | "
                     f"{(m['traceql'] or {}).get('load', 0):.1f} |")
    L += ["", "## Start-up, and reports from a workspace of each export above (every family built)", "",
          "| command | wall (s) | CPU (s) | load |", "|---|---:|---:|---:|"]
    for name, m in start.items():
        failed = "" if m["ok"] else " (FAILED: a run exited non-zero)"
        L.append(f"| `{name}`{failed} | {f3(m['secs'])} | {f3(m['cpu'])} | {m['load']:.1f} |")
    if scale:
        L += ["", "## Full ingest (every derived table, TRACEQL_DERIVE=eager) of generated PyTorch-shaped exports", "",
              "| kernels | source rows | wall (s) | CPU (s) | ns per kernel (CPU) | peak RSS (MB) | SQLite floor (s, CPU) "
              "| CPU ÷ floor | load |", "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for s in scale:
            L.append(f"| {s['kernels']:,} | {s['floor']['rows']:,} | {f3(s['secs'])} | {f3(s['cpu'])} | "
                     f"{s['cpu'] / s['kernels'] * 1e9:,.0f} | {s['rss_mb']:,.0f} | {f3(s['floor']['cpu'])} | "
                     f"{s['cpu'] / s['floor']['cpu']:.1f}× | {s['load']:.1f} |")
        per = [s["cpu"] / s["kernels"] for s in scale]
        L.append("")
        L.append(f"ns per kernel, largest size ÷ smallest: {per[-1] / per[0]:.2f} (flat is 1.0; the goal is at most 1.5).")
    L.append("")
    return "\n".join(L)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--sizes", type=int, nargs="*", default=[], help="generated torch exports for the scaling rows")
    ap.add_argument("--answers", nargs="*", default=list(ANSWERS), choices=list(ANSWERS))
    ap.add_argument("--big-answers", nargs="*", default=["kernel", "range"], choices=list(ANSWERS),
                    help="first answers measured on the generated exports of --sizes")
    ap.add_argument("--size-runs", type=int, default=3,
                    help="runs of each first answer on the generated exports (one run is too noisy to rank two "
                         "tools that differ by a few percent)")
    ap.add_argument("--startup-runs", type=int, default=15,
                    help="runs of each start-up command (0.02-0.2 s each: a few runs are within the noise)")
    ap.add_argument("--no-nsys-ai", action="store_true")
    ap.add_argument("--no-two", action="store_true", help="no two-command column (ingest, then the answer)")
    ap.add_argument("--no-two-sizes", action="store_true",
                    help="the two-command column for the real exports only, not for --sizes")
    ap.add_argument("--no-full-ingest", action="store_true", help="no full-ingest rows for --sizes (first answers only)")
    ap.add_argument("--out", default="bench/FIRST.md")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    DATA.mkdir(parents=True, exist_ok=True)  # gitignored: absent in a fresh clone
    nsysai = None
    if not args.no_nsys_ai:
        venv = DATA / "nsysai-venv"
        nsysai = bench.find_nsysai(venv, venv.with_name("nsysai-home"))
        if nsysai.problem:
            bench.log(f"nsys-ai: {nsysai.problem}")
    results = [measure_input(src, nsysai, args.runs, args.answers, not args.no_two) for src in small_inputs()]
    for k in args.sizes:
        results.append(measure_input(DATA / f"torch_{k}.sqlite", nsysai, args.size_runs, args.big_answers,
                                     not (args.no_two or args.no_two_sizes)))
    dbs = {}
    for src in small_inputs():
        db = DATA / f"first_startup_{len(dbs)}.duckdb"
        db.unlink(missing_ok=True)
        made = bench.run_child([sys.executable, "-m", "traceql", "--db", str(db), "ingest", str(src)],
                               env={**ENV, "TRACEQL_DERIVE": "eager"})
        if made.rc != 0:
            raise SystemExit(f"ingest for the start-up rows failed ({made.rc}): {made.err[-300:]}")
        dbs[src.parent.name] = db
    start = startup(dbs, args.startup_runs)
    for db in dbs.values():
        db.unlink(missing_ok=True)
    scale = [] if args.no_full_ingest else [scaling(k, 1) for k in args.sizes]
    import duckdb

    rev = os.popen(f"git -C {REPO} rev-parse --short HEAD").read().strip()
    meta = dict(command="python bench/first.py " + " ".join(argv if argv is not None else sys.argv[1:]),
                date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), rev=rev,
                machine=f"{os.cpu_count()} cores, {platform.machine()}, Linux {platform.release()}",
                python=platform.python_version(), duckdb=duckdb.__version__,
                nsysai=nsysai.version if nsysai and not nsysai.problem else None, runs=args.runs,
                size_runs=args.size_runs, startup_runs=args.startup_runs)
    text = render(results, start, scale, meta)
    if args.json:
        Path(args.json).write_text(json.dumps(dict(meta=meta, results=results, startup=start, scaling=scale), indent=1))
    if args.out == "-":
        print(text)
    else:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
