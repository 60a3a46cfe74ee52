"""Ingest cost of GPU memory events (issue 38): generated PyTorch profiler traces of up to a
million allocations.

    python bench/memory.py                                   # 10 k, 100 k, 1 M allocations -> bench/MEMORY.md
    python bench/memory.py --allocations 10000 --out -       # a quick look, nothing written

The input: fixtures/gen_kineto.py with memory=True (a training loop whose ops allocate their
outputs and cuBLAS workspaces, backward ops freeing forward outputs on the autograd thread,
'[memory]' events with Addr, Bytes, Total Allocated and Total Reserved as PyTorch since 2022
writes them: 1.2 allocations per kernel, each freed within its step), and the same trace without
memory events (memory=False: the same kernels, ops and ranges), gzip-compressed, cached in
bench/data/ (git-ignored).

Each input is ingested by a child process (`traceql.ingest`, one trace into a new workspace) with
TRACEQL_TIMING=1, and every statement that reads or writes the memory tables is EXPLAINed right
before it runs (the plan on the real size, which is what DuckDB picks joins from). Reported:

- the child's CPU seconds (user + system, os.wait4) and peak RSS, with and without memory events:
  their difference is the whole cost of the memory events (JSON decoding and staging included);
- the CPU seconds of the memory statements alone (the adapter's staging of '[memory]' events, the
  derive steps of schemas/derive/memory_event.sql, the insert into memory_event), from
  TRACEQL_TIMING's per-statement process CPU time;
- both per memory event (row of memory_event) in microseconds;
- the join operators of each memory statement's plan: no nested loop, blockwise nested loop,
  piecewise merge join or cross product, and no hash join with an interval condition.

The machine is shared: the 1-minute load average is recorded next to each run. CPU seconds barely
move with the load; wall seconds do.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

import run as harness  # bench/run.py, next to this file
from kineto import kineto_input  # bench/kineto.py: the generated input, cached

REPO = harness.REPO
DATA = harness.DATA
ALLOCATIONS_PER_KERNEL = 1.2  # fixtures/gen_kineto.py memory=True, 4 layers: 30 allocations per 25 kernels
# statements of the memory path: staging from the adapter, the derive steps, the contract insert
MEMORY_SQL = re.compile(r"memory_stage|raw\.mem_|memory_event|src_memory_event")
FORBIDDEN = ("NESTED_LOOP_JOIN", "BLOCKWISE_NL_JOIN", "PIECEWISE_MERGE_JOIN", "CROSS_PRODUCT")
INEQUALITY = re.compile(r"(?<![<>])(<=|>=|<|>)(?![<>])")

# The child: ingest one trace in-process, EXPLAINing each memory statement before it runs.
CHILD = r'''
import json, os, re, sys
from importlib import import_module
import traceql
transaction = import_module("traceql.store.transaction")
MEMORY_SQL = re.compile(PATTERN)
plans = []

def operators(node):
    info = node.get("extra_info") or {}
    cond = info.get("Conditions") or info.get("Condition") or []
    yield node.get("name"), [cond] if isinstance(cond, str) else cond
    for child in node.get("children", []):
        yield from operators(child)

class Explaining(transaction._TimedConnection):
    def execute(self, sql, *args):
        statements = self._con.extract_statements(sql) if not args else []
        text = "\n".join(l for l in sql.splitlines() if not l.lstrip().startswith("--"))
        if len(statements) <= 1 and MEMORY_SQL.search(text) and re.match(
                r"\s*(SELECT|WITH|INSERT|CREATE\s+(OR\s+REPLACE\s+)?TABLE)\b", text, re.I):
            rows = self._con.execute("EXPLAIN (FORMAT json) " + sql, *args).fetchall()
            plans.append(dict(sql=" ".join(text.split())[:100],
                              ops=[op for _, p in rows for tree in json.loads(p) for op in operators(tree)]))
        return super().execute(sql, *args)

transaction._TimedConnection = Explaining
traceql.ingest([SRC], db=DB)
with traceql.open(DB) as w:
    n = w.sql("SELECT count(*) AS n, count(*) FILTER (WHERE bytes > 0) AS a, max(allocated) AS peak "
              "FROM memory_event").to_pylist()[0]
print(json.dumps(dict(plans=plans, memory_events=n["n"], allocations=n["a"], peak=n["peak"])))
'''


def ingest(src: Path, timeout: float) -> dict:
    db = DATA / (src.name.split(".")[0] + ".duckdb")
    for p in (db, db.with_name(db.name + ".wal")):
        p.unlink(missing_ok=True)
    code = f"SRC = {str(src)!r}\nDB = {str(db)!r}\nPATTERN = {MEMORY_SQL.pattern!r}\n" + CHILD
    p = harness.run_child([sys.executable, "-c", code], env={"PYTHONPATH": str(REPO), "TRACEQL_TIMING": "1"},
                          timeout=timeout)
    for f in (db, db.with_name(db.name + ".wal")):
        f.unlink(missing_ok=True)
    if p.rc != 0 or p.timed_out:
        raise SystemExit(f"ingest of {src.name} failed ({'timed out' if p.timed_out else p.rc}):\n{p.err[-2000:]}")
    out = json.loads(p.out.strip().splitlines()[-1])
    timing = harness.parse_timing(p.err)["every"]
    mem = [s for s in timing if MEMORY_SQL.search(s["sql"])]
    return dict(secs=p.secs, cpu=p.cpu, rss_mb=p.rss_mb, load=p.load, memory_cpu=sum(s["cpu"] for s in mem),
                memory_secs=sum(s["secs"] for s in mem), memory_statements=mem, **out)


def bad_joins(ops) -> list[str]:
    bad = []
    for name, conditions in ops:
        if name in FORBIDDEN:
            bad.append(f"{name} {conditions}")
        elif name == "HASH_JOIN" and any(INEQUALITY.search(c) for c in conditions):
            bad.append(f"HASH_JOIN with an inequality {conditions}")
    return bad


def measure(allocations: int, timeout: float) -> dict:
    kernels = round(allocations / ALLOCATIONS_PER_KERNEL)
    res = {"target": allocations, "kernels": kernels}
    for memory in (True, False):
        src = kineto_input(kernels, memory)
        harness.log(f"ingest {src.name} ...")
        r = ingest(src, timeout)
        r["file_mb"] = src.stat().st_size / 1e6
        harness.log(f"  {r['cpu']:.1f} CPU s, {r['secs']:.1f} s, {r['memory_events']:,} memory events, "
                    f"memory statements {r['memory_cpu']:.2f} CPU s")
        res["with" if memory else "without"] = r
    return res


def render(results: list[dict], meta: str) -> str:
    lines = ["# Ingest cost of GPU memory events (`python bench/memory.py`, issue 38)", "", meta, "",
             "Input: `fixtures/gen_kineto.py --memory` (module doc of bench/memory.py: a training loop whose "
             "ops allocate, 1.2 allocations per kernel, every allocation freed within its step) and the same "
             "trace without memory events. CPU = user + system seconds of the ingesting process (DuckDB's "
             "threads included); `memory SQL` = the statements that stage and derive memory_event "
             "(TRACEQL_TIMING's process CPU per statement). Per event = divided by the rows of memory_event "
             "(allocations and frees); the difference per event divides by the events the trace without memory "
             "lacks (it keeps gen_kineto's one 512-byte event per step).", "",
             "| allocations | memory events | kernels | file MB (with / without) | ingest CPU s with | without "
             "| difference | per event (us) | memory SQL CPU s | per event (us) | wall s with / without "
             "| peak RSS MB with / without | load |",
             "|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---|---|---|"]
    for r in results:
        a, b = r["with"], r["without"]
        n = a["memory_events"]
        diff = a["cpu"] - b["cpu"]
        extra = n - b["memory_events"]  # the trace without memory keeps one 512-byte event per step
        lines.append(
            f"| {a['allocations']:,} | {n:,} | {r['kernels']:,} | {a['file_mb']:,.1f} / {b['file_mb']:,.1f} "
            f"| {a['cpu']:,.2f} | {b['cpu']:,.2f} | {diff:,.2f} | {1e6 * diff / extra:,.2f} | {a['memory_cpu']:,.2f} "
            f"| {1e6 * a['memory_cpu'] / n:,.2f} | {a['secs']:,.1f} / {b['secs']:,.1f} "
            f"| {a['rss_mb']:,.0f} / {b['rss_mb']:,.0f} | {a['load']} / {b['load']} |")
    big = max(results, key=lambda r: r["target"])["with"]
    lines += ["", f"The memory statements of the largest input ({big['memory_events']:,} events), CPU seconds "
              "(process CPU while the statement ran) and the joins of its plan:", "",
              "| statement | CPU s | wall s | joins in the plan | nested loops, cross products, interval hash joins |",
              "|---|---:|---:|---|---|"]
    plans = {p["sql"][:100]: p["ops"] for p in big["plans"]}
    for s in big["memory_statements"]:
        if re.match(r"CREATE TABLE memory_event \(|DROP |SELECT count\(\*\) FROM memory_event WHERE", s["sql"]):
            continue  # the table's DDL, dropping the stage, the ingest's row count
        ops = plans.get(" ".join(s["sql"].split())[:100])
        joins = sorted({name for name, _ in ops if "JOIN" in name or name == "CROSS_PRODUCT"}) if ops else []
        verdict = ("; ".join(bad_joins(ops)) or "none") if ops is not None else "(not a query: no plan)"
        lines.append(f"| `{s['sql'][:70]}` | {s['cpu']:.2f} | {s['secs']:.2f} | {', '.join(joins) or '-'} | {verdict} |")
    bad = [p["sql"] for r in results for p in r["with"]["plans"] if bad_joins(p["ops"])]
    lines += ["", "Every memory statement of every input: " + (
        "no nested loop, no cross product, no hash join with an interval condition."
        if not bad else "JOINS TO FIX: " + "; ".join(bad)), ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--allocations", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--out", default=str(REPO / "bench" / "MEMORY.md"), help="'-': print only")
    ap.add_argument("--json", help="also write the raw figures here")
    a = ap.parse_args(argv)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    results = [measure(n, a.timeout) for n in a.allocations]
    commit = harness.subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                                    text=True).stdout.strip()
    meta = (f"{started}, traceql {commit}, 2 cores shared with other work (load average per run in the "
            f"last column), DuckDB {__import__('duckdb').__version__}, Python {sys.version.split()[0]}.")
    text = render(results, meta)
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))
    if a.out == "-":
        print(text)
    else:
        Path(a.out).write_text(text)
        print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
