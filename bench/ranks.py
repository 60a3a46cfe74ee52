"""A 64-rank job: ingest time, peak memory and the cross-rank reports' times.

    python bench/ranks.py                     # writes bench/RANKS.md
    python bench/ranks.py --ranks 64 --ranks-per-host 8 --steps 100 --layers 8 --jobs 1 2

Input: fixtures/gen_ranks.py's job (one Nsight Systems export per rank, host clock skews, a
slow rank, a hidden reduce-scatter and an exposed all-reduce per step) in bench/data/ranks/.
Per --jobs value, a fresh `traceql ingest -j N` of every rank file into a new workspace, in a
child process whose whole process tree's resident memory is sampled every 50 ms (the peak is
the largest sum over the parent and its workers); then, on the last workspace, every cross-rank
report (`report --by rank`, `collective`, `straggler` both measures and per iteration, `clock`)
and the merged Perfetto timeline of all ranks, each a fresh command. Wall and CPU (user +
system of the process and its children) seconds for each: the machine is shared, and CPU time
moves far less with the load than wall time.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DATA = HERE / "data"
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))

from proc import tree as proc_tree  # noqa: E402 - bench/ is on the path above

REPORTS = [["report", "--by", "rank"], ["report", "--by", "collective"], ["report", "--by", "straggler"],
           ["report", "--by", "straggler", "--measure", "compute"],
           ["report", "--by", "straggler", "--per-iteration", "--limit", "20"], ["report", "--by", "clock"]]


def _tree_rss(root: int) -> int:
    """Resident bytes of process ROOT and all its descendants (from /proc)."""
    return sum(rss for _, rss in proc_tree(root).values())


def measure(args: list[str], env=None) -> dict:
    """Run traceql ARGS in a child: wall s, CPU s (user + system, children included), peak
    resident bytes of its process tree, exit code."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "traceql", *args], cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env={**os.environ, "COLUMNS": "120", **(env or {})})
    peak = [0]
    done = threading.Event()

    def sample():
        while not done.wait(0.05):
            peak[0] = max(peak[0], _tree_rss(proc.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, err = proc.communicate()
    wall = time.perf_counter() - start
    done.set()
    sampler.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        raise SystemExit(f"traceql {' '.join(args)} failed: {err.decode(errors='replace')}")
    return {"wall": wall, "cpu": cpu, "peak": peak[0]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--ranks-per-host", type=int, default=8)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--jobs", type=int, nargs="+", default=[1, 2], help="ingest -j values to measure")
    ap.add_argument("--out", default=str(HERE / "RANKS.md"))
    args = ap.parse_args(argv)
    from fixtures.gen_ranks import generate_job

    folder = DATA / "ranks"
    shutil.rmtree(folder, ignore_errors=True)
    t0 = time.perf_counter()
    job = generate_job(folder, ranks=args.ranks, ranks_per_host=args.ranks_per_host, steps=args.steps,
                       layers=args.layers, seed=0, slow_rank=args.ranks // 3)
    generated = time.perf_counter() - t0
    files = [r["file"] for r in job["ranks"]]
    size = sum(os.path.getsize(f) for f in files)
    load = os.getloadavg()[0]
    rows = []
    for jobs in args.jobs:
        db = DATA / f"ranks-j{jobs}.duckdb"
        for leftover in (db, db.with_name(db.name + ".wal")):
            leftover.unlink(missing_ok=True)
        m = measure(["--db", str(db), "ingest", "-j", str(jobs), *files])
        rows.append((f"ingest -j {jobs}", m))
        print(f"ingest -j {jobs}: {m['wall']:.1f} s wall, {m['cpu']:.1f} s CPU, peak {m['peak'] / 1e6:.0f} MB",
              file=sys.stderr)
    db = DATA / f"ranks-j{args.jobs[-1]}.duckdb"
    reports = []
    for cmd in REPORTS + [["export", "--format", "perfetto", "--align-clocks", "--overwrite", "-o",
                           str(DATA / "ranks.json.gz")]]:
        m = measure(["--db", str(db), *cmd])
        reports.append((" ".join(cmd[:6]) if cmd[0] == "report" else "export --format perfetto --align-clocks", m))
        print(f"{reports[-1][0]}: {m['wall']:.2f} s wall, {m['cpu']:.2f} s CPU", file=sys.stderr)
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    counts = {v: con.execute(f"SELECT count(*) FROM {v}").fetchone()[0] for v in ("kernel", "api_call", "nvtx_range")}
    con.close()
    lines = [
        "# A multi-rank job: ingest and cross-rank reports (bench/ranks.py)", "",
        f"Input: `fixtures/gen_ranks.py`, {args.ranks} ranks on {args.ranks // args.ranks_per_host} hosts "
        f"({args.ranks_per_host} per host), {args.steps} steps of {args.layers} forward and {args.layers} backward "
        f"kernels, a reduce-scatter, an all-reduce and an optimizer kernel: {size / 1e6:.1f} MB of SQLite in "
        f"{len(files)} files, {counts['kernel']:,} kernels, {counts['api_call']:,} API calls, "
        f"{counts['nvtx_range']:,} NVTX ranges (generated in {generated:.1f} s).", "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores shared with other work (1-minute load "
        f"{load:.1f} at the start), Python {platform.python_version()}, TRACEQL_MEMORY_LIMIT "
        f"{os.environ.get('TRACEQL_MEMORY_LIMIT', 'default 3GB')}. Each figure is one fresh command; CPU is user + "
        "system of the command and its worker processes; peak is the largest resident memory of the whole "
        "process tree (parent and workers together), sampled every 50 ms.", "",
        "| command | wall s | CPU s | peak MB |", "|---|---:|---:|---:|"]
    for name, m in rows + reports:
        lines.append(f"| `traceql {name}` | {m['wall']:.2f} | {m['cpu']:.2f} | {m['peak'] / 1e6:.0f} |")
    lines += ["", "Reading it: with one file at a time (`-j 1`) ingest is one process; `-j 2` runs two worker "
              "processes that each write a workspace of their own, and the parent appends them in trace-id order "
              "(traceql/parallel.py). On a 2-core machine that other work keeps busy, the second worker mostly "
              "competes for the same cores: compare the CPU seconds, which add each worker's start (about 0.3 s) "
              "and its own workspace file.", ""]
    import textwrap

    wrapped = [line if line.startswith(("|", "#")) or not line else textwrap.fill(line, 100) for line in lines]
    Path(args.out).write_text("\n".join(wrapped))
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
