"""`traceql report --by NAME FILE` (and summary, analyze): the first answer about an export in one
command. FILE is ingested unless the workspace holds it unchanged, and the answer covers its trace
only: the same rows as `ingest FILE` followed by the command with --trace."""

from __future__ import annotations

import csv
import io
import shutil
import sqlite3

import pytest

from fixtures.gen_nsys import generate

from ..util import cli as traceql
from ..util import sha256


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report_on_file")
    a, b = tmp / "a.sqlite", tmp / "b.sqlite"
    generate(a, layout="3", kernels=60, seed=1)
    generate(b, layout="3", kernels=90, seed=2)
    return a, b


def ok(*args, cwd=None):
    proc = traceql(*map(str, args), cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return proc


def kernel_rows(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text)))


def kernel_facts(path) -> tuple[int, int]:
    """Kernels and their summed duration, read from the export with Python's sqlite3."""
    with sqlite3.connect(path) as con:
        return con.execute('SELECT count(*), sum("end" - start) FROM CUPTI_ACTIVITY_KIND_KERNEL').fetchone()


def test_a_file_is_ingested_once_and_answered(tmp_path, exports):
    a, _ = exports
    first = ok("report", "--by", "kernel", "--format", "csv", a, cwd=tmp_path)  # the default workspace, ./traceql.duckdb
    db = tmp_path / "traceql.duckdb"
    assert first.stderr.splitlines()[0].startswith(f"added trace 1: {a} (")
    assert first.stderr.splitlines()[-1] == "workspace: traceql.duckdb"
    rows = kernel_rows(first.stdout)
    assert (sum(int(r["calls"]) for r in rows), sum(int(r["total_ns"]) for r in rows)) == kernel_facts(a)

    # the same rows as ingest + report, in two commands, on another workspace
    other = tmp_path / "two.duckdb"
    ok("--db", other, "ingest", a)
    assert ok("--db", other, "report", "--by", "kernel", "--format", "csv").stdout == first.stdout

    # asked again: nothing ingested, nothing written, the same answer
    before = sha256(db)
    again = ok("report", "--by", "kernel", "--format", "csv", a, cwd=tmp_path)
    assert again.stderr == ""
    assert again.stdout == first.stdout
    assert sha256(db) == before


def test_the_answer_covers_the_file_s_trace_only(tmp_path, exports):
    a, b = exports
    db = tmp_path / "w.duckdb"
    ok("--db", db, "ingest", b)  # trace 1: another export in the workspace
    proc = ok("--db", db, "report", "--by", "kernel", "--format", "csv", a)
    assert proc.stderr.startswith(f"added trace 2: {a} (")
    assert proc.stdout == ok("--db", db, "report", "--by", "kernel", "--format", "csv", "--trace", "2").stdout
    assert sum(int(r["calls"]) for r in kernel_rows(proc.stdout)) == kernel_facts(a)[0]
    for command in (["summary", "--format", "csv"], ["analyze", "--format", "json"]):
        on_file = ok("--db", db, *command, a)
        assert on_file.stderr == ""  # held unchanged: not ingested again
        assert on_file.stdout == ok("--db", db, *command, "--trace", "2").stdout
        assert on_file.stdout != ok("--db", db, *command, "--trace", "1").stdout


def test_a_changed_file_is_ingested_again(tmp_path, exports):
    a, b = exports
    db = tmp_path / "w.duckdb"
    copy = tmp_path / "run.sqlite"
    shutil.copy(a, copy)
    ok("--db", db, "report", "--by", "kernel", copy)
    shutil.copy(b, copy)  # the run profiled again, exported to the same file
    proc = ok("--db", db, "report", "--by", "kernel", "--format", "csv", copy)
    assert proc.stderr.startswith(f"replaced trace 1: {copy} (")
    rows = kernel_rows(proc.stdout)
    assert (sum(int(r["calls"]) for r in rows), sum(int(r["total_ns"]) for r in rows)) == kernel_facts(b)


