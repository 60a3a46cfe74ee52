"""A command run from the shell that succeeded ends without Python's shutdown (traceql.cli.main
_exit_now), in a new interpreter as a user starts it: what it printed is all there, byte for
byte and with exit code 0, and exit functions someone registered still run (then the shutdown is
not skipped)."""

import csv
import io
import subprocess
import sys

import traceql

from ..util import REPO, ingested

CS336 = "cs336-jsun-train-fwdbwd-rtx3070ti-nsys2025.1/result.sqlite"

# __main__ of a new interpreter, as `python -m traceql ARGS` runs it, with an object whose
# __del__ Python's shutdown calls (when __main__'s globals are cleared), and with --atexit an
# exit function
PROBE = """
import runpy, sys
class Probe:
    def __del__(self):
        sys.stderr.write("python shut down\\n")
probe = Probe()
if sys.argv[1] == "--atexit":
    del sys.argv[1]
    import atexit
    atexit.register(lambda: sys.stderr.write("exit function ran\\n"))
sys.argv[0] = "traceql"
runpy.run_module("traceql", run_name="__main__")
"""


def _run(*args):
    return subprocess.run([sys.executable, "-c", PROBE, *map(str, args)], capture_output=True, text=True,
                          cwd=REPO, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "COLUMNS": "120"})


def test_a_report_ends_without_the_shutdown_and_prints_everything(tmp_path_factory, tmp_path):
    db = ingested(tmp_path_factory, CS336)
    with traceql.open(db) as ws:
        want = ws.report("kernel").to_pylist()
    assert len(want) > 50  # more than a pipe's first write
    out = _run("--db", db, "report", "--by", "kernel", "--format", "csv")
    assert out.returncode == 0, out.stderr
    assert "python shut down" not in out.stderr  # the shutdown was skipped
    rows = list(csv.DictReader(io.StringIO(out.stdout)))
    assert [r["name"] for r in rows] == [w["name"] for w in want]
    assert [int(r["total_ns"]) for r in rows] == [w["total_ns"] for w in want]
    exported = tmp_path / "kernel.csv"
    out = _run("--db", db, "report", "--by", "kernel", "--format", "csv", "-o", exported)
    assert out.returncode == 0, out.stderr
    assert "python shut down" not in out.stderr
    assert exported.read_text() == _run("--db", db, "report", "--by", "kernel", "--format", "csv").stdout


def test_exit_functions_and_errors_get_the_usual_shutdown(tmp_path_factory):
    db = ingested(tmp_path_factory, CS336)
    out = _run("--atexit", "--db", db, "report", "--by", "kernel", "--format", "csv")
    assert out.returncode == 0, out.stderr
    assert "exit function ran" in out.stderr and "python shut down" in out.stderr
    bad = _run("--db", db, "report", "--by", "nothing")
    assert bad.returncode == 2 and "python shut down" in bad.stderr
