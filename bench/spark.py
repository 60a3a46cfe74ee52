"""A multi-rank job on Apache Spark (local[2]) next to DuckDB: ingest that scales out, and the reports.

    make bench-spark                                      # 16, 32, 64 ranks of 8,000 kernels, a 1 M-kernel trace
    python bench/spark.py --ranks 4 8 --kernels-per-rank 2000 --single 0 --out -   # a quick look

Input: fixtures/gen_torch.py, one file per rank (seed = rank: two processes, PyTorch op ranges,
autograd thread, ...), and one trace of --single kernels for the exactness check at 1 M kernels.

What is measured, in this order, each step as child processes of this script (wall time, CPU
time = user + sys of every process involved, the JVM's included, peak RSS of the largest one):

1. Ingest that scales out: every rank ingested into its own workspace and exported into the
   job's Parquet directory with --trace-id-offset, by --workers parallel processes (the way
   per-rank ingests on several machines fill one export), against one process ingesting all
   ranks into one workspace and exporting it.
2. Reports (kernel, api, memcpy, range, op, summary) at each size: DuckDB on the workspace
   (the stored reports of ingest, and --recompute), Spark local[2] on the export of the first N
   ranks (hard links of the job export's partitions). Spark's session start and its first round
   (a cold JVM) are reported apart from a second, warm round. Every Spark result is compared
   with DuckDB's (same columns, types, rows, order).
3. The --single trace: ingested, exported, every report compared on both engines, timed.

Writes bench/SPARK.md (--out) and the raw numbers (--json). Inputs and workspaces are kept in
bench/data/spark/ (git-ignored) for --reuse."""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
DATA = REPO / "bench" / "data" / "spark"
REPORTS = ("kernel", "api", "memcpy", "range", "op")
INPUT_VIEW = {"kernel": "kernel", "api": "api_call", "memcpy": "memcpy", "range": "nvtx_range", "op": "torch_op"}
C1_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def cpu_self() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def cpu_children() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def maxrss_children_mb() -> float:
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


# ---------------------------------------------------------------------------------------- inputs
def generate(path: Path, kernels: int, seed: int) -> Path:
    from fixtures.gen_torch import generate as gen

    if not path.exists():
        gen(path, kernels=kernels, seed=seed, force=True)
    return path


def rank_files(n: int, kernels: int, workers: int) -> list[Path]:
    folder = DATA / f"ranks_{kernels}"
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"rank{r:03d}.sqlite" for r in range(n)]
    missing = [(p, kernels, r) for r, p in enumerate(paths) if not p.exists()]
    if missing:
        log(f"generating {len(missing)} rank files of {kernels:,} kernels ...")
        with ProcessPoolExecutor(workers) as pool:
            list(pool.map(generate, *zip(*missing)))
    return paths


# ---------------------------------------------------------------------------------------- ingest
def _rank_job(src: str, db: str, export: str, offset: int) -> None:
    """One rank: its own workspace, exported into the job's directory under trace id offset + 1."""
    import traceql

    for p in (Path(db), Path(db + ".wal")):
        p.unlink(missing_ok=True)
    traceql.ingest([src], db=db)
    with traceql.open(db) as ws:
        ws.export(export, partition_by="trace", trace_id_offset=offset, overwrite=True)


def _whole_job(srcs: list[str], db: str, export: str) -> None:
    import traceql

    for p in (Path(db), Path(db + ".wal")):
        p.unlink(missing_ok=True)
    traceql.ingest(srcs, db=db)
    with traceql.open(db) as ws:
        ws.export(export, partition_by="trace", overwrite=True)


def timed_pool(fn, jobs: list[tuple], workers: int) -> dict:
    """Run fn over jobs in `workers` fresh processes; wall, CPU (their user + sys) and peak RSS."""
    import multiprocessing

    before = cpu_children()
    started = time.perf_counter()
    ctx = multiprocessing.get_context("spawn")  # fresh interpreters, as separate ingests are
    with ProcessPoolExecutor(workers, mp_context=ctx) as pool:
        for f in [pool.submit(fn, *j) for j in jobs]:
            f.result()
    return {"wall": time.perf_counter() - started, "cpu": cpu_children() - before,
            "rss_mb": maxrss_children_mb()}


