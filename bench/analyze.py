"""traceql analyze: how long the rules take, in-process, on the largest real traces (issue 23's goal:
under 1 s each) and, with --generated N, on a generated export of N kernels to see the curve.

    python bench/analyze.py --runs 5 --out bench/ANALYZE.md            # the 5 largest real traces
    python bench/analyze.py --runs 3 --generated 200000 --generated 1000000 --out bench/ANALYZE.md

Inputs: the five largest Nsight Systems or nvprof files in ../shared/traces (by size), each
ingested once into its own workspace (the ingest time is reported, not counted). Measured per
input, in the same process, best and median of --runs: `ws.analyze()` (every rule, as
`traceql analyze` runs them, with their default thresholds, reading the evidence into Arrow)
and each rule alone; the rules' own row counts are reported so that a fast rule that found
nothing is not mistaken for a fast rule that did work. The machine's load is shown next to the
figures: the machine is shared.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
TRACES = REPO.parent / "shared" / "traces"
sys.path.insert(0, str(REPO))

import traceql  # noqa: E402
from traceql.analysis import analyze as analyze_mod  # noqa: E402

GOAL_S = 1.0


def inputs(n: int = 5) -> list[Path]:
    if not TRACES.is_dir():
        return []
    files = [p for p in TRACES.glob("*/*") if p.suffix in (".sqlite", ".nvvp", ".sql") and p.is_file()]
    usable = []
    for p in sorted(files, key=lambda p: -p.stat().st_size):
        try:
            from traceql.sources.detect import detect

            detect(p)
        except traceql.TraceqlError:
            continue
        usable.append(p)
    return usable[:n]


def timed(fn, runs: int) -> tuple[float, float, object]:
    times, result = [], None
    for _ in range(runs):
        started = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - started)
    return min(times), statistics.median(times), result


def measure(path: Path, runs: int, tmp: Path) -> dict:
    db = tmp / (path.parent.name + ".duckdb")
    started = time.perf_counter()
    traceql.ingest([path], db=db)
    ingest_s = time.perf_counter() - started
    out = {"input": f"{path.parent.name}/{path.name}", "mb": path.stat().st_size / 1e6, "ingest_s": ingest_s}
    with traceql.open(db) as ws:
        counts = ws.sql("SELECT (SELECT count(*) FROM kernel) AS kernels, (SELECT count(*) FROM api_call) AS calls, "
                        "(SELECT count(*) FROM nvtx_range) AS ranges").to_pylist()[0]
        out.update(counts)
        ws.analyze()  # warm: the first run reads the tables from disk
        best, med, result = timed(ws.analyze, runs)
        out["all_best_s"], out["all_median_s"] = best, med
        out["rules"] = {}
        for name in analyze_mod.rules():
            b, m, r = timed(lambda: ws.analyze([name]), runs)
            out["rules"][name] = (b, m, r.evidence[name].num_rows)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--generated", type=int, action="append", default=[], metavar="KERNELS",
                    help="also a generated export with this many kernels (fixtures/gen_nsys.py)")
    ap.add_argument("--out", type=Path, default=None, help="write the results as markdown here")
    args = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        files = inputs()
        for n in args.generated:
            from fixtures.gen_nsys import generate

            src = tmp / f"generated-{n}" / "gen.sqlite"
            src.parent.mkdir()
            generate(src, layout="3", kernels=n, seed=1)
            files.append(src)
        for path in files:
            r = measure(path, args.runs, tmp)
            rows.append(r)
            print(f"{r['input']}: all rules {r['all_best_s']:.3f} s (median {r['all_median_s']:.3f} s), "
                  f"{r['kernels']:,} kernels", flush=True)
    text = report(rows, args.runs)
    if args.out:
        args.out.write_text(text)
    print(text)
    return 0 if all(r["all_best_s"] < GOAL_S for r in rows if not r["input"].startswith("generated")) else 1


def report(rows: list[dict], runs: int) -> str:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    lines = [
        "# traceql analyze: time per trace, in-process",
        "",
        f"`python bench/analyze.py --runs {runs}` on {platform.node() and 'the benchmark machine'} "
        f"({os.cpu_count()} cores, Python {platform.python_version()}, load average {load:.2f} at the end). "
        f"Best (median) of {runs} runs of `ws.analyze()`, every rule with its defaults, after one warm-up run; "
        f"goal: under {GOAL_S:.0f} s per trace.",
        "",
        "| input | MB | kernels | API calls | NVTX ranges | ingest s | analyze s (best) | median s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['input']} | {r['mb']:.1f} | {r['kernels']:,} | {r['calls']:,} | {r['ranges']:,} | "
                     f"{r['ingest_s']:.2f} | {r['all_best_s']:.3f} | {r['all_median_s']:.3f} |")
    lines += ["", "Per rule, best of the runs in seconds (evidence rows found):", ""]
    names = list(rows[0]["rules"]) if rows else []
    lines.append("| input | " + " | ".join(names) + " |")
    lines.append("|---|" + "---:|" * len(names))
    for r in rows:
        cells = [f"{r['rules'][n][0]:.3f} ({r['rules'][n][2]:,})" for n in names]
        lines.append(f"| {r['input']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
