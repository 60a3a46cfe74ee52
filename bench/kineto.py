"""PyTorch profiler (Kineto) JSON ingest on a generated trace of a million kernels.

    python bench/kineto.py                       # 1 M kernels, writes bench/KINETO.md
    python bench/kineto.py --kernels 100000 --out -   # a quick look, nothing written

The input comes from fixtures/gen_kineto.py (a training loop: forward ops on the main thread,
backward nodes on the autograd thread, optimizer and memset, cpu_op args with shapes, ac2g and
fwdbwd flows, python_function and memory events that are not read), gzip-compressed, cached in
bench/data/ (git-ignored).

Measured, each as a child process (wall time and its own peak RSS, os.wait4), one after the
other, in this order:

- parse only: the whole file decompressed and decoded into Python objects by each parser
  (msgspec, orjson, the standard json module with the garbage collector off, ijson's yajl2_c
  streaming backend); msgspec typed as traceql reads it (every event decoded, ts, dur and args
  kept as raw text: the parse traceql itself does); DuckDB's read_json on the decompressed file.
  orjson and ijson are installed from PyPI into their own venv under bench/data/ (never into
  .venv); a parser that is not there is reported so.
- traceql stage: traceql.sources.kineto.stage alone (read and parse the file into DuckDB's raw tables).
- traceql ingest: `traceql ingest` (read, adapters, every derived table, stored reports).
- HTA's loader: `TraceAnalysis(trace_dir=...)` of HolisticTraceAnalysis from PyPI, in its own
  venv under bench/data/ (`--setup-hta` creates it, with pandas < 3: HTA 0.5.0 fails under
  pandas 3), on a folder holding only this trace.
Parse-only children run under a 12 GB address-space limit (a decoder that needs more reports
MemoryError rather than crowding the shared machine).

Reported: seconds, peak RSS, and ingest / the fastest parse-only time. The machine is shared:
the 1-minute load average at the start of each measurement is recorded next to it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import run as harness  # bench/run.py, next to this file

REPO = harness.REPO
DATA = harness.DATA
PARSERS_VENV = DATA / "parsers-venv"
HTA_VENV = DATA / "hta-venv"
HTA_VERSION = "0.5.0"

# Each parse-only child: decode the whole (decompressed) file, print the number of events.
PARSE = {
    "msgspec": "import gzip, msgspec; d = msgspec.json.decode(gzip.open(P, 'rb').read()); print(len(d['traceEvents']))",
    "orjson": "import gzip, orjson; d = orjson.loads(gzip.open(P, 'rb').read()); print(len(d['traceEvents']))",
    "json (gc off)": "import gc, gzip, json; gc.disable(); d = json.load(gzip.open(P, 'rb')); print(len(d['traceEvents']))",
    "ijson yajl2_c (streaming)": "import gzip, ijson; print(sum(1 for _ in ijson.items(gzip.open(P, 'rb'), 'traceEvents.item', use_float=False)))",
    "msgspec typed, raw ts/dur/args (traceql's decode)": (
        "import gzip, msgspec\n"
        "from typing import Union\n"
        "R = msgspec.Raw\n"
        "class E(msgspec.Struct, gc=False):\n"
        "    ph: Union[str, None] = None; cat: Union[str, None] = None; name: Union[str, None] = None\n"
        "    pid: Union[int, str, None] = None; tid: Union[int, str, None] = None; ts: R = R(); dur: R = R()\n"
        "    id: Union[int, str, None] = None; args: R = R()\n"
        "class D(msgspec.Struct):\n"
        "    traceEvents: list[E] = []\n"
        "print(len(msgspec.json.decode(gzip.open(P, 'rb').read(), type=D).traceEvents))"),
    "DuckDB read_json (whole object)": (
        "import duckdb, gzip, shutil, tempfile, os\n"
        "t = tempfile.NamedTemporaryFile(suffix='.json', delete=False, dir=os.path.dirname(P)); "
        "shutil.copyfileobj(gzip.open(P, 'rb'), t); t.close()\n"
        "try:\n"
        "    c = duckdb.connect(); c.execute(\"SET memory_limit='16GB'\")\n"
        "    print(c.execute(\"SELECT len(traceEvents) FROM read_json(?, format='unstructured', "
        "maximum_object_size=4000000000, columns={'traceEvents': 'JSON[]'})\", [t.name]).fetchone()[0])\n"
        "finally:\n"
        "    os.unlink(t.name)"),
}
# Parse-only children may hold the whole document several times over: they get an address-space
# limit, so that one that needs more fails with MemoryError instead of crowding the shared machine.
PARSE_LIMIT_GB = 12
LIMIT = (f"import resource; resource.setrlimit(resource.RLIMIT_AS, ({PARSE_LIMIT_GB} << 30, {PARSE_LIMIT_GB} << 30))\n")
STAGE = ("import duckdb, sys; from pathlib import Path; from traceql.sources import kineto; "
         "from traceql.core.resources import read_schema\n"
         "c = duckdb.connect(); c.execute(\"SET memory_limit='3GB'\"); c.execute(\"ATTACH ':memory:' AS raw\")\n"
         "r = kineto.stage(c, Path(P), read_schema('kineto/raw.sql')); print(r.rows['kineto_event'])")
HTA = ("import sys, logging; logging.disable(logging.CRITICAL)\n"
       "from hta.trace_analysis import TraceAnalysis\n"
       "t = TraceAnalysis(trace_dir=D); tr = t.t.get_trace(0); print(len(tr))")


def kineto_input(kernels: int, memory: bool = False) -> Path:
    """The generated trace of KERNELS kernels (memory: with '[memory]' events, gen_kineto --memory),
    cached in bench/data/."""
    DATA.mkdir(parents=True, exist_ok=True)
    path = DATA / f"kineto_{kernels}{'_memory' if memory else ''}.json.gz"
    if not path.exists():
        part = path.with_name("part_" + path.name)
        harness.log(f"generating {path.name} ...")
        p = harness.run_child([sys.executable, "-m", "fixtures.gen_kineto", "--kernels", str(kernels), "-q",
                               "--force", "-o", str(part), *(["--memory"] if memory else [])],
                              env={"PYTHONPATH": str(REPO)})
        if p.rc != 0:
            raise SystemExit(f"generating {path.name} failed:\n{p.err}")
        part.rename(path)
    return path


def setup_venv(venv: Path, packages: list[str]) -> str:
    """A venv under bench/data/ with PACKAGES from the package index; '' or what went wrong."""
    stamp = venv / ".installed"
    if stamp.exists():
        return ""
    shutil.rmtree(venv, ignore_errors=True)
    for cmd in ([sys.executable, "-m", "venv", str(venv)],
                [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", *packages]):
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            return f"`{' '.join(cmd[2:])}` failed: {(p.stderr.strip().splitlines() or ['?'])[-1]}"
    stamp.write_text(" ".join(packages) + "\n")
    return ""


def child(python: Path, code: str, env: dict, timeout: float) -> dict:
    p = harness.run_child([str(python), "-c", code], env=env, timeout=timeout)
    ok = p.rc == 0 and not p.timed_out
    out = (p.out.strip().splitlines() or [""])[-1]
    lines = p.err.strip().splitlines() or ["?"]
    first_error = next((ln for ln in lines if "Error" in ln), lines[-1])  # DuckDB's error ends in a caret line
    problem = "" if ok else (f"timed out after {timeout:.0f} s" if p.timed_out else first_error.strip()[:200])
    return dict(secs=p.secs if ok else None, cpu=p.cpu if ok else None, rss_mb=p.rss_mb, load=p.load, out=out,
                problem=problem)


def measure(kernels: int, timeout: float, hta: bool, reuse: dict | None = None) -> dict:
    src = kineto_input(kernels)
    raw_mb = sum(len(b) for b in _chunks(src)) / 1e6
    res = dict(kernels=kernels, file_mb=src.stat().st_size / 1e6, json_mb=raw_mb, parse={})
    parsers_py = PARSERS_VENV / "bin" / "python"
    if reuse:  # the parsers' and HTA's figures of an earlier run on the same input
        res["parse"], res["hta"] = reuse["parse"], reuse["hta"]
        for v in list(res["parse"].values()) + [res["hta"]]:
            v["reused"] = True
    for name, code in ([] if reuse else PARSE.items()):
        py = Path(sys.executable) if name.startswith(("msgspec", "json", "DuckDB")) else parsers_py
        if not py.exists():
            res["parse"][name] = dict(secs=None, problem=f"not installed ({_shown(py)}; --setup-parsers installs it)")
            continue
        harness.log(f"parse only: {name} ...")
        res["parse"][name] = child(py, f"P = {str(src)!r}\n" + LIMIT + code, {}, timeout)
        harness.log(f"  {res['parse'][name]}")
    harness.log("traceql stage ...")
    res["stage"] = child(Path(sys.executable), f"P = {str(src)!r}\n" + STAGE, {"PYTHONPATH": str(REPO)}, timeout)
    harness.log(f"  {res['stage']}")
    harness.log("traceql ingest ...")
    db = DATA / f"kineto_{kernels}.duckdb"
    res["ingest"] = harness.measure_ingest(src, db, runs=1, budget=0)
    for p in (db, db.with_name(db.name + ".wal")):
        p.unlink(missing_ok=True)
    harness.log(f"  {res['ingest']['secs']:.1f} s, {res['ingest']['rss_mb']:.0f} MB")
    if reuse:
        pass
    elif hta and (HTA_VENV / "bin" / "python").exists():
        folder = DATA / f"hta_kineto_{kernels}"
        folder.mkdir(exist_ok=True)
        link = folder / src.name
        if not link.exists():
            os.symlink(src, link)
        harness.log("HTA loader ...")
        res["hta"] = child(HTA_VENV / "bin" / "python", f"D = {str(folder)!r}\n" + HTA, {"PYTHONPATH": ""}, timeout)
        res["hta"]["version"] = HTA_VERSION
        harness.log(f"  {res['hta']}")
    else:
        res["hta"] = dict(secs=None, problem=f"not installed ({_shown(HTA_VENV)}; --setup-hta installs it)")
    return res


def _shown(path: Path) -> str:
    """PATH relative to the repository when it is inside (no path of this machine in a results file)."""
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def _chunks(src: Path):
    import gzip
    with gzip.open(src, "rb") as fh:
        while chunk := fh.read(1 << 24):
            yield chunk


def render(r: dict, meta: str) -> str:
    ok = {k: v for k, v in r["parse"].items() if v.get("secs")}
    fastest_name = min(ok, key=lambda k: ok[k]["secs"]) if ok else None
    fastest = ok[fastest_name]["secs"] if ok else None
    fastest_cpu = ok[fastest_name].get("cpu") if ok else None
    ing = r["ingest"]
    lines = [
        "# Kineto JSON ingest, generated trace (`make bench-kineto`, bench/kineto.py)", "", meta, "",
        f"Input: `fixtures/gen_kineto.py --kernels {r['kernels']:,}`: {r['file_mb']:,.0f} MB gzip, "
        f"{r['json_mb']:,.0f} MB of JSON.", "",
        "| what | seconds | CPU seconds | peak RSS MB | x fastest parse | x its CPU | load | note |",
        "|---|---:|---:|---:|---:|---:|---:|---|"]

    def row(name, secs, rss, load, note="", cpu=None):
        x = f"{secs / fastest:.2f}" if secs and fastest else ""
        xc = f"{cpu / fastest_cpu:.2f}" if secs and cpu and fastest_cpu else ""
        c = f"{cpu:,.1f}" if cpu else ""
        lines.append(f"| {name} | {secs:,.1f} | {c} | {rss:,.0f} | {x} | {xc} | {load} | {note} |" if secs else
                     f"| {name} | - | | {rss if isinstance(rss, str) else f'{rss:,.0f}'} | | | {load} | {note} |")

    def note(v, extra=""):
        return "; ".join(x for x in (v.get("problem") or extra, "earlier run" if v.get("reused") else "") if x)

    for name, v in r["parse"].items():
        row(f"parse only: {name}", v.get("secs"), v.get("rss_mb", ""), v.get("load", ""),
            note(v, "fastest" if name == fastest_name else ""), v.get("cpu"))
    row("traceql: read and stage (traceql.sources.kineto.stage)", r["stage"].get("secs"), r["stage"].get("rss_mb", ""),
        r["stage"].get("load", ""), r["stage"].get("problem", ""), r["stage"].get("cpu"))
    row("**traceql ingest** (everything)", ing["secs"], ing["rss_mb"], ing["load"], f"workspace {ing['db_mb']:,.0f} MB",
        ing.get("cpu"))
    h = r.get("hta", {})
    row(f"HTA {h.get('version', '')} loader (TraceAnalysis)", h.get("secs"), h.get("rss_mb", ""), h.get("load", ""),
        note(h))
    lines += ["", "Reading it: the parse-only lines decode the whole document into memory (ijson streams it); "
              "traceql decodes 16 MB blocks, so its Python side stays flat while DuckDB holds the staged events "
              "(spilling beyond TRACEQL_MEMORY_LIMIT, 3 GB). 'x fastest parse' divides by the fastest parse-only "
              "time ('x its CPU': CPU seconds, user + system of the child and its threads, over that parser's). "
              "A parser that failed shows why (the parse-only children run under a "
              f"{PARSE_LIMIT_GB} GB address-space limit)."]
    if ing.get("profile", {}).get("phases"):
        lines += ["", "Where ingest's SQL time goes (TRACEQL_TIMING=1; CPU: the process's, DuckDB's threads included):", "",
                  "| phase | seconds | CPU seconds | statements |", "|---|---:|---:|---:|"]
        lines += [f"| {p['phase']} | {p['secs']:.1f} | {p.get('cpu', float('nan')):.1f} | {p['statements']} |"
                  for p in ing["profile"]["phases"]]
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernels", type=int, default=1_000_000)
    ap.add_argument("--timeout", type=float, default=3000)
    ap.add_argument("--setup-hta", action="store_true", help=f"install HolisticTraceAnalysis {HTA_VERSION} into {HTA_VENV}")
    ap.add_argument("--setup-parsers", action="store_true", help=f"install orjson and ijson into {PARSERS_VENV}")
    ap.add_argument("--wait-load", type=float, default=0)
    ap.add_argument("--wait-max", type=float, default=0)
    ap.add_argument("--out", default=str(REPO / "bench" / "KINETO.md"))
    ap.add_argument("--json")
    ap.add_argument("--reuse", help="the --json file of an earlier run on the same input: keep its parse-only and "
                                    "HTA figures, measure traceql again (marked 'earlier run' in the table)")
    a = ap.parse_args(argv)
    if a.setup_parsers:
        problem = setup_venv(PARSERS_VENV, ["orjson", "ijson"])
        if problem:
            harness.log(f"parsers: {problem}")
    if a.setup_hta:
        # HTA 0.5.0 fails under pandas 3 (an int16 column it fills with larger row numbers)
        problem = setup_venv(HTA_VENV, [f"HolisticTraceAnalysis=={HTA_VERSION}", "pandas<3"])
        if problem:
            harness.log(f"HTA: {problem}")
    waited = harness.wait_for_quiet(a.wait_load, time.monotonic() + a.wait_max) if a.wait_load else 0
    reuse = json.loads(Path(a.reuse).read_text()) if a.reuse else None
    if reuse and reuse["kernels"] != a.kernels:
        raise SystemExit(f"--reuse {a.reuse} measured {reuse['kernels']} kernels, not {a.kernels}")
    res = measure(a.kernels, a.timeout, hta=True, reuse=reuse)
    import duckdb
    import msgspec
    meta = (f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores, load average "
            f"{harness.load1()} at the end (waited {waited:.0f} s for a quiet machine); traceql on DuckDB "
            f"{duckdb.__version__}, msgspec {msgspec.__version__}, Python {sys.version.split()[0]}.")
    text = render(res, meta)
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1, default=str))
    if a.out == "-":
        print(text)
    else:
        Path(a.out).write_text(text)
        print(text)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main()