def ingest_scale_out(paths: list[Path], workers: int, tag: str, reuse: bool) -> tuple[dict, dict, Path, Path]:
    job = DATA / f"job_{tag}"
    saved = DATA / f"ingest_{tag}.json"
    if reuse and saved.exists() and (job / "_traceql.json").exists() and (DATA / f"job_{tag}.duckdb").exists():
        log(f"reusing {job.name} and the ingest figures of {saved.name}")
        figures = json.loads(saved.read_text())
        return figures["parallel"], figures["single"], job, DATA / f"job_{tag}.duckdb"
    whole_export = DATA / f"job_{tag}_whole"
    db = DATA / f"job_{tag}.duckdb"
    ranks_dir = DATA / f"job_{tag}_ranks"
    for d in (job, whole_export, ranks_dir):
        shutil.rmtree(d, ignore_errors=True)
    ranks_dir.mkdir(parents=True)
    log(f"{len(paths)} ranks: per-rank ingest + export by {workers} processes ...")
    parallel = timed_pool(_rank_job, [(str(p), str(ranks_dir / f"r{i}.duckdb"), str(job), i)
                                      for i, p in enumerate(paths)], workers)
    log(f"  {parallel['wall']:.1f} s wall, {parallel['cpu']:.1f} s CPU; one process, one workspace ...")
    single = timed_pool(_whole_job, [([str(p) for p in paths], str(db), str(whole_export))], 1)
    log(f"  {single['wall']:.1f} s wall, {single['cpu']:.1f} s CPU")
    shutil.rmtree(ranks_dir, ignore_errors=True)
    saved.write_text(json.dumps({"parallel": parallel, "single": single}))
    return parallel, single, job, db


def subset_export(job: Path, n: int) -> Path:
    """The export of the first n ranks: hard links of the job export's partitions."""
    out = job.with_name(f"{job.name}_first{n}")
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    shutil.copy2(job / "_traceql.json", out / "_traceql.json")
    for view in (p for p in job.iterdir() if p.is_dir()):
        for t in range(1, n + 1):
            src = view / f"trace_id={t}"
            dst = out / view.name / src.name
            dst.mkdir(parents=True)
            for f in src.iterdir():
                os.link(f, dst / f.name)
    return out


def subset_workspace(paths: list[Path], n: int, tag: str) -> Path:
    db = DATA / f"job_{tag}_first{n}.duckdb"
    if not db.exists():
        import traceql

        log(f"workspace of the first {n} ranks ...")
        traceql.ingest([str(p) for p in paths[:n]], db=db)
    return db


# ---------------------------------------------------------------------------------------- reports
def _jvm():
    from pyspark import SparkContext

    return SparkContext._gateway.proc.pid


def _jvm_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _jvm_hwm_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def worker(engine: str, path: str, out_dir: str, jvm_opts: str) -> dict:
    """Run every report twice in this process; per report wall and CPU (Python + JVM); results
    written as Arrow IPC files into out_dir (the first round's)."""
    import pyarrow as pa

    import traceql

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    result = {"engine": engine}
    t0, c0 = time.perf_counter(), cpu_self()
    jvm = None
    if engine == "spark":
        from traceql.engines.spark import _LOG4J, make_session

        log4j = (Path(traceql.__file__).with_name(_LOG4J)).as_uri()
        conf = {"spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={log4j} {jvm_opts}".strip()}
        session, _ = make_session("local[2]", conf)
        jvm = _jvm()
        ws = traceql.open(path, engine="spark", spark_session=session)
    else:
        ws = traceql.open(path)

    def cpu() -> float:
        return cpu_self() + (_jvm_cpu(jvm) if jvm else 0.0)

    result["start"] = {"wall": time.perf_counter() - t0, "cpu": cpu() - c0}
    recompute = engine == "duckdb-recompute"
    rounds = []
    for round_ in range(2):
        times = {}
        for by in REPORTS + ("summary",):
            t, c = time.perf_counter(), cpu()
            if by == "summary":
                table = ws.summary(recompute=recompute).rows if engine != "spark" else ws.summary().rows
            else:
                table = ws.report(by, recompute=True) if recompute else ws.report(by)
            times[by] = {"wall": time.perf_counter() - t, "cpu": cpu() - c, "rows": table.num_rows}
            if round_ == 0:
                with pa.OSFile(str(out / f"{by}.arrow"), "wb") as fh, pa.ipc.new_file(fh, table.schema) as w:
                    w.write_table(table)
        rounds.append(times)
    result["cold"], result["warm"] = rounds
    if engine != "spark":
        result["input_rows"] = {by: ws.sql(f"SELECT count(*) AS n FROM {v}").column(0)[0].as_py()
                                for by, v in INPUT_VIEW.items()}
    result["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if jvm:
        result["jvm_rss_mb"] = _jvm_hwm_mb(jvm)
    ws.close()
    if engine == "spark":
        session.stop()
    return result


def run_worker(engine: str, path: Path, out_dir: Path, jvm_opts: str = "") -> dict:
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, __file__, "--worker", engine, str(path), str(out_dir), jvm_opts],
                          capture_output=True, text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    if proc.returncode != 0:  # recorded, the other measurements go on
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and not ln.startswith(("\tat ", "WARNING"))]
        log(f"{engine} worker on {path} failed: {lines[-1] if lines else proc.returncode}")
        return {"engine": engine, "failed": lines[-1] if lines else f"exit {proc.returncode}",
                "process_wall": time.perf_counter() - started}
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["process_wall"] = time.perf_counter() - started
    return result


