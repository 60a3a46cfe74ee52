"""Benchmarks: ingest wall time and peak memory, and report latency, on generated traces
(fixtures/gen_nsys.py) and the largest real trace in ../shared/traces.

    python bench/run.py                 # S and M
    python bench/run.py --sizes S M ATTR  # ATTR: 16 M NVTX ranges, 7 M API calls, 2 M kernels
    python bench/run.py --out bench/RESULTS.md

Generated inputs are cached in bench/data/ (git-ignored). Each measurement runs the CLI in a
child process, so its peak RSS is the ingest's own (os.wait4)."""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "bench" / "data"
TRACES = REPO.parent / "shared" / "traces"

SIZES = {
    "S": dict(kernels=100_000),
    "M": dict(kernels=1_000_000),
    "ATTR": dict(kernels=2_000_000, nvtx_per_kernel=8, api_per_kernel=3.5),
}


def timed(args: list[str]) -> tuple[float, int, str]:
    """Like run, with the child's own peak RSS from wait4."""
    started = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - started
    if status != 0:
        raise SystemExit(f"failed ({status}): {' '.join(args)}")
    return elapsed, usage.ru_maxrss * 1024, out


def generated(size: str) -> Path:
    DATA.mkdir(parents=True, exist_ok=True)
    path = DATA / f"nsys3_{size}.sqlite"
    if not path.exists():
        opts = SIZES[size]
        cmd = [sys.executable, "-m", "fixtures.gen_nsys", "--layout", "3", "--kernels", str(opts["kernels"]),
               "-q", "-o", str(path)]
        if "nvtx_per_kernel" in opts:
            cmd += ["--nvtx-per-kernel", str(opts["nvtx_per_kernel"]), "--api-per-kernel", str(opts["api_per_kernel"])]
        print(f"generating {path.name} ...", file=sys.stderr)
        timed(cmd)
    return path


def largest_real() -> Path | None:
    files = sorted(TRACES.glob("*/*.sqlite"), key=lambda p: p.stat().st_size) if TRACES.is_dir() else []
    return files[-1] if files else None


def measure(name: str, src: Path) -> dict:
    db = DATA / f"{src.stem}.duckdb"
    for p in (db, db.with_name(db.name + ".lock")):
        p.unlink(missing_ok=True)
    traceql = [sys.executable, "-m", "traceql", "--db", str(db)]
    secs, rss, out = timed(traceql + ["ingest", str(src)])
    counts = out.splitlines()[1].strip() if len(out.splitlines()) > 1 else ""
    report = min(timed(traceql + ["report", "--by", "range", "--format", "csv"])[0] for _ in range(3))
    return dict(name=name, file=src.name, size_mb=src.stat().st_size / 1e6, ingest_s=secs,
                peak_mb=rss / 1e6, report_range_s=report, counts=counts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", nargs="*", default=["S", "M"], choices=list(SIZES))
    ap.add_argument("--no-real", action="store_true", help="skip the largest real trace")
    ap.add_argument("--out", type=Path, default=None, help="write a Markdown table here")
    args = ap.parse_args()
    results = []
    real = None if args.no_real else largest_real()
    if real is not None:
        results.append(measure("largest real trace", real))
    for size in args.sizes:
        results.append(measure(f"generated {size}", generated(size)))
    lines = [f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
             f"{time.strftime('%Y-%m-%d')}. `report` = best of 3 runs of `traceql report --by range` "
             "(a fresh process each, so it includes start-up).", "",
             "| input | file | size (MB) | ingest (s) | peak RSS (MB) | report --by range (s) | rows |",
             "|---|---|---:|---:|---:|---:|---|"]
    for r in results:
        lines.append(f"| {r['name']} | {r['file']} | {r['size_mb']:.1f} | {r['ingest_s']:.2f} | {r['peak_mb']:.0f} | "
                     f"{r['report_range_s']:.2f} | {r['counts']} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text("# Benchmark results\n\nWritten by `python bench/run.py`.\n\n" + text)


if __name__ == "__main__":
    main()
