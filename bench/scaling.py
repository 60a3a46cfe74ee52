"""Scaling curve of ingest on PyTorch-shaped input: is the time per kernel flat as traces grow?

    make bench-scaling                                   # 0.25, 0.5, 1, 2 and 4 M kernels
    python bench/scaling.py --kernels 250000 1000000     # other sizes
    python bench/scaling.py --kernels 20000 --out -      # a quick look, nothing written

The inputs come from fixtures/gen_torch.py: two processes reusing correlation ids, each with a
main thread, an autograd engine thread (pt_autograd_0) that launches the backward kernels inside
the main thread's Backward range, a loader thread whose start/end ranges end on the main thread,
emit_nvtx op ranges with seq and op_id, an unclosed range. They are the shapes that made ingest
quadratic before (38 / 143 / ~760 s for 0.25 / 0.5 / 1 M kernels on such input).

Per size, in one run and in this order: the floor (Python's sqlite3 scanning every column ingest
reads, bench/run.py measure_floor), then `traceql ingest` as a CLI child process (wall time, peak
RSS, the statement profile of TRACEQL_TIMING=1). Reported: seconds, ingest / floor, ns per kernel
and per source row, peak RSS, and the ratio of the largest size's ns per kernel to the smallest's
(flat is 1.0; the goal is <= 1.5). Inputs are cached in bench/data/ (git-ignored)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import run as harness  # bench/run.py, next to this file

REPO = harness.REPO
DATA = harness.DATA
SIZES = (250_000, 500_000, 1_000_000, 2_000_000, 4_000_000)


def torch_input(kernels: int, data: Path = DATA) -> Path:
    data.mkdir(parents=True, exist_ok=True)
    path = data / f"torch_{kernels}.sqlite"
    if not path.exists():
        part = path.with_name(path.name + ".part")
        harness.log(f"generating {path.name} ...")
        p = harness.run_child([sys.executable, "-m", "fixtures.gen_torch", "--kernels", str(kernels), "-q", "--force",
                               "-o", str(part)], env={"PYTHONPATH": str(REPO)})
        if p.rc != 0:
            raise SystemExit(f"generating {path.name} failed:\n{p.err}")
        part.rename(path)
    return path


def measure(kernels: int, wait_load: float, deadline: float) -> dict:
    src = torch_input(kernels)
    waited = harness.wait_for_quiet(wait_load, deadline)
    counts = harness.source_counts(src)
    floor = harness.measure_floor(src)
    harness.log(f"{src.name}: floor {floor['secs']:.2f} s; ingesting ...")
    db = DATA / f"torch_{kernels}.duckdb"
    ingest = harness.measure_ingest(src, db, runs=1, budget=0)
    harness.log(f"{src.name}: ingest {ingest['secs']:.2f} s, peak {ingest['rss_mb']:.0f} MB")
    for p in (db, db.with_name(db.name + ".wal")):
        p.unlink(missing_ok=True)
    return dict(kernels=kernels, file_mb=src.stat().st_size / 1e6, counts=counts, rows=floor["rows"],
                floor=floor, ingest=ingest, waited=waited)


def render(results: list[dict], meta: str) -> str:
    out = ["# Ingest scaling on PyTorch-shaped input", "", meta, "",
           "Input: `fixtures/gen_torch.py` (generation `observer`, seed 0): two processes reusing correlation ids, "
           "main + autograd + loader threads, emit_nvtx ranges with seq and op_id, start/end ranges ending on "
           "another thread, an unclosed range. Floor = Python's sqlite3 scanning every column ingest reads. "
           "One ingest per size, as a CLI child process (start-up included).", "",
           "Wall time moves with the machine's load (the load average is in the last column); CPU time "
           "(user + system, all of DuckDB's threads) barely does, so the CPU columns are the ones to compare "
           "across sizes and runs. The floor runs on one thread: on an idle 2-core machine ingest's wall "
           "time is about half its CPU time.", "",
           "| kernels | API calls | NVTX ranges | source rows | file (MB) | floor wall / CPU (s) | ingest wall (s) "
           "| ingest CPU (s) | wall ÷ floor | CPU ÷ floor | CPU ns per kernel | CPU ns per source row "
           "| peak RSS (MB) | load (floor / ingest) |",
           "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in results:
        c, i, f = r["counts"], r["ingest"], r["floor"]
        out.append(f"| {r['kernels']:,} | {c.get('api', 0):,} | {c.get('nvtx', 0):,} | {r['rows']:,} | "
                   f"{r['file_mb']:.0f} | {f['secs']:.2f} / {f['cpu']:.2f} | {i['secs']:.2f} | {i['cpu']:.2f} | "
                   f"{i['secs'] / f['secs']:.1f}× | {i['cpu'] / f['cpu']:.1f}× | "
                   f"{i['cpu'] / r['kernels'] * 1e9:,.0f} | {i['cpu'] / r['rows'] * 1e9:,.0f} | "
                   f"{i['rss_mb']:.0f} | {f['load']:.2f} / {i['load']:.2f} |")
    if len(results) > 1:
        lo, hi = results[0], results[-1]
        for what in ("cpu", "secs"):
            per = [r["ingest"][what] / r["kernels"] for r in results]
            out += ["", f"{'CPU' if what == 'cpu' else 'Wall'} time per kernel, largest ÷ smallest size "
                        f"({hi['kernels']:,} vs {lo['kernels']:,}): **{per[-1] / per[0]:.2f}** (goal <= 1.5); "
                        f"highest ÷ lowest over all sizes: {max(per) / min(per):.2f}."]
        one = next((r for r in results if r["kernels"] == 1_000_000), None)
        if one:
            i, f = one["ingest"], one["floor"]
            out += ["", f"1 M kernels: ingest {i['secs']:.1f} s wall = **{i['secs'] / f['secs']:.1f}× the floor**, "
                        f"{i['cpu']:.1f} s CPU = {i['cpu'] / f['cpu']:.1f}× the floor's CPU (goal <= 4×); "
                        f"peak {i['rss_mb']:.0f} MB (goal <= 4096)."]
    out += ["", "Where the time goes, per size (CPU seconds per phase of the statement profile, the same "
                "statement groups as bench/RESULTS.md; Python between statements is not in it):", ""]
    phases = [p["phase"] for p in results[-1]["ingest"]["profile"]["phases"]]
    out.append("| phase | " + " | ".join(f"{r['kernels'] / 1e6:g} M" for r in results) + " |")
    out.append("|---|" + "---:|" * len(results))
    for ph in phases:
        cells = []
        for r in results:
            cpu = next((p.get("cpu", p["secs"]) for p in r["ingest"]["profile"]["phases"] if p["phase"] == ph), 0.0)
            cells.append(f"{cpu:.2f}")
        out.append(f"| {ph} | " + " | ".join(cells) + " |")
    top = results[-1]["ingest"]["profile"]["top"]
    out += ["", f"Slowest statements at {results[-1]['kernels']:,} kernels:", "",
            "| wall (s) | CPU (s) | statement |", "|---:|---:|---|"]
    out += [f"| {t['secs']:.2f} | {t.get('cpu', float('nan')):.2f} | `{t['sql'][:110]}` |" for t in top]
    return "\n".join(out) + "\n"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernels", type=int, nargs="+", default=list(SIZES))
    ap.add_argument("--wait-load", type=float, default=1.5)
    ap.add_argument("--wait-max", type=float, default=600)
    ap.add_argument("--out", default=str(REPO / "bench" / "SCALING.md"), help="markdown file, or - for stdout")
    ap.add_argument("--json", default=str(DATA / "scaling.json"))
    ap.add_argument("--render", action="store_true", help="write --out again from the figures in --json, measuring nothing")
    args = ap.parse_args(argv)
    if args.render:
        saved = json.loads(Path(args.json).read_text())
        text = render(saved["results"], saved["meta"])
        print(text) if args.out == "-" else Path(args.out).write_text(text)
        return
    deadline = time.time() + args.wait_max
    results = [measure(k, args.wait_load, deadline) for k in sorted(args.kernels)]
    meta = (f"Written by `python bench/scaling.py --kernels {' '.join(map(str, sorted(args.kernels)))}` on "
            f"{time.strftime('%Y-%m-%d %H:%M')}, measuring traceql {harness.traceql_revision()}. "
            f"Machine: {harness.machine()}.")
    text = render(results, meta)
    if args.out == "-":
        print(text)
    else:
        Path(args.out).write_text(text)
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(dict(meta=meta, results=results), indent=1, default=str))
        harness.log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