def same_results(a: Path, b: Path) -> dict[str, bool]:
    import pyarrow as pa

    out = {}
    for by in REPORTS + ("summary",):
        ta = pa.ipc.open_file(pa.memory_map(str(a / f"{by}.arrow"))).read_all()
        tb = pa.ipc.open_file(pa.memory_map(str(b / f"{by}.arrow"))).read_all()
        out[by] = ta.schema == tb.schema and ta.to_pylist() == tb.to_pylist()
    return out


def compare(db: Path, export: Path, label: str, variants: dict[str, str]) -> dict:
    res = {"label": label}
    tmp = DATA / "results" / label
    shutil.rmtree(tmp, ignore_errors=True)
    log(f"{label}: DuckDB ...")
    res["duckdb"] = run_worker("duckdb", db, tmp / "duckdb")
    res["duckdb-recompute"] = run_worker("duckdb-recompute", db, tmp / "duckdb-recompute")
    for name, opts in variants.items():
        log(f"{label}: Spark local[2] ({name}) ...")
        res[f"spark {name}"] = run_worker("spark", export, tmp / f"spark-{name}", opts)
        if "failed" not in res[f"spark {name}"]:
            res[f"spark {name}"]["same"] = same_results(tmp / "duckdb", tmp / f"spark-{name}")
            log(f"  same rows: {res[f'spark {name}']['same']}")
    return res


# ---------------------------------------------------------------------------------------- report
def _mb(value) -> str:
    return "not recorded" if value is None else f"{value:.0f}"


