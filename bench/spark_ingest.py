"""`ingest --engine spark` against `ingest -j 2` + `export --partition-by trace`: a generated
multi-rank job, ingested on Spark local[1] and local[2].

    make bench-spark-ingest                                     # 64 ranks of 2,000 kernels
    python bench/spark_ingest.py --ranks 8 --kernels-per-rank 500 --out -    # a quick look

Input: fixtures/gen_torch.py, one file per rank (seed = rank; PyTorch op ranges, autograd
thread, NVTX, ...), the rank files bench/spark.py makes (bench/data/spark/ranks_<K>/).

Each way is one `traceql` command line (two for DuckDB: ingest, then export), run as a child
process of this script: wall time, CPU time (user + sys of the command and every process it
started: DuckDB's workers, the JVM, Spark's Python workers, read from /proc while it runs) and
the peak RSS of the largest of them. Every Spark-built export is compared with the DuckDB-built one, file by file (the
trace's ingested_at aside). Writes the section between the markers in bench/SPARK.md (--out)."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
DATA = REPO / "bench" / "data" / "spark"
from proc import tree as proc_tree  # noqa: E402 - bench/ is on the path above

BEGIN, END = "<!-- spark_ingest.py: begin -->", "<!-- spark_ingest.py: end -->"


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def measured(args: list[str], clean: list[Path]) -> dict:
    """One traceql command line in a child process (after removing CLEAN): wall, CPU (user + sys of
    it and of every process below it: DuckDB's workers, the JVM, Spark's Python workers, which
    nobody waits for, so read from /proc every 0.2 s, the last reading of each process) and the
    peak RSS of the largest process, its stdout."""
    import tempfile

    for p in clean:
        shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
    cpu, peak = {}, 0
    started = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([sys.executable, "-m", "traceql", *args], stdout=out, stderr=err, cwd=REPO)
        while proc.poll() is None:
            for pid, (seconds, rss) in proc_tree(proc.pid).items():
                cpu[pid] = max(cpu.get(pid, 0.0), seconds)
                peak = max(peak, rss)
            time.sleep(0.2)
        wall = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if proc.returncode != 0:
        raise SystemExit(f"traceql {' '.join(args[:4])} ...: exit {proc.returncode}\n{stderr}")
    return {"wall": wall, "cpu": sum(cpu.values()), "peak_mb": peak / 2**20, "stdout": stdout}


def same_export(a: Path, b: Path) -> bool:
    import pyarrow.parquet as pq

    from traceql.outputs import parquet

    if parquet.read_manifest(a) != parquet.read_manifest(b):
        return False
    for view in parquet.VIEWS:
        names = sorted(p.name for p in (a / view).iterdir())
        if names != sorted(p.name for p in (b / view).iterdir()):
            return False
        for name in names:
            x, y = (pq.read_table(root / view / name / parquet.PART_FILE) for root in (a, b))
            if view == "trace":
                x, y = x.drop_columns(["ingested_at"]), y.drop_columns(["ingested_at"])
            if not (x.schema.equals(y.schema, check_metadata=True) and x.equals(y)):
                return False
    return True


def task_figures(stdout: str) -> list[tuple[float, float]]:
    """(wall, CPU) of each Spark task, as `ingest --engine spark` prints them."""
    return [(float(w), float(c)) for w, c in re.findall(r" in ([\d.]+) s \(([\d.]+) s CPU\) on a Spark task", stdout)]


def render(meta: dict, rows: list[dict], tasks: dict, n: int, kernels: int) -> str:
    lines = [BEGIN, "", f"## ingest --engine spark: {n} ranks of {kernels:,} kernels ({n * kernels:,} kernels)", "",
             f"Written by `python bench/spark_ingest.py --ranks {n} --kernels-per-rank {kernels}` on {meta['date']}, "
             f"traceql {meta['commit']}, pyspark {meta['pyspark']}; 2 cores shared with other work: 1-minute load "
             f"{meta['load_start']:.1f} at the start, {meta['load_end']:.1f} at the end. Wall times on a loaded "
             "machine stretch; CPU times (user + sys of every process of the command: DuckDB's workers, the JVM, "
             "Spark's Python workers) move less.", "",
             "| how | wall (s) | CPU (s) | peak RSS of one process (MB) | export equal to DuckDB's |",
             "|---|---:|---:|---:|---|"]
    for r in rows:
        peak = f"{r['peak_mb']:,.0f}" if r.get("peak_mb") else "not recorded"
        lines.append(f"| {r['how']} | {r['wall']:.1f} | {r['cpu']:.1f} | {peak} | {r['equal']} |")
    lines += ["", "Spark tasks (one per rank file; wall and CPU of the task's Python process, DuckDB's threads "
              "included, as `ingest --engine spark` prints them):", "",
              "| session | tasks | task wall, sum (s) | task CPU, sum (s) | task CPU, mean (s) | outside the tasks: "
              "command CPU - task CPU (s) |", "|---|---:|---:|---:|---:|---:|"]
    for how, figures in tasks.items():
        row = next(r for r in rows if r["how"] == how)
        wall, cpu = sum(w for w, _ in figures), sum(c for _, c in figures)
        lines.append(f"| {how} | {len(figures)} | {wall:.1f} | {cpu:.1f} | {cpu / max(1, len(figures)):.2f} | "
                     f"{row['cpu'] - cpu:.1f} |")
    lines += ["", meta["arithmetic"], "", END]
    return "\n".join(lines)


def arithmetic(rows: list[dict], tasks: dict, n: int) -> str:
    one, two = (next(r for r in rows if r["how"] == h) for h in ("spark local[1]", "spark local[2]"))
    per_task = sum(c for _, c in tasks["spark local[2]"]) / max(1, len(tasks["spark local[2]"]))
    fixed = two["cpu"] - sum(c for _, c in tasks["spark local[2]"])
    speedup = one["wall"] / two["wall"] if two["wall"] else float("nan")
    return (
        f"What a cluster changes. The tasks are independent (one file each, nothing shared but the "
        f"export's folder), so the work is {n} tasks of about {per_task:.2f} CPU s each here, plus what the "
        f"command spends outside them ({fixed:.1f} CPU s with local[2]: starting the JVM and Python workers, "
        f"scheduling, the driver's renames and manifest). local[1] -> local[2] took the wall time from "
        f"{one['wall']:.1f} s to {two['wall']:.1f} s ({speedup:.2f}x) on 2 cores that other work shared. "
        f"With E executors of C cores each, E x C tasks run at once: the tasks' part of the wall time "
        f"is about ceil({n} / (E x C)) x the task time, the fixed part stays (one JVM start on the driver, "
        f"one per executor, in parallel). E.g. 1,024 ranks of this size on 16 executors of 4 cores: "
        f"ceil(1024 / 64) = 16 rounds of one task each, against 1,024 / 2 = 512 rounds on this machine's "
        f"two cores. The export's directory must be one every executor writes (a shared file system); "
        f"the driver only renames the finished partitions and writes the manifest.")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--kernels-per-rank", type=int, default=2000)
    ap.add_argument("--out", default=str(REPO / "bench" / "SPARK.md"), help="'-': print only")
    args = ap.parse_args(argv)
    from spark import rank_files  # bench/spark.py: the same generated ranks

    import pyspark

    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "pyspark": pyspark.__version__,
            "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                     cwd=REPO).stdout.strip(), "load_start": os.getloadavg()[0]}
    paths = [str(p) for p in rank_files(args.ranks, args.kernels_per_rank, 2)]
    work = DATA / f"ingest_{args.ranks}x{args.kernels_per_rank}"
    work.mkdir(parents=True, exist_ok=True)
    db, duck_export = work / "job.duckdb", work / "duckdb-export"
    rows, tasks = [], {}
    log(f"{args.ranks} ranks: ingest -j 2 ...")
    ingest = measured(["--db", str(db), "ingest", "-j", "2", *paths], [db, Path(str(db) + ".wal")])
    log(f"  {ingest['wall']:.1f} s wall, {ingest['cpu']:.1f} s CPU; export --partition-by trace ...")
    export = measured(["--db", str(db), "export", "--format", "parquet", "--partition-by", "trace", "-o",
                       str(duck_export)], [duck_export])
    log(f"  {export['wall']:.1f} s wall, {export['cpu']:.1f} s CPU")
    rows.append({"how": "ingest -j 2", **ingest, "equal": "-"})
    rows.append({"how": "export --partition-by trace", **export, "equal": "-"})
    rows.append({"how": "ingest -j 2 + export, together", "wall": ingest["wall"] + export["wall"],
                 "cpu": ingest["cpu"] + export["cpu"], "peak_mb": max(ingest.get("peak_mb") or 0,
                                                                      export.get("peak_mb") or 0), "equal": "-"})
    for cores in (1, 2):
        out = work / f"spark-local{cores}"
        how = f"spark local[{cores}]"
        log(f"ingest --engine spark --spark-master local[{cores}] ...")
        figures = measured(["--db", str(out), "ingest", "--engine", "spark", "--spark-master", f"local[{cores}]",
                            *paths], [out])
        tasks[how] = task_figures(figures["stdout"])
        figures["equal"] = "yes" if same_export(out, duck_export) else "NO"
        log(f"  {figures['wall']:.1f} s wall, {figures['cpu']:.1f} s CPU, equal: {figures['equal']}")
        rows.append({"how": how, **figures})
    meta["load_end"] = os.getloadavg()[0]
    meta["arithmetic"] = arithmetic(rows, tasks, args.ranks)
    text = render(meta, rows, tasks, args.ranks, args.kernels_per_rank)
    if args.out == "-":
        print(text)
        return
    target = Path(args.out)
    old = target.read_text(encoding="utf-8") if target.exists() else ""
    if BEGIN in old and END in old:
        new = old[:old.index(BEGIN)] + text + old[old.index(END) + len(END):]
    else:
        new = old.rstrip("\n") + "\n\n" + text + "\n"
    target.write_text(new, encoding="utf-8")
    log(f"wrote {target}")


if __name__ == "__main__":
    main()
