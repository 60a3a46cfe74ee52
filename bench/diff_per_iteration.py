"""Time queries/_internal/diff_per_iteration.sql (one side of `traceql diff`, iteration by iteration) on
generated runs of growing size, and EXPLAIN it: the time per kernel row, wall and CPU seconds,
and the join operators of its plan (no nested loop, blockwise nested loop or cross product).

    .venv/bin/python bench/diff_per_iteration.py [--kernels 100000 300000 1000000] [--repeat 3]

The runs are fixtures/gen_diff.py's (8 kernels, 1 copy, 10 API calls and 6 NVTX ranges per
ProfilerStep; the anchor is its ProfilerStep ranges, as `traceql diff` finds it), generated and
ingested once into bench/data/per_iteration/ (not timed). The query runs in-process on the
workspace; CPU seconds are this process's (DuckDB's threads included). Writes its section of
bench/DIFF.md (between the markers; the rest of the file is kept) and prints it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

import traceql  # noqa: E402
from fixtures.gen_diff import generate  # noqa: E402
from traceql.query import library  # noqa: E402

OUT = REPO / "bench" / "data" / "per_iteration"
DOC = HERE / "DIFF.md"
BEGIN, END = "<!-- diff_per_iteration.py: begin -->", "<!-- diff_per_iteration.py: end -->"
KERNELS_PER_STEP = 8
BAD = re.compile(r"NESTED_LOOP|BLOCKWISE_NL|CROSS_PRODUCT")


def workspace(kernels: int) -> Path:
    """The ingested run with KERNELS kernel rows (made once)."""
    OUT.mkdir(parents=True, exist_ok=True)
    db = OUT / f"run_{kernels}.duckdb"
    if not db.exists():
        src = OUT / f"run_{kernels}.sqlite"
        generate(src, seed=1, steps=kernels // KERNELS_PER_STEP)
        traceql.ingest([src], db=db)
        src.unlink()
    return db


def operators(node) -> list[str]:
    """Every operator name of an EXPLAIN (FORMAT json) plan."""
    out = [node.get("name", "")]
    for child in node.get("children", []):
        out += operators(child)
    return out


def measure(kernels: int, repeat: int) -> dict:
    db = workspace(kernels)
    q = library.get("_internal/diff_per_iteration")
    with traceql.open(db) as ws:
        family = next(r["family"] for r in ws.analyze(["iterations"]).evidence["iterations"].to_pylist()
                      if r["source"] == "ProfilerStep")
        params = library.bind(q, {"trace_id": 1, "anchor_source": "ProfilerStep", "anchor_family": family,
                                  "kernel_key": "name", "anchor_leaf": False})
        rows = {name: ws.execute(f"SELECT count(*) FROM {name}").fetchone()[0]
                for name in ("kernel", "api_call", "nvtx_range", "memcpy")}
        plan = ws.execute("EXPLAIN (FORMAT json) " + q.sql, params).fetchall()
        ops = [op for tree in json.loads(plan[0][1]) for op in operators(tree)]
        runs = []
        for _ in range(repeat):
            wall, cpu = time.perf_counter(), time.process_time()
            out = ws.execute(q.sql, params).fetchall()
            runs.append((time.perf_counter() - wall, time.process_time() - cpu))
    wall, cpu = sorted(r[0] for r in runs)[len(runs) // 2], sorted(r[1] for r in runs)[len(runs) // 2]
    joins = sorted({op for op in ops if "JOIN" in op or BAD.search(op)})
    return {"kernels": rows["kernel"], "rows": rows, "out_rows": len(out), "wall_s": wall, "cpu_s": cpu,
            "runs": runs, "joins": joins, "nested": sorted({op for op in ops if BAD.search(op)})}


def write(results: list[dict], load: str) -> str:
    lines = [BEGIN, "", "## queries/_internal/diff_per_iteration.sql by size (bench/diff_per_iteration.py)", "",
             f"Generated runs (fixtures/gen_diff.py, ProfilerStep anchor, the first 2000 iterations kept); "
             f"median of {len(results[0]['runs'])} runs in-process; {os.cpu_count()} cores, load average "
             f"{load} from other work while it ran (wall times are inflated by it; CPU seconds less so).", "",
             "| kernels | API calls | NVTX ranges | result rows | wall s | CPU s | CPU µs per kernel | "
             "join operators (EXPLAIN) | nested loops |",
             "|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for r in results:
        lines.append(f"| {r['kernels']:,} | {r['rows']['api_call']:,} | {r['rows']['nvtx_range']:,} | "
                     f"{r['out_rows']:,} | {r['wall_s']:.2f} | {r['cpu_s']:.2f} | "
                     f"{1e6 * r['cpu_s'] / r['kernels']:.2f} | {', '.join(r['joins'])} | "
                     f"{', '.join(r['nested']) or 'none'} |")
    lines += ["", END]
    section = "\n".join(lines)
    text = DOC.read_text() if DOC.exists() else ""
    if BEGIN in text and END in text:
        text = text[: text.index(BEGIN)] + section + text[text.index(END) + len(END):]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    DOC.write_text(text)
    return section


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernels", type=int, nargs="+", default=[100_000, 300_000, 1_000_000])
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args(argv)
    results, loads = [], []
    for n in a.kernels:
        db = workspace(n)
        loads.append(os.getloadavg()[0])
        results.append(measure(n, a.repeat))
        print(json.dumps({k: v for k, v in results[-1].items() if k != "runs"}, default=str), db, flush=True)
        loads.append(os.getloadavg()[0])
    print(write(results, f"{min(loads):.0f}-{max(loads):.0f}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