def render(meta: dict, ingest: dict, sizes: list[dict], single: dict | None) -> str:
    lines = ["# Spark local[2] next to DuckDB: a generated multi-rank job", "", meta["text"], ""]
    par, one = ingest["parallel"], ingest["single"]
    n, k = ingest["ranks"], ingest["kernels_per_rank"]
    lines += [
        f"## Ingest that scales out ({n} ranks of {k:,} kernels, {n * k:,} kernels)", "",
        "| how | wall (s) | CPU (s) | peak RSS of one process (MB) |", "|---|---:|---:|---:|",
        f"| {ingest['workers']} processes, each rank into its own workspace, exported with --trace-id-offset "
        f"into the job's directory | {par['wall']:.1f} | {par['cpu']:.1f} | {_mb(par.get('rss_mb'))} |",
        f"| one process, all ranks into one workspace, then exported | {one['wall']:.1f} | {one['cpu']:.1f} | "
        f"{_mb(one.get('rss_mb'))} |", ""]
    lines += ["## Reports per size", "",
              "Seconds per report, wall / CPU (CPU = user + sys of the process, the JVM's included). DuckDB: "
              "the reports ingest stored (kernel, api, range, summary read them) and --recompute; Spark: the "
              "warm round (second run in the same session), then the cold one (first queries of a new JVM) and "
              "the session's start. ns/row = warm CPU time per row of the report's input view.", ""]
    header = "| ranks | kernels | engine | " + " | ".join(REPORTS) + " | summary | start | cold round | peak RSS (MB) |"
    lines += [header, "|" + "---|" * 3 + "---:|" * (len(REPORTS) + 4)]
    for s in sizes:
        for eng in [e for e in s if e.startswith(("duckdb", "spark"))]:
            r = s[eng]
            if "failed" in r:
                lines.append(f"| {s['ranks']} | {s['kernels']:,} | {eng} | failed: {r['failed']} |")
                continue
            cells = [f"{r['warm'][by]['wall']:.2f} / {r['warm'][by]['cpu']:.2f}" for by in REPORTS + ("summary",)]
            cold = sum(v["wall"] for v in r["cold"].values())
            cold_cpu = sum(v["cpu"] for v in r["cold"].values())
            rss = r["rss_mb"] + r.get("jvm_rss_mb", 0)
            lines.append(f"| {s['ranks']} | {s['kernels']:,} | {eng} | " + " | ".join(cells) +
                         f" | {r['start']['wall']:.1f} / {r['start']['cpu']:.1f} | {cold:.1f} / {cold_cpu:.1f} | {rss:.0f} |")
    lines += ["", "Warm CPU ns per input row (kernel rows for kernel, api_call rows for api, ...):", "",
              "| ranks | engine | " + " | ".join(REPORTS) + " |", "|---|---|" + "---:|" * len(REPORTS)]
    for s in sizes:
        rows = s["duckdb"]["input_rows"]
        for eng in [e for e in s if e.startswith(("duckdb", "spark")) and "failed" not in s[e]]:
            r = s[eng]
            cells = [f"{r['warm'][by]['cpu'] / max(rows[by], 1) * 1e9:,.0f}" for by in REPORTS]
            lines.append(f"| {s['ranks']} | {eng} | " + " | ".join(cells) + " |")
    lines += ["", "Same rows on Spark as on DuckDB (columns, Arrow types, rows, order):", ""]
    for s in sizes + ([single] if single else []):
        for eng in [e for e in s if e.startswith("spark") and "same" in s[e]]:
            same = s[eng]["same"]
            lines.append(f"- {s['label']}, {eng}: " + ", ".join(f"{k} {'equal' if v else 'DIFFERENT'}"
                                                             for k, v in same.items()))
    if single:
        lines += ["", f"## One trace of {single['kernels']:,} kernels", "",
                  "| engine | " + " | ".join(REPORTS) + " | summary | start | peak RSS (MB) |",
                  "|---|" + "---:|" * (len(REPORTS) + 3)]
        for eng in [e for e in single if e.startswith(("duckdb", "spark"))]:
            r = single[eng]
            if "failed" in r:
                lines.append(f"| {eng} | failed: {r['failed']} |")
                continue
            cells = [f"{r['warm'][by]['wall']:.2f} / {r['warm'][by]['cpu']:.2f}" for by in REPORTS + ("summary",)]
            lines.append(f"| {eng} | " + " | ".join(cells) + f" | {r['start']['wall']:.1f} / {r['start']['cpu']:.1f} | "
                         f"{r['rss_mb'] + r.get('jvm_rss_mb', 0):.0f} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[16, 32, 64])
    ap.add_argument("--kernels-per-rank", type=int, default=8000)
    ap.add_argument("--single", type=int, default=1_000_000, help="kernels of the one-trace check (0: none)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--jvm-variants", action="store_true",
                    help="Spark also with the JIT's quick tier only and the serial collector (largest size)")
    ap.add_argument("--out", default=str(REPO / "bench" / "SPARK.md"), help="'-': print only")
    ap.add_argument("--json", default=str(DATA / "spark.json"))
    ap.add_argument("--reuse", action="store_true",
                    help="the job's export, workspace and ingest figures of an earlier run, when there")
    ap.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        engine, path, out_dir, opts = args.worker
        print(json.dumps(worker(engine, path, out_dir, opts)))
        return
    DATA.mkdir(parents=True, exist_ok=True)
    variants = {"default JVM": ""}  # Java's own JIT and collector, given explicitly
    if args.jvm_variants:
        variants["C1 + serial GC"] = C1_OPTS
    started = time.time()
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO).stdout.strip()
    load0 = os.getloadavg()[0]
    top = max(args.ranks)
    k = args.kernels_per_rank
    paths = rank_files(top, k, args.workers)
    par, one, job, db = ingest_scale_out(paths, args.workers, f"{top}x{k}", args.reuse)
    ingest = {"ranks": top, "kernels_per_rank": k, "workers": args.workers, "parallel": par, "single": one}
    sizes = []
    for n in sorted(args.ranks):
        export = job if n == top else subset_export(job, n)
        ws = db if n == top else subset_workspace(paths, n, f"{top}x{k}")
        res = compare(ws, export, f"{n} ranks", variants if n == top else {"default JVM": ""})
        res.update(ranks=n, kernels=n * k)
        sizes.append(res)
    single = None
    if args.single:
        src = generate(DATA / f"single_{args.single}.sqlite", args.single, 0)
        sdb, sexp = DATA / f"single_{args.single}.duckdb", DATA / f"single_{args.single}_export"
        log(f"one trace of {args.single:,} kernels: ingest + export ...")
        if args.reuse and (sexp / "_traceql.json").exists() and sdb.exists():
            t = None
        else:
            t = timed_pool(_whole_job, [([str(src)], str(sdb), str(sexp))], 1)
        single = compare(sdb, sexp, f"one trace of {args.single:,} kernels", {"default JVM": ""})
        single.update(kernels=args.single, ingest=t)
    meta = (f"Written by `python bench/spark.py {' '.join(argv if argv is not None else sys.argv[1:])}` on "
            f"{time.strftime('%Y-%m-%d %H:%M', time.localtime(started))} UTC, traceql {head}, pyspark "
            f"{__import__('pyspark').__version__}, Java 17; {os.cpu_count()} cores shared with other work: 1-minute "
            f"load {load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end ({time.time() - started:.0f} s in all). "
            "Wall times on a loaded machine stretch; CPU times move less.")
    text = render({"text": meta}, ingest, sizes, single)
    Path(args.json).write_text(json.dumps({"ingest": ingest, "sizes": sizes, "single": single}, indent=1))
    if args.out == "-":
        print(text)
    else:
        Path(args.out).write_text(text)
        log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