def test_a_file_with_trace_or_missing_is_refused(tmp_path, exports):
    a, _ = exports
    db = tmp_path / "w.duckdb"
    proc = traceql("--db", str(db), "report", "--by", "kernel", "--trace", "1", str(a))
    assert proc.returncode == 2
    assert proc.stderr == (f"traceql: error: {a} and --trace 1: give one of them (the report on a file covers "
                           "that file's trace)\n")
    proc = traceql("--db", str(db), "report", "--by", "kernel", str(a), str(a))
    assert proc.returncode == 2
    assert proc.stderr == ("traceql: error: 2 files given: a command answers about one FILE; ingest several with "
                           "'traceql ingest FILE...', then ask about them all (--per-trace splits them by trace)\n")
    missing = tmp_path / "gone.sqlite"
    proc = traceql("--db", str(db), "summary", str(missing))
    assert proc.returncode == 3, proc.stderr
    assert len(proc.stderr.splitlines()) == 1 and str(missing) in proc.stderr
    assert not db.exists()  # nothing written for a file that could not be read


@pytest.mark.parametrize("command", [["report", "--by", "range"], ["summary"], ["analyze", "--rule", "gpu_gaps"]])
def test_what_the_answer_reads_is_built_with_the_ingest(tmp_path, exports, command):
    """The deferred families the command reads (attribution for range, busy for summary and
    gpu_gaps) are built in the ingest's transaction: one copy, build and CHECKPOINT, where a
    separate ingest and first use make two. TRACEQL_TIMING prints each statement."""
    a, _ = exports
    db = tmp_path / "w.duckdb"
    proc = traceql("--db", str(db), *command, str(a), env={"TRACEQL_TIMING": "1", "TRACEQL_DERIVE": "lazy"})
    assert proc.returncode == 0, proc.stderr
    assert checkpoints(proc.stderr) == 1
    # the same answer as ingest, then the command, which builds them on first use: its own CHECKPOINTs
    other = tmp_path / "two.duckdb"
    lazy = {"TRACEQL_TIMING": "1", "TRACEQL_DERIVE": "lazy"}
    assert traceql("--db", str(other), "ingest", str(a), env=lazy).returncode == 0
    two = traceql("--db", str(other), *command, env=lazy)
    assert checkpoints(two.stderr) >= 1
    assert two.stdout == proc.stdout


def checkpoints(timing: str) -> int:
    """The CHECKPOINT statements TRACEQL_TIMING printed: one per transaction written."""
    return sum(line.startswith("[traceql timing]") and line.endswith(" CHECKPOINT") for line in timing.splitlines())


def test_the_kernel_answer_leaves_the_ranges_to_nest(tmp_path, exports):
    """`report --by kernel FILE` reads no NVTX range: the ranges wait in nvtx_range_source, as many
    as the export holds (Python's sqlite3), and nvtx_range is empty; the first range report nests
    them (family 'nesting'): then nvtx_range holds them all and nothing waits."""
    a, _ = exports
    ranges = sqlite3.connect(f"file:{a}?mode=ro", uri=True).execute(
        "SELECT count(*) FROM NVTX_EVENTS WHERE eventType IN (59, 60, 70, 71) AND start IS NOT NULL").fetchone()[0]
    assert ranges > 0
    db = tmp_path / "w.duckdb"
    lazy = {"TRACEQL_DERIVE": "lazy"}
    assert traceql("--db", str(db), "report", "--by", "kernel", str(a), env=lazy).returncode == 0
    proc = traceql("--db", str(db), "sql", "--format", "csv",
                   "SELECT (SELECT list(family ORDER BY family) FROM derived_family) AS fams, "
                   "(SELECT count(*) FROM nvtx_range_source) AS waiting", env=lazy)
    assert proc.returncode == 0, proc.stderr
    assert kernel_rows(proc.stdout) == [{"fams": "['ingest']", "waiting": str(ranges)}]
    assert traceql("--db", str(db), "report", "--by", "range", env=lazy).returncode == 0
    proc = traceql("--db", str(db), "sql", "--format", "csv",
                   "SELECT (SELECT count(*) FROM nvtx_range) AS nested, (SELECT count(*) FROM nvtx_range_source) AS waiting",
                   env=lazy)
    assert kernel_rows(proc.stdout) == [{"nested": str(ranges), "waiting": "0"}]
