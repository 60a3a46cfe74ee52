"""Calibration of `traceql diff --gate 5` on the real traces, next to nsys-ai's `diff --no-ai`.

    python bench/diff_gate.py                       # bench/data/diff_gate.json and bench/DIFF.md
    python bench/diff_gate.py --render              # bench/DIFF.md again from the JSON

For every trace under ../shared/traces whose iterations (analyze's iterations rule) number 8 or
more, A/A pairs of one program, where nothing changed:

- halves: the trace cut in two at the start of its middle iteration (bench/diff_pairs.py's cut
  for SQLite exports, kineto_halves for PyTorch profiler traces);
- ranks: the first two processes that ran kernels, each alone (multi-process exports).

and, for each A/A pair, B with each of the trace's three longest kernels (summed time) 10 % and
20 % slower, physically (fixtures/slowdown.py: later GPU work on the device moved). Each pair
runs as fresh processes: `traceql diff A B --gate 5 --format json` and, on Nsight Systems pairs,
`nsys-ai diff A B --no-ai --format json` (bench/data/nsysai-venv; `python bench/run.py
--setup-nsys-ai` installs it). Recorded: whether the gate tripped (exit 7) and on what, whether
the slowed kernel is called slower and named by the gate, the time the slowdown injected per
iteration as a percentage of A's iteration time (what the gate's rule (c) reads), nsys-ai's
verdict and the slowed kernel's place among its regressions; CPU seconds of each child. A is
ingested once into a workspace of its own, and traceql diff takes it from there (the same path
and SHA-256), so each run ingests B only.

    python bench/diff_gate.py --only cs336 --json bench/data/gate-1.json   # one part ...
    python bench/diff_gate.py --render bench/data/gate-*.json              # ... the report of all
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("bench_diff_pairs", HERE / "diff_pairs.py")
pairs = importlib.util.module_from_spec(_spec)
sys.modules["bench_diff_pairs"] = pairs
_spec.loader.exec_module(pairs)
small, bench = pairs.small, pairs.bench
REPO, DATA, TRACES = bench.REPO, bench.DATA, bench.TRACES
sys.path.insert(0, str(REPO))

from fixtures.slowdown import is_kineto, kernel_totals, slow_down  # noqa: E402

GATE = 5.0
FACTORS = (1.1, 1.2)
MIN_ITERATIONS = 8
OUT = DATA / "gate"
BEGIN, END = "<!-- diff_gate.py: begin -->", "<!-- diff_gate.py: end -->"


def candidates() -> list[Path]:
    out = []
    for d in sorted(p for p in TRACES.iterdir() if p.is_dir()):
        out += [f for f in sorted(d.iterdir()) if f.is_file() and f.suffix not in (".txt", ".md", ".csv")]
    return out


def probe(src: Path) -> dict | None:
    """The trace's iterations: anchor, count, the start of the middle one (trace clock, ns), the
    processes with kernels; None when it cannot be read."""
    import traceql

    db = OUT / f"probe-{src.parent.name}.duckdb"
    db.unlink(missing_ok=True)
    try:
        traceql.ingest([src], db=db)
    except traceql.TraceqlError:
        return None
    with traceql.open(db) as ws:
        its = [r for r in ws.analyze(["iterations"]).evidence["iterations"].to_pylist() if r["source"]]
        pids = [p for (p,) in ws.execute("SELECT DISTINCT pid FROM kernel WHERE pid IS NOT NULL ORDER BY 1").fetchall()]
        gpus = ws.execute("SELECT count(*), min(name) FROM device").fetchone()
    if not its:
        return {"iterations": 0}
    counts: dict = {}
    for r in its:
        counts.setdefault((r["source"], r["family"], r["pid"], r["tid"]), []).append(r)
    top = max(counts, key=lambda k: (len(counts[k]), str(k)))
    mine = sorted(counts[top], key=lambda r: r["ts"])
    return {"iterations": len(mine), "source": top[0], "family": top[1], "mid_ns": mine[len(mine) // 2]["ts"],
            "pids": pids, "gpus": list(gpus)}


def make_aa(src: Path, info: dict, how: str, out: Path) -> tuple[Path, Path]:
    stem = f"{src.parent.name}-{how}"
    if is_kineto(src):
        a, b = out / f"{stem}-a.json.gz", out / f"{stem}-b.json.gz"
        pairs.kineto_halves(src, a, b, False, at_us=info["mid_ns"] / 1000)
        return a, b
    a, b = out / f"{stem}-a.sqlite", out / f"{stem}-b.sqlite"
    if how == "halves":
        pairs.cut(src, a, 0, info["mid_ns"])
        pairs.cut(src, b, info["mid_ns"], 2 ** 62)
    else:
        pairs.keep_process(src, a, info["pids"][0])
        pairs.keep_process(src, b, info["pids"][1])
    return a, b


def run_traceql(a: Path, b: Path, db: Path) -> dict:
    p = small.run([sys.executable, "-m", "traceql", "--db", str(db), "diff", str(a), str(b), "--gate", f"{GATE:g}",
                   "--format", "json"], env={"PYTHONPATH": str(REPO)}, timeout=900)
    out = {"rc": p.rc, "secs": round(p.secs, 2), "cpu": round(p.cpu, 2)}
    try:
        doc = json.loads(p.out)
    except ValueError:
        out["problem"] = bench._failure(p)
        return out
    s, rows = doc["summary"], doc["rows"]
    out.update(verdict=s["verdict"], iterations=[s["a"]["iterations"], s["b"]["iterations"]],
               anchor=[s["a"]["iteration_source"], s["a"]["iteration_family"]], notes=s["notes"],
               warnings=s["warnings"], per_iteration=s["per_iteration"],
               gate=[[r["section"], r["key"], round(r["gate_pct"], 2), r["gate_q"]] for r in rows
                     if r["gate_pct"] is not None and r["gate_pct"] > GATE and r["gate_q"] is not None
                     and r["gate_q"] < s["alpha"] and not r["communication"]
                     and (r["section"] in ("kernel", "op", "range") or r["key"] in ("iteration time", "GPU operations"))],
               head={r["key"]: [r["verdict"], r["effect_pct"], r["q_value"]] for r in rows
                     if r["section"] == "total" and r["key"] in ("iteration time", "GPU operations")},
               kernels={r["key"]: [r["verdict"], r["effect_pct"], r["gate_pct"], r["q_value"]] for r in rows
                        if r["section"] == "kernel"},
               iteration_a_ns=next((r["time_a_ns"] for r in rows if r["key"] == "iteration time"), None))
    return out


def run_nsysai(n, a: Path, b: Path) -> dict:
    if is_kineto(a):
        return {"problem": "reads no PyTorch profiler traces"}
    return pairs.run_nsysai(n, a, b)


def measure(a: Path, b: Path, n, db: Path, slowed: str | None = None) -> dict:
    t = run_traceql(a, b, db)
    if slowed is not None and "kernels" in t:
        k = t.pop("kernels").get(slowed)
        t["slowed_row"] = k
    else:
        t.pop("kernels", None)
    r = {"traceql": t, "nsys-ai": run_nsysai(n, a, b)}
    if slowed is not None and "regressions" in r["nsys-ai"]:
        names = [x[0] for x in r["nsys-ai"]["regressions"]]
        r["nsys-ai"]["slowed_rank"] = names.index(slowed) + 1 if slowed in names else None
    for key in ("regressions", "improvements"):
        if key in r["nsys-ai"]:
            r["nsys-ai"][key] = len(r["nsys-ai"][key])
    return r


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", type=Path, default=DATA / "diff_gate.json")
    ap.add_argument("--out", type=Path, default=HERE / "DIFF.md")
    ap.add_argument("--render", nargs="*", type=Path, default=None, metavar="JSON",
                    help="only write --out from these JSON files of runs (their traces together)")
    ap.add_argument("--only", metavar="WORD", default=None, help="only the traces whose folder contains WORD")
    ap.add_argument("--no-nsys-ai", action="store_true")
    a = ap.parse_args(argv)
    if a.render is not None:
        docs = [json.loads(p.read_text()) for p in (a.render or [a.json])]
        doc = {**docs[0], "traces": sorted((t for d in docs for t in d["traces"]), key=lambda t: t["trace"])}
        write(doc, a.out)
        return 0
    OUT.mkdir(parents=True, exist_ok=True)
    n = bench.find_nsysai(DATA / "nsysai-venv", DATA / "nsysai-home")
    if a.no_nsys_ai:
        n.problem = "skipped (--no-nsys-ai)"
    results = []
    for src in candidates():
        if a.only and a.only not in str(src):
            continue
        info = probe(src)
        if not info or info["iterations"] < MIN_ITERATIONS:
            continue
        longest = [name for name, _, _ in kernel_totals(src)[:3]]
        trace = {"trace": str(src.relative_to(TRACES)), **info, "longest": longest, "pairs": []}
        kinds = ["halves"] + (["ranks"] if len(info["pids"]) >= 2 and not is_kineto(src) else [])
        for how in kinds:
            pa, pb = make_aa(src, info, how, OUT)
            db = pa.with_name(pa.name.split(".")[0] + ".duckdb")  # A ingested once: diff takes it from there
            db.unlink(missing_ok=True)
            import traceql

            traceql.ingest([pa], db=db)
            pair = {"how": how, "aa": measure(pa, pb, n, db), "slowed": []}
            print(f"{src.parent.name} {how}: A/A rc {pair['aa']['traceql'].get('rc')}", file=sys.stderr, flush=True)
            for kernel in longest:
                for factor in FACTORS:
                    slow = pb.with_name(pb.name.replace("-b.", f"-b-k{longest.index(kernel)}-{round(factor * 100 - 100)}."))
                    try:
                        facts = slow_down(pb, slow, kernel, factor)
                    except ValueError:
                        pair["slowed"].append({"kernel": kernel, "factor": factor, "problem": "not run in B"})
                        continue
                    m = measure(pa, slow, n, db, slowed=kernel)
                    t = m["traceql"]
                    its, base = (t.get("iterations") or [None, None])[1], t.get("iteration_a_ns")
                    injected = (100.0 * sum(facts["added_ns"].values()) / its / base) if its and base else None
                    pair["slowed"].append({"kernel": kernel, "factor": factor, "instances": facts["instances"],
                                           "injected_pct": injected, **m})
                    print(f"  k{longest.index(kernel)} x{factor}: rc {t.get('rc')} injected {injected}",
                          file=sys.stderr, flush=True)
                    slow.unlink(missing_ok=True)
            trace["pairs"].append(pair)
        results.append(trace)
    doc = {"nsys-ai": n.version, "machine": bench.machine(), "gate": GATE, "traces": results}
    a.json.write_text(json.dumps(doc, indent=1, default=str) + "\n")
    write(doc, a.out)
    return 0


# ------------------------------------------------------------------------------ the report

def _short(name: str, n: int = 48) -> str:
    return name if len(name) <= n else name[: n - 1] + "…"


def write(doc: dict, out: Path) -> None:
    """The calibration section of bench/DIFF.md (between BEGIN and END; the rest is kept)."""
    gate = doc["gate"]
    lines = [BEGIN, "", f"## The gate on real traces: `traceql diff --gate {gate:g}` (bench/diff_gate.py)", ""]
    aa_total = aa_trips = 0
    det = gated = should = should_gated = tot = 0
    n_aa = n_aa_reg = n_tot = n_first = n_reg = 0
    rows = []
    for t in doc["traces"]:
        for p in t["pairs"]:
            aa = p["aa"]["traceql"]
            aa_total += 1
            aa_trips += aa.get("rc") == 7
            na = p["aa"]["nsys-ai"]
            if "verdict" in na:
                n_aa += 1
                n_aa_reg += str(na["verdict"]).startswith("regression")
            its = aa.get("iterations") or [None, None]
            tripped = "; ".join(f"{g[1][:40]} +{g[2]:.1f}%" for g in aa.get("gate") or [])
            listed = f" ({na['regressions']} kernels listed as regressions)" if "regressions" in na else ""
            rows.append(f"| {t['trace'].split('/')[0]} | {p['how']} | {t['source']} ({t['iterations']}) | "
                        f"{its[0]} / {its[1]} | A/A | | | exit {aa.get('rc')}: "
                        f"{tripped or aa.get('verdict', aa.get('problem'))} | "
                        f"{na.get('verdict', na.get('problem', ''))}{listed} |")
            for s in p["slowed"]:
                if "problem" in s:
                    rows.append(f"| | | | | {_short(s['kernel'])} x{s['factor']} | | | {s['problem']} | |")
                    continue
                tq, nq = s["traceql"], s["nsys-ai"]
                tot += 1
                row = tq.get("slowed_row") or [None, None, None, None]
                found = row[0] == "slower"
                named = any(g[0] == "kernel" and g[1] == s["kernel"] for g in tq.get("gate") or [])
                det += found
                gated += tq.get("rc") == 7
                inj = s.get("injected_pct")
                if inj is not None and inj > gate:
                    should += 1
                    should_gated += tq.get("rc") == 7 and named
                if "verdict" in nq:
                    n_tot += 1
                    n_first += nq.get("slowed_rank") == 1
                    n_reg += str(nq["verdict"]).startswith("regression")
                what = "; ".join(f"{g[1][:28]} +{g[2]:.1f}%" for g in tq.get("gate") or [])
                injected = "" if inj is None else f"{inj:.1f}%"
                change = "" if row[1] is None else f" {row[1]:+.1f}%"
                adds = "" if row[2] is None else f", adds {row[2]:.1f}%"
                rank = ("" if "slowed_rank" not in nq else
                        f", kernel #{nq['slowed_rank']}" if nq["slowed_rank"] else ", kernel not listed")
                rows.append(
                    f"| | | | | `{_short(s['kernel'], 40)}` +{round(s['factor'] * 100 - 100)}% | {injected} | "
                    f"{row[0]}{change}{adds} | exit {tq.get('rc')}{': ' + what if what else ''} | "
                    f"{nq.get('verdict', nq.get('problem', ''))}{rank} |")
    lines += [
        f"Machine: {doc['machine']}; nsys-ai {doc.get('nsys-ai') or 'not installed'}. Every trace of "
        f"../shared/traces with {MIN_ITERATIONS} or more iterations; A/A pairs (halves, ranks) and B with each of "
        "the three longest kernels 10 % and 20 % slower, physically (fixtures/slowdown.py).",
        "",
        "| | traceql | nsys-ai 0.3.0 (nsys pairs) |",
        "|---|---|---|",
        f"| A/A pairs that trip the gate (false trips) | {aa_trips} of {aa_total} | verdict regression_likely: "
        f"{n_aa_reg} of {n_aa} |",
        f"| slowdowns whose kernel is called slower (detected) | {det} of {tot} | slowed kernel first among its "
        f"regressions: {n_first} of {n_tot} |",
        f"| slowdowns that trip the gate (exit 7) | {gated} of {tot} | (no gate) verdict regression_likely: "
        f"{n_reg} of {n_tot} |",
        f"| ... of those injecting more than {gate:g} % of A's iteration, gated naming the kernel | "
        f"{should_gated} of {should} | |",
        "",
        "Per pair (injected: the time the slowdown added per iteration of B, as a percentage of A's iteration "
        "time, what rule (c) reads; traceql: the slowed kernel's verdict, its per-call change and the time it "
        "adds per iteration; the gate: exit code and what tripped it):",
        "",
        "| trace | pair | iterations (anchor) | iterations A / B | change | injected | slowed kernel (traceql) | "
        f"traceql --gate {gate:g} | nsys-ai verdict |",
        "|---|---|---|---|---|---|---|---|---|",
        *rows, "", END]
    text = out.read_text() if out.exists() else ""
    section = "\n".join(lines) + "\n"
    if BEGIN in text and END in text:
        text = text[: text.index(BEGIN)] + section.rstrip("\n") + text[text.index(END) + len(END):]
    else:
        head, _, rest = text.partition("\n\n")
        text = f"{head}\n\n{section}\n{rest}" if text else section
    out.write_text(text)


if __name__ == "__main__":
    sys.exit(main())
