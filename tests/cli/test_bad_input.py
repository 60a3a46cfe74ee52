"""The catalog of bad inputs and faults (docs/errors.md, "Bad input and faults"): each case with
its documented behaviour. Cases already covered elsewhere are named here and not repeated:

  missing path, a directory, text / random bytes / empty / JSON   test_detect.py (API) + below (CLI)
  the XML .nvvp session file                                      test_detect.py (CLI)
  SQLite without profiler tables, future major schema version    test_detect.py
  invalid UTF-8 in names                                          test_workspace.py
  same file across commands (replaced)                            test_workspace.py
  an interrupted ingest (killed mid-way, exception mid-way)       test_workspace.py
  a bad file among good ones (all or nothing)                     test_workspace.py
"""

import fcntl
import os
import select
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

import pytest

import traceql
from fixtures.gen_nsys import generate
from traceql.core.errors import InputError, WorkspaceError

from .. import fuzz
from ..util import REPO, generated_nsys, make_sqlite, nsys_stub, sha256, trace_file
from ..util import cli as served

SAXPY = "pipit-saxpy-mpi-cuda-nsys2022.2/saxpy-mpi-cuda_nsys_perlmutter0.sqlite"
GLOBAL_PID = 4242 << 24  # nsys globalPid/globalTid of pid 4242, tid 0 (+ tid)


def cli(*args, cwd=None, env=None, user=None, timeout=120):
    """Run `python -m traceql ARGS` as a user would; user='nobody' drops root's privileges
    (root ignores file modes, so read-only cases would prove nothing as root): a new process,
    else one forked off a warm server (tests.util.cli)."""
    if user is None:
        return served(*args, cwd=cwd, env=env, timeout=timeout)
    preexec = None
    if user == "nobody" and os.geteuid() == 0:
        def preexec():
            os.setgid(65534)
            os.setuid(65534)
    return subprocess.run([sys.executable, "-m", "traceql", *args], capture_output=True, text=True,
                          cwd=cwd or REPO, timeout=timeout, preexec_fn=preexec,
                          env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})


def one_line(proc) -> str:
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].startswith("traceql: error: "), proc.stderr
    return lines[0]


@pytest.fixture(scope="module")
def one_trace(tmp_path_factory):
    """(workspace, source): one nsys stub ingested once for the module."""
    folder = tmp_path_factory.mktemp("one_trace")
    src = nsys_stub(folder / "good.sqlite")
    traceql.ingest([src], db=folder / "ws.duckdb")
    return folder / "ws.duckdb", src


@pytest.fixture
def workspace(tmp_path, one_trace):
    """tmp_path/ws.duckdb, a workspace holding one trace (a copy of one_trace's: an ingest per
    test cost 0.35 CPU s, in some 70 tests), and a copy of its source beside it, good.sqlite."""
    db = tmp_path / "ws.duckdb"
    shutil.copyfile(one_trace[0], db)
    shutil.copyfile(one_trace[1], tmp_path / "good.sqlite")
    return db


@pytest.fixture
def shared_tmp():
    """A temporary folder every user can enter (pytest's tmp_path is private to root)."""
    folder = Path(tempfile.mkdtemp(prefix="traceql-test-"))
    folder.chmod(0o777)
    yield folder
    for p in [folder, *folder.rglob("*")]:
        with __import__("contextlib").suppress(OSError):
            p.chmod(0o777 if p.is_dir() else 0o666)
    shutil.rmtree(folder, ignore_errors=True)


def generated(path: Path, kernels=500) -> Path:
    generate(path, layout="3", kernels=kernels, seed=7)
    return path


def page_of(path: Path, table: str) -> tuple[int, int]:
    """(page size, 1-based root page) of a table in a SQLite file."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        page_size = con.execute("PRAGMA page_size").fetchone()[0]
        root = con.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", [table]).fetchone()[0]
    finally:
        con.close()
    return page_size, root


def damage(path: Path, offset: int, data: bytes) -> Path:
    with open(path, "r+b") as fh:
        fh.seek(offset)
        fh.write(data)
    return path


# -- what a file is: one line naming the file, the exit code of its class ----------------

def _text(d):
    return (d / "notes.sqlite").write_text("hello, world\n") and d / "notes.sqlite"


def _random(d):
    (d / "noise.sqlite").write_bytes(os.urandom(8192))
    return d / "noise.sqlite"


def _empty(d):
    (d / "empty.sqlite").write_bytes(b"")
    return d / "empty.sqlite"


def _truncated(d):
    path = generated(d / "truncated.sqlite")
    with open(path, "r+b") as fh:
        fh.truncate(path.stat().st_size // 2)
    return path


def _first_page_only(d):
    path = generated(d / "first_page.sqlite")
    with open(path, "r+b") as fh:
        fh.truncate(4096)
    return path


def _bad_header(d):  # a page size that is not a power of two: "file is not a database"
    return damage(generated(d / "bad_header.sqlite"), 16, (3).to_bytes(2, "big"))


def _corrupt_page(d):  # the kernel table's root page overwritten: "database disk image is malformed"
    path = generated(d / "corrupt_page.sqlite")
    size, root = page_of(path, "CUPTI_ACTIVITY_KIND_KERNEL")
    return damage(path, (root - 1) * size, b"\x0d" + b"\xff" * (size - 1))


def _undecodable_schema(d):  # SQLite's error quotes invalid UTF-8: Python could not decode it
    path = make_sqlite(d / "schema.sqlite", ["CREATE TABLE StringIds (id INTEGER, value TEXT)",
                                              "PRAGMA writable_schema = ON",
                                              "INSERT INTO sqlite_master VALUES ('table', CAST(X'ff41' AS TEXT), "
                                              "CAST(X'ff41' AS TEXT), 0, 'CREATE TABLE x (((')"])
    return path


def _no_tables(d):
    return make_sqlite(d / "other.sqlite", ["CREATE TABLE people (name TEXT)"])


def _future(d):
    return nsys_stub(d / "future.sqlite", version="4.0.0")


CASES = [
    ("missing path", lambda d: d / "nope.sqlite", 3, "no such file"),
    ("a directory", lambda d: d, 3, "is a directory, not a profiler export"),
    ("text file", _text, 3, "not a SQLite database"),
    ("random bytes", _random, 3, "not a SQLite database"),
    ("empty file", _empty, 3, "an empty file, not a SQLite database"),
    ("truncated SQLite", _truncated, 3, "damaged"),
    ("SQLite cut inside page 1", _first_page_only, 3, "damaged"),
    ("damaged header", _bad_header, 3, "file is not a database"),
    ("corrupt page", _corrupt_page, 3, "damaged SQLite database (database disk image is malformed)"),
    ("undecodable schema", _undecodable_schema, 3, "damaged or unreadable SQLite database (SQLite's error names"),
    ("no profiler tables", _no_tables, 3, "without Nsight Systems or nvprof tables"),
    ("future major schema", _future, 4, "major version 4) is not supported"),
]


@pytest.mark.parametrize("case, make, code, cause", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_with_its_exit_code(tmp_path, workspace, case, make, code, cause):
    inputs = tmp_path / "in"
    inputs.mkdir()
    path = make(inputs)
    before = sha256(workspace)
    proc = cli("--db", str(workspace), "ingest", str(path))
    assert proc.returncode == code, proc.stderr
    line = one_line(proc)
    assert line.startswith(f"traceql: error: {path}: "), line
    assert cause in line, line
    assert proc.stdout == ""
    assert sha256(workspace) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["good.sqlite", "in", "ws.duckdb"]


def test_a_view_broken_by_another_tool_is_ignored(tmp_path):
    """Tools add views to exports; one whose table was dropped made detection fail with
    'damaged or unreadable SQLite database'. traceql reads no views: ingested."""
    path = nsys_stub(tmp_path / "a.sqlite")
    make_sqlite(path, ["CREATE TABLE extra (x INTEGER)", "CREATE VIEW extra_view AS SELECT x FROM extra",
                       "DROP TABLE extra"])
    [res] = traceql.ingest([path], db=tmp_path / "ws.duckdb")
    assert res.counts["kernel"] == 1


def test_quoted_line_breaks_stay_on_one_line():
    """A damaged schema's SQL, quoted in SQLite's message, can hold line breaks."""
    err = InputError("f.sqlite: damaged (malformed database schema (X) - unrecognized token: \"\"  -- a.\n)\")")
    assert str(err) == "f.sqlite: damaged (malformed database schema (X) - unrecognized token: \"\"  -- a. )\")"
    assert str(WorkspaceError("plain")) == "plain"


def test_debug_shows_the_traceback(tmp_path):
    proc = cli("--debug", "--db", str(tmp_path / "ws.duckdb"), "ingest", str(_truncated(tmp_path)))
    assert proc.returncode != 0
    assert "Traceback (most recent call last)" in proc.stderr
    assert "InputError" in proc.stderr


# -- values the export's schema forbids ----------------------------------------------------

BASE = [
    "CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL)",
    "INSERT INTO StringIds VALUES (1, 'k(int)'), (2, 'k'), (3, 'cudaLaunchKernel_v7000')",
    "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER, deviceId INTEGER, streamId INTEGER, "
    "correlationId INTEGER, globalPid INTEGER, demangledName INTEGER, shortName INTEGER)",
    "CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER, end INTEGER, eventClass INTEGER, "
    "globalTid INTEGER, correlationId INTEGER, nameId INTEGER, returnValue INTEGER)",
    "CREATE TABLE NVTX_EVENTS (start INTEGER, end INTEGER, eventType INTEGER, rangeId INTEGER, "
    "category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER, "
    "domainId INTEGER)",
]


def rows(db, sql):
    with traceql.open(db) as ws:
        return ws.sql(sql).to_pylist()


def stats(db):
    return {r["key"]: r["value"] for r in rows(db, "SELECT key, value FROM ingest_stats")}


def test_nulls_where_the_exporter_says_not_null(tmp_path):
    """Rows without a start or end are left out and counted; other NULLs stay NULL."""
    g = GLOBAL_PID
    path = make_sqlite(tmp_path / "nulls.sqlite", BASE + [
        f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (NULL, 250, 0, 7, 5, {g}, 1, 2), "
        f"(100, NULL, 0, 7, 5, {g}, 1, 2), (100, 200, NULL, NULL, NULL, NULL, NULL, NULL)",
        f"INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (NULL, 10, 0, {g}, 5, 3, 0), "
        "(5, 10, NULL, NULL, NULL, NULL, NULL)",
        f"INSERT INTO NVTX_EVENTS VALUES (NULL, 10, 59, NULL, NULL, NULL, 'a', {g}, NULL, NULL, NULL), "
        "(1, 10, 59, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)"])
    db = tmp_path / "ws.duckdb"
    traceql.ingest([path], db=db)
    assert rows(db, "SELECT ts, dur, device_id, stream_id, pid, name FROM kernel") == [
        {"ts": 100, "dur": 100, "device_id": None, "stream_id": None, "pid": None, "name": None}]
    assert rows(db, "SELECT ts, dur, name, correlation_id FROM api_call") == [
        {"ts": 5, "dur": 5, "name": None, "correlation_id": None}]
    assert rows(db, "SELECT ts, dur, name FROM nvtx_range") == [{"ts": 1, "dur": 9, "name": None}]
    s = stats(db)
    assert s["source.rows_without_start_or_end"] == 3
    assert s["nvtx.rows_without_start"] == 1
    assert s["kernel.unnamed"] == 1


def test_zero_and_negative_durations_are_kept_and_flagged(tmp_path):
    """Zero durations are ordinary; an end before its start is kept as a negative dur (not
    clamped, not dropped) and counted as a warning per view."""
    g = GLOBAL_PID
    path = make_sqlite(tmp_path / "durations.sqlite", BASE + [
        f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (100, 100, 0, 7, 5, {g}, 1, 2), "
        f"(300, 200, 0, 7, 6, {g}, 1, 2), (-50, 20, 0, 7, 7, {g}, 1, 2)",
        f"INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (50, 50, 0, {g}, 5, 3, 0), (60, 40, 0, {g}, 6, 3, 0)",
        f"INSERT INTO NVTX_EVENTS VALUES (10, 10, 59, NULL, NULL, NULL, 'zero', {g}, NULL, NULL, NULL), "
        f"(40, 30, 59, NULL, NULL, NULL, 'backwards', {g}, NULL, NULL, NULL)"])
    db = tmp_path / "ws.duckdb"
    [res] = traceql.ingest([path], db=db)
    assert rows(db, "SELECT ts, dur FROM kernel ORDER BY kernel_id") == [
        {"ts": -50, "dur": 70}, {"ts": 100, "dur": 0}, {"ts": 300, "dur": -100}]
    assert rows(db, "SELECT ts, dur FROM api_call ORDER BY api_id") == [{"ts": 50, "dur": 0}, {"ts": 60, "dur": -20}]
    assert rows(db, "SELECT name, dur FROM nvtx_range ORDER BY range_id") == [
        {"name": "zero", "dur": 0}, {"name": "backwards", "dur": -10}]
    s = stats(db)
    assert (s["gpu_op.negative_duration"], s["nvtx_range.negative_duration"], s["api_call.negative_duration"]) == (1, 1, 1)
    assert any("end lies before their start" in w for w in res.warnings)
    # each warning counts against its view's rows of the trace: 3 GPU operations, 2 calls, 2 ranges
    assert sorted(w.split(" ", 3)[:3] for w in res.warnings if "end lies before their start" in w) == [
        ["1", "of", "2"], ["1", "of", "2"], ["1", "of", "3"]]


def test_very_long_nvtx_strings(tmp_path):
    """1 MB range names (inline text and through StringIds) are kept whole and reported."""
    g = GLOBAL_PID
    path = make_sqlite(tmp_path / "long.sqlite", BASE + [
        "INSERT INTO StringIds VALUES (4, printf('%.*c', 1048576, 'y'))",
        f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (100, 150, 0, 7, 5, {g}, 1, 2)",
        f"INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (50, 60, 0, {g}, 5, 3, 0)",
        f"INSERT INTO NVTX_EVENTS VALUES (10, 1000, 59, NULL, NULL, NULL, printf('%.*c', 1048576, 'x'), {g}, "
        "NULL, NULL, NULL)",
        f"INSERT INTO NVTX_EVENTS VALUES (20, 900, 59, NULL, NULL, NULL, NULL, {g}, NULL, 4, NULL)"])
    db = tmp_path / "ws.duckdb"
    traceql.ingest([path], db=db)
    assert rows(db, "SELECT left(name, 1) AS c, length(name) AS n, depth, length(path) AS p FROM nvtx_range "
                    "ORDER BY range_id") == [{"c": "x", "n": 1 << 20, "depth": 0, "p": 1 << 20},
                                             {"c": "y", "n": 1 << 20, "depth": 1, "p": (2 << 20) + 3}]
    proc = cli("--db", str(db), "report", "--by", "range", "--format", "csv")
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stdout) > 2 << 20


def test_values_beyond_the_contract_types_are_an_input_error(tmp_path, workspace):
    """An end of 2**63-1 (the duration overflows) or a device id beyond INT32 used to stop
    with 'internal error'; they are a damaged input, exit 3, naming the file."""
    g = GLOBAL_PID
    huge = make_sqlite(tmp_path / "huge_end.sqlite", BASE + [
        f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (-9223372036854775808, 5, 0, 7, 5, {g}, 1, 2)"])
    device = make_sqlite(tmp_path / "device.sqlite", BASE + [
        f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (1, 5, 9223372036854775807, 7, 5, {g}, 1, 2)"])
    before = sha256(workspace)
    for path, cause in ((huge, "Overflow in subtraction"), (device, "out of range for the destination type INT32")):
        with pytest.raises(InputError, match="holds values traceql cannot store") as err:
            traceql.ingest([path], db=workspace)
        assert str(err.value).startswith(f"{path}: ") and cause in str(err.value)
        proc = cli("--db", str(workspace), "ingest", str(path))
        assert proc.returncode == 3 and str(path) in one_line(proc)
    assert sha256(workspace) == before


def test_durations_whose_sum_overflows_are_refused(tmp_path, workspace):
    """Kernels that end at 2**63-1 each fit BIGINT, but their summed time does not (a fuzz variant
    of a real export found it: the kernel report's total was printed empty). They lie beyond
    traceql's time limit of +-2**62 ns (docs/errors.md): refused at ingest, exit 3, one line
    naming the file and the value; the workspace unchanged."""
    g, top = GLOBAL_PID, 9223372036854775807
    path = make_sqlite(tmp_path / "long_kernels.sqlite", BASE + [
        f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (1, {top}, 0, 7, 5, {g}, 1, 2), "
        f"(2, {top}, 0, 7, 6, {g}, 1, 2)"])
    before = sha256(workspace)
    proc = cli("--db", str(workspace), "ingest", str(path))
    assert proc.returncode == 3
    assert one_line(proc) == (f"traceql: error: {path}: kernel.ts + dur = {top} ns is beyond traceql's time limit "
                              "of +-2**62 ns (+-4611686018427387904: headroom for 64-bit arithmetic, see docs/errors.md)")
    assert sha256(workspace) == before


def test_two_calls_with_one_correlation_id(tmp_path):
    """API calls of one process sharing a correlation id (a driver and a runtime call, as some
    exports have, or a damaged export): each GPU operation still gets one launch, the runtime
    call that started last before it, else the earliest call of its id; a warning counts the
    shared ids (schemas/derive/launch.sql)."""
    g = GLOBAL_PID
    path = make_sqlite(tmp_path / "shared_ids.sqlite", BASE + [
        f"INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (10, 20, 1, {g}, 5, 3, 0), (30, 40, 0, {g}, 5, 3, 0), "
        f"(50, 60, 0, {g}, 6, 3, 0), (55, 58, 0, {g}, 6, 3, 0), (70, 80, 0, {g}, 7, 3, 0), "
        f"(200, 210, 0, {g}, 9, 3, 0), (300, 310, 0, {g}, 9, 3, 0)",
        f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (100, 110, 0, 7, 5, {g}, 1, 2), "
        f"(120, 130, 0, 7, 6, {g}, 1, 2), (140, 150, 0, 7, 7, {g}, 1, 2), (160, 170, 0, 7, 8, {g}, 1, 2), "
        f"(180, 190, 0, 7, 9, {g}, 1, 2), (320, 330, 0, 7, 9, {g}, 1, 2)"])
    db = tmp_path / "ws.duckdb"
    traceql.ingest([path], db=db)
    assert rows(db, "SELECT l.op_id, a.ts AS api_ts, a.api_kind FROM launch l LEFT JOIN api_call a USING (trace_id, api_id) "
                    "ORDER BY l.op_id") == [
        {"op_id": 0, "api_ts": 30, "api_kind": "runtime"},  # the runtime call, not the earlier driver one
        {"op_id": 1, "api_ts": 55, "api_kind": "runtime"},  # two runtime calls: the later one before it
        {"op_id": 2, "api_ts": 70, "api_kind": "runtime"},
        {"op_id": 3, "api_ts": None, "api_kind": None},  # no call with its id
        {"op_id": 4, "api_ts": 200, "api_kind": "runtime"},  # starts before both calls of its id: the earliest
        {"op_id": 5, "api_ts": 300, "api_kind": "runtime"}]
    assert rows(db, "SELECT value, severity FROM ingest_stats WHERE key = 'launch.shared_correlation_ids'") == [
        {"value": 3, "severity": "warning"}]


def test_undecodable_text_in_a_number_column(tmp_path):
    """Invalid UTF-8 where a number belongs made DuckDB's own error message undecodable
    (UnicodeDecodeError, exit 1); the table is now read by the fallback reader."""
    path = make_sqlite(tmp_path / "text_ids.sqlite", BASE[:1] + [
        "INSERT INTO StringIds VALUES (1, 'k(int)'), (2, 'k')",
        "CREATE TABLE S2 (id TEXT, value TEXT)",
        "INSERT INTO S2 SELECT CASE WHEN id = 2 THEN CAST(X'ffc328' AS TEXT) ELSE id END, value FROM StringIds",
        "DROP TABLE StringIds", "ALTER TABLE S2 RENAME TO StringIds", *BASE[2:3],
        f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (1, 5, 0, 7, 5, {GLOBAL_PID}, 1, 2)"])
    db = tmp_path / "ws.duckdb"
    traceql.ingest([path], db=db)
    assert rows(db, "SELECT name, short_name FROM kernel") == [{"name": "k(int)", "short_name": None}]
    assert "source.read_with_sqlite3.StringIds" in stats(db)


def test_repeated_string_ids_do_not_multiply_rows(tmp_path):
    """StringIds ids are a PRIMARY KEY; a damaged copy that repeats them multiplied every
    kernel by 8 (three name joins) and blew a real trace up to out-of-memory. The first
    row of each id is kept, with a warning."""
    path = make_sqlite(tmp_path / "dups.sqlite", BASE[:1] + [
        "CREATE TABLE S2 (id INTEGER, value TEXT)",
        "INSERT INTO S2 VALUES (1, 'k(int)'), (2, 'k'), (1, 'other(int)'), (2, 'other')",
        "DROP TABLE StringIds", "ALTER TABLE S2 RENAME TO StringIds", *BASE[2:3],
        f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (1, 5, 0, 7, 5, {GLOBAL_PID}, 1, 2)"])
    db = tmp_path / "ws.duckdb"
    [res] = traceql.ingest([path], db=db)
    assert rows(db, "SELECT name, short_name FROM kernel") == [{"name": "k(int)", "short_name": "k"}]
    assert stats(db)["source.duplicate_keys.StringIds"] == 2
    assert any("repeats ids" in w for w in res.warnings)


def test_repeated_nvprof_marker_ids_do_not_multiply_ranges(tmp_path):
    """nvprof's CUPTI_ACTIVITY_KIND_MARKER._id_ is its PRIMARY KEY and the NVTX pairing joins on
    it: repeated, every range paired with itself and the nesting multiplied the copies per
    level (the fuzzer's variant ran for over 5 minutes). Kept once: the ranges are as before."""
    from ..sources.test_nvprof_unit import nvprof_fixture

    good = nvprof_fixture(tmp_path / "good.nvvp")
    bad = tmp_path / "bad.nvvp"
    shutil.copyfile(good, bad)
    con = sqlite3.connect(bad)
    con.execute("PRAGMA legacy_alter_table = ON")
    fuzz._rebuild(con, "CUPTI_ACTIVITY_KIND_MARKER")
    con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_MARKER SELECT * FROM CUPTI_ACTIVITY_KIND_MARKER")
    con.commit()
    con.close()
    traceql.ingest([good, bad], db=tmp_path / "ws.duckdb")
    q = "SELECT name, ts, dur, depth, path, style FROM nvtx_range WHERE trace_id = {} ORDER BY range_id"
    before, after = rows(tmp_path / "ws.duckdb", q.format(1)), rows(tmp_path / "ws.duckdb", q.format(2))
    assert after == before and len(before) >= 3
    assert stats_of(tmp_path / "ws.duckdb", 2)["source.duplicate_keys.CUPTI_ACTIVITY_KIND_MARKER"] > 0


def stats_of(db, trace_id):
    return {r["key"]: r["value"] for r in rows(db, f"SELECT key, value FROM ingest_stats WHERE trace_id = {trace_id}")}


# -- the same file twice ---------------------------------------------------------------------

def test_same_file_twice_in_one_command_is_read_once(tmp_path):
    a = nsys_stub(tmp_path / "a.sqlite")
    (tmp_path / "link.sqlite").symlink_to(a)
    db = tmp_path / "ws.duckdb"
    proc = cli("--db", str(db), "ingest", "a.sqlite", str(a), "./link.sqlite", str(nsys_stub(tmp_path / "b.sqlite")),
               cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.splitlines()
    assert [ln.split(":")[0] for ln in out if ln.startswith(("added", "replaced"))] == ["added trace 1", "added trace 2"]
    assert f"  warning: a.sqlite was given 3 times; ingested once" in out
    assert rows(db, "SELECT trace_id, count(*) AS n FROM kernel GROUP BY 1 ORDER BY 1") == [
        {"trace_id": 1, "n": 1}, {"trace_id": 2, "n": 1}]
    # and across commands: the trace is replaced, not added again
    again = cli("--db", str(db), "ingest", str(a))
    assert again.stdout.startswith(f"replaced trace 1: {a}")
    assert rows(db, "SELECT count(*) AS n FROM trace") == [{"n": 2}]


# -- two ingests into one workspace --------------------------------------------------------

def test_a_second_ingest_waits_for_the_first(tmp_path, workspace):
    lock = open(workspace.with_name(workspace.name + ".lock"), "a+")
    fcntl.flock(lock, fcntl.LOCK_EX)
    lock.seek(0), lock.truncate(), lock.write("31337\n"), lock.flush()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "traceql", "--db", str(workspace), "ingest",
                                 str(nsys_stub(tmp_path / "b.sqlite"))], cwd=REPO, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env={**os.environ, "PYTHONPATH": str(REPO)})
        # Hold the lock until the second ingest says it waits (a fixed sleep lost the race on a
        # loaded machine: the child had not reached the lock when it was released).
        assert select.select([proc.stderr], [], [], 60)[0], "the second ingest said nothing for 60 s"
        waiting = proc.stderr.readline()
        assert proc.poll() is None, "the second ingest did not wait"
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)
        lock.close()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, waiting + err
    assert waiting + err == (f"traceql: {workspace}: waiting for another traceql ingest (pid 31337) "
                             "into this workspace to end\n")
    assert out.startswith("added trace 2")
    assert not workspace.with_name(workspace.name + ".lock").exists()  # no lock file left behind


def test_a_waiting_writer_takes_the_lock_file_there_now(tmp_path):
    """A writer removes its lock file when it ends (issue 35: none left behind). One that waited
    on the removed file must not count it as the lock: while it waited a third writer made a new
    lock file and holds it, so it waits for that one too."""
    import threading

    from traceql.store.lock import workspace_lock

    db = tmp_path / "ws.duckdb"
    path = tmp_path / "ws.duckdb.lock"
    first = open(path, "a+")
    fcntl.flock(first, fcntl.LOCK_EX)
    got, waiting = threading.Event(), threading.Event()

    def writer():
        with workspace_lock(db, timeout=30, on_wait=lambda message: waiting.set()):
            got.set()

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        assert waiting.wait(30), "the second writer did not wait for the first"  # it holds the first file open
        assert not got.is_set()
        os.unlink(path)  # the first writer ends as traceql's do: file removed while still held ...
        third = open(path, "a+")  # ... and a third writer came meanwhile and holds a new one
        fcntl.flock(third, fcntl.LOCK_EX)
        first.close()
        # the waiting writer tries the lock every 0.05 s: 10 tries
        assert not got.wait(0.5), "the waiting writer took the removed file for the lock"
        os.unlink(path)
        third.close()
        assert got.wait(10.0)
    finally:
        first.close()
        thread.join(30)
    assert not path.exists()


def test_sql_write_and_ingest_wait_for_each_other(tmp_path, workspace):
    """`traceql sql --write` holds the workspace lock: an ingest meanwhile would copy the
    workspace before the change and rename its copy over it, losing the change."""
    src = nsys_stub(tmp_path / "b.sqlite")
    with traceql.open(workspace, write=True) as ws:
        ws.sql("CREATE TABLE notes AS SELECT 1 AS x")
        busy = cli("--db", str(workspace), "ingest", str(src), env={"TRACEQL_LOCK_TIMEOUT": "0"})
    assert busy.returncode == 5
    assert one_line(busy) == (f"traceql: error: {workspace}: another traceql sql --write (pid {os.getpid()}) is "
                              "writing this workspace; try again when it ends (TRACEQL_LOCK_TIMEOUT sets how long "
                              "to wait)")
    done = cli("--db", str(workspace), "ingest", str(src))  # once it is closed
    assert done.returncode == 0, done.stderr
    assert rows(workspace, "SELECT x FROM notes") == [{"x": 1}]
    assert rows(workspace, "SELECT count(*) AS n FROM trace") == [{"n": 2}]
    # and the other way round: sql --write waits for an ingest
    with open(workspace.with_name(workspace.name + ".lock"), "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        lock.seek(0), lock.truncate(), lock.write("31337\n"), lock.flush()
        blocked = cli("--db", str(workspace), "sql", "--write", "DROP TABLE notes",
                      env={"TRACEQL_LOCK_TIMEOUT": "0"})
    assert blocked.returncode == 5
    assert f"{workspace}: another traceql ingest (pid 31337) is writing this workspace" in one_line(blocked)
    assert rows(workspace, "SELECT x FROM notes") == [{"x": 1}]


def test_lock_timeout_fails_cleanly_with_exit_5(tmp_path, workspace):
    before = sha256(workspace)
    with open(workspace.with_name(workspace.name + ".lock"), "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        lock.seek(0), lock.truncate(), lock.write("31337\n"), lock.flush()
        now = cli("--db", str(workspace), "ingest", str(nsys_stub(tmp_path / "b.sqlite")),
                  env={"TRACEQL_LOCK_TIMEOUT": "0"})
        later = cli("--db", str(workspace), "ingest", str(tmp_path / "b.sqlite"),
                    env={"TRACEQL_LOCK_TIMEOUT": "0.2"})
    assert now.returncode == 5
    assert one_line(now) == (f"traceql: error: {workspace}: another traceql ingest (pid 31337) is writing this "
                             "workspace; try again when it ends (TRACEQL_LOCK_TIMEOUT sets how long to wait)")
    assert later.returncode == 5
    assert "after waiting 0.2 s" in later.stderr.splitlines()[-1]
    assert sha256(workspace) == before
    bad = cli("--db", str(workspace), "ingest", str(tmp_path / "b.sqlite"), env={"TRACEQL_LOCK_TIMEOUT": "soon"})
    assert bad.returncode == 2 and one_line(bad) == "traceql: error: TRACEQL_LOCK_TIMEOUT=soon: not a number of seconds"


def test_concurrent_ingests_both_land(tmp_path, workspace):
    files = [generated(tmp_path / f"rank{i}.sqlite", kernels=500) for i in range(3)]
    procs = [subprocess.Popen([sys.executable, "-m", "traceql", "--db", str(workspace), "ingest", str(f)],
                              cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(REPO)}) for f in files]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    assert rows(workspace, "SELECT count(*) AS n, count(DISTINCT path) AS paths FROM trace") == [{"n": 4, "paths": 4}]
    assert rows(workspace, "SELECT count(*) AS n FROM kernel") == [{"n": 1 + 3 * 500}]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_the_next_ingest_removes_what_a_killed_one_left(tmp_path, workspace):
    """kill -9 leaves the dead ingest's temporary copy (and spill folder); the next ingest
    into that workspace, holding the lock, removes them."""
    (tmp_path / ".ws.duckdb.ingest-99999.tmp").write_bytes(b"x" * 1000)
    (tmp_path / ".ws.duckdb.ingest-99999.tmp.wal").write_bytes(b"x")
    (tmp_path / ".ws.duckdb.ingest-99999.spill").mkdir()
    (tmp_path / ".other.duckdb.ingest-99999.tmp").write_bytes(b"not ours")
    traceql.ingest([nsys_stub(tmp_path / "b.sqlite")], db=workspace)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == [".other.duckdb.ingest-99999.tmp"]


# -- permissions -------------------------------------------------------------------------------
# Root ignores file modes, so as root these run the CLI as 'nobody' when that user can run
# this Python; otherwise (e.g. an interpreter under /root) the workspace checks run
# in-process with os.access answering as the modes say, as for any other user.

def can_drop_privileges() -> bool:
    if os.geteuid() != 0:
        return True  # not root: the modes apply as they are
    try:
        return cli("--version", user="nobody", timeout=60).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def modes_as_for_a_user(monkeypatch):
    real = os.access

    def access(path, mode, **kw):
        if mode & os.W_OK and not os.stat(path).st_mode & 0o222:
            return False
        return real(path, mode, **kw)
    monkeypatch.setattr(os, "access", access)


def test_read_only_source_directory(shared_tmp):
    """A real export in a read-only folder (read-only file): ingested, the file byte for
    byte and mtime unchanged, nothing created next to it (no journal, -wal or -shm)."""
    src = shared_tmp / "src"
    src.mkdir()
    copy = src / "profile.sqlite"
    shutil.copy2(trace_file(SAXPY), copy)
    copy.chmod(0o444)
    src.chmod(0o555)
    before = (sha256(copy), copy.stat().st_mtime_ns, sorted(os.listdir(src)))
    ws = shared_tmp / "ws"
    ws.mkdir()
    ws.chmod(0o777)
    user = "nobody" if can_drop_privileges() else None
    proc = cli("--db", str(ws / "ws.duckdb"), "ingest", str(copy), user=user, env={"HOME": str(ws)})
    assert proc.returncode == 0, proc.stderr
    assert (sha256(copy), copy.stat().st_mtime_ns, sorted(os.listdir(src))) == before
    assert stat.S_IMODE(src.stat().st_mode) == 0o555
    assert rows(ws / "ws.duckdb", "SELECT count(*) AS n FROM kernel") == [{"n": 5}]


def ingest_as_user(db: Path, src: Path, monkeypatch) -> tuple[int, str]:
    """(exit code, the one error line) of 'traceql ingest' as a user without root's rights."""
    if can_drop_privileges():
        proc = cli("--db", str(db), "ingest", str(src), user="nobody")
        return proc.returncode, one_line(proc) if proc.returncode else ""
    modes_as_for_a_user(monkeypatch)
    try:
        traceql.ingest([src], db=db)
    except traceql.TraceqlError as exc:
        return exc.exit_code, f"traceql: error: {exc}"
    finally:
        monkeypatch.undo()
    return 0, ""


def test_unwritable_workspace_location(shared_tmp, monkeypatch):
    good = nsys_stub(shared_tmp / "a.sqlite")
    good.chmod(0o444)
    locked = shared_tmp / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    code, line = ingest_as_user(locked / "ws.duckdb", good, monkeypatch)
    assert code == 5
    assert line == f"traceql: error: {locked / 'ws.duckdb'}: directory {locked} is not writable"
    assert os.listdir(locked) == []

    ro = shared_tmp / "ro"
    ro.mkdir()
    traceql.ingest([good], db=ro / "ws.duckdb")
    (ro / "ws.duckdb").chmod(0o444)
    ro.chmod(0o777)
    before = sha256(ro / "ws.duckdb")
    code, line = ingest_as_user(ro / "ws.duckdb", good, monkeypatch)
    assert code == 5
    assert line == f"traceql: error: {ro / 'ws.duckdb'}: the workspace file is read-only"
    assert sha256(ro / "ws.duckdb") == before

    missing = shared_tmp / "no" / "such" / "ws.duckdb"
    proc = cli("--db", str(missing), "ingest", str(good))
    assert proc.returncode == 5 and "does not exist" in one_line(proc)


def test_workspace_is_a_directory(tmp_path):
    with pytest.raises(WorkspaceError, match="is a directory, not a workspace file"):
        traceql.ingest([nsys_stub(tmp_path / "a.sqlite")], db=tmp_path)


# -- hostile --match values ------------------------------------------------------------------

@pytest.fixture(scope="module")
def named_ranges(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hostile")
    g = GLOBAL_PID
    names = ["a%b", "a_b", "axb", "it's", "plain"]
    path = make_sqlite(tmp / "ranges.sqlite", BASE + [
        f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (100, 150, 0, 7, 5, {g}, 1, 2)",
        *[f"INSERT INTO NVTX_EVENTS VALUES ({10 * i}, {10 * i + 5}, 59, NULL, NULL, NULL, '{n.replace(chr(39), chr(39) * 2)}', "
          f"{g}, NULL, NULL, NULL)" for i, n in enumerate(names)]])
    db = tmp / "ws.duckdb"
    traceql.ingest([path], db=db)
    with traceql.open(db) as ws:  # the derived families are built on first use (a write): build them now,
        ws.sql("SELECT count(*) FROM ingest_stats")  # so the sha256 checks below see only the reports
    return db


@pytest.mark.parametrize("word, expected", [
    ("'; DROP TABLE kernel; --", []),
    ("%", ["a%b"]),
    ("_", ["a_b"]),
    ("'", ["it's"]),
    ("it's", ["it's"]),
    ("\\", []),
    ("$match", []),
    ("x" * 100_000, []),
    ("A", ["a%b", "a_b", "axb", "plain"]),
])
def test_hostile_match_values_are_bound_parameters(named_ranges, word, expected):
    """--match words are DuckDB parameters compared with contains(): no SQL injection, and
    % and _ are ordinary characters, not LIKE wildcards."""
    before = sha256(named_ranges)
    with traceql.open(named_ranges) as ws:
        got = sorted(r["name"] for r in ws.report("range", match=[word]).to_pylist())
    assert got == expected
    assert sha256(named_ranges) == before
    assert rows(named_ranges, "SELECT count(*) AS n FROM kernel") == [{"n": 1}]


def test_hostile_match_through_the_cli(named_ranges):
    before = sha256(named_ranges)
    proc = cli("--db", str(named_ranges), "report", "--by", "range", "--format", "csv",
               "--match", "'; DROP TABLE kernel; --", "--match", "%", "--match", "y" * 50_000)
    assert proc.returncode == 0, proc.stderr
    assert [ln.split(",")[0] for ln in proc.stdout.splitlines()] == ["name", "a%b"]
    assert sha256(named_ranges) == before


# -- fuzzing: a seeded subset of `make fuzz` ---------------------------------------------------

@pytest.fixture
def fuzz_work(tmp_path, one_trace):
    """A work folder for tests.fuzz whose base workspace (one nsys stub, which each variant is
    ingested next to or queried in) is a copy of one_trace's, not an ingest of its own."""
    (tmp_path / "base").mkdir()
    shutil.copyfile(one_trace[0], tmp_path / "base" / "base.duckdb")
    return tmp_path


def test_fuzz_subset(fuzz_work):
    """30 seeded variants of the smaller real exports (every mutator at least twice),
    ingested in-process: each a clean ingest or a TraceqlError, the workspace unchanged
    after an error, no leftovers, the variant unchanged. `make fuzz` runs 300 through the CLI."""
    if not fuzz.sources():
        pytest.skip("../shared/traces not present")
    outcomes = fuzz.run(30, seed=2024, mode="api", work=fuzz_work, max_bytes=400_000, log=lambda *_: None)
    failures = [f"{o.index} {o.mutator} {o.source}: {o.what}: {o.problems}" for o in outcomes if not o.ok]
    assert not failures, "\n".join(failures)
    assert len(outcomes) == 30
    assert {o.mutator for o in outcomes} == set(fuzz.MUTATORS)
    assert {o.result for o in outcomes} >= {"ingested", "InputError"}


# -- the query surface: no write and no host file without asking (issue 19) ---------------------

WRITE_REFUSED = "is not a query: it can change the workspace or write files; add --write to run it"


def test_explain_analyze_cannot_write_a_file(workspace, tmp_path):
    """sqlglot cannot read x'00', so DuckDB's parser alone classified the statements; it let
    EXPLAIN through, and EXPLAIN ANALYZE runs the COPY it explains: the file was written, exit 0.
    What EXPLAIN explains is classified too."""
    target = tmp_path / "f"
    query = (f"SELECT x'00'; EXPLAIN ANALYZE COPY (SELECT 'echo hacked' AS l) TO '{target}' "
             "(HEADER false, QUOTE '')")
    before = sha256(workspace)
    proc = cli("--db", str(workspace), "sql", query)
    assert proc.returncode == 2
    assert one_line(proc) == f"traceql: error: SQL: EXPLAIN ANALYZE COPY {WRITE_REFUSED}"
    with traceql.open(workspace) as ws:
        with pytest.raises(traceql.UsageError, match="^SQL: EXPLAIN ANALYZE COPY is not a query"):
            ws.sql(query)
    assert not target.exists() and sha256(workspace) == before


@pytest.mark.parametrize("query, refused", [
    ("SELECT x'00'; EXPLAIN (ANALYZE) COPY kernel TO '{t}'", "EXPLAIN COPY"),
    ("SELECT x'00'; EXPLAIN (ANALYZE, FORMAT json) COPY kernel TO '{t}'", "EXPLAIN COPY"),
    ("SELECT x'00'; explain /* a comment */ analyse INSERT INTO kernel SELECT * FROM kernel", "EXPLAIN ANALYZE INSERT"),
    ("SELECT x'00'; EXPLAIN -- a comment\n ANALYZE CREATE TABLE t AS SELECT 1", "EXPLAIN ANALYZE CREATE"),
    ("SELECT x'00'; EXPLAIN ANALYZE DELETE FROM kernel", "EXPLAIN ANALYZE DELETE"),
    ("SELECT x'00'; EXPLAIN SET threads = 1", "EXPLAIN SET"),
    ("SELECT x'00'; EXPLAIN ANALYZE UPDATE kernel SET dur = 0", "EXPLAIN ANALYZE UPDATE"),
    ("EXPLAIN ANALYZE COPY kernel TO '{t}'", "EXPLAIN ANALYZE COPY"),
    ("EXPLAIN (ANALYZE) INSERT INTO kernel SELECT * FROM kernel", "EXPLAIN INSERT"),
])
def test_every_explain_form_is_classified(workspace, tmp_path, query, refused):
    target = tmp_path / "out"
    with traceql.open(workspace) as ws:
        with pytest.raises(traceql.UsageError) as err:
            ws.sql(query.format(t=target))
    assert str(err.value) == f"SQL: {refused} {WRITE_REFUSED}"
    assert not target.exists()


@pytest.mark.parametrize("query", ["SELECT x'00'; EXPLAIN ANALYZE SELECT count(*) FROM kernel",
                                   "EXPLAIN (FORMAT json) SELECT 1", "SELECT x'00'; EXPLAIN (SELECT 1)",
                                   "SELECT x'00'; EXPLAIN ANALYZE (SELECT 1) UNION ALL SELECT 2"])
def test_explain_of_a_query_still_runs(workspace, query):
    with traceql.open(workspace) as ws:
        assert ws.sql(query).num_rows >= 1


def host_file_message(path, kind="file"):
    return (f'traceql: error: SQL: the query reads or writes the {kind} "{path}" of this machine, which traceql '
            "allows only when asked: traceql sql --allow-files (traceql.open(..., allow_files=True)) to allow it")


@pytest.mark.parametrize("query, kind", [
    ("SELECT * FROM read_text('{secret}')", "file"),
    ("SELECT * FROM read_blob('{secret}')", "file"),
    ("SELECT * FROM read_csv('{secret}')", "file"),
    ("SELECT * FROM '{secret}'", "file"),
    ("SELECT * FROM glob('{secret}')", "file"),
    ("SELECT x'00'; SELECT * FROM read_text('{secret}')", "file"),
])
def test_queries_read_no_host_file(workspace, tmp_path, query, kind):
    secret = tmp_path / "secret.csv"
    secret.write_text("password\nhunter2\n")
    proc = cli("--db", str(workspace), "sql", query.format(secret=secret))
    assert proc.returncode == 2
    assert one_line(proc) == host_file_message(secret, kind)
    assert "hunter2" not in proc.stdout


def test_allow_files_reads_your_own_file(workspace, tmp_path):
    mine = tmp_path / "labels.csv"
    mine.write_text("name,label\nk,mine\n")
    query = f"SELECT k.name, l.label FROM kernel k JOIN read_csv('{mine}') l ON l.name = k.short_name"
    proc = cli("--db", str(workspace), "sql", "--allow-files", "--format", "csv", query)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "name,label\nk(int),mine\n"
    with traceql.open(workspace, allow_files=True) as ws:
        assert ws.sql(query).to_pylist() == [{"name": "k(int)", "label": "mine"}]
    # --write alone does not open the machine's files: COPY TO needs --allow-files as well
    out = tmp_path / "k.csv"
    denied = cli("--db", str(workspace), "sql", "--write", f"COPY (SELECT 1 AS x) TO '{out}'")
    assert denied.returncode == 2 and one_line(denied) == host_file_message(out)
    done = cli("--db", str(workspace), "sql", "--write", "--allow-files", f"COPY (SELECT 1 AS x) TO '{out}'")
    assert done.returncode == 0, done.stderr
    assert out.read_text() == "x\n1\n"


def test_no_extension_is_installed_or_loaded_by_a_query(workspace, tmp_path):
    """Autoinstall was on: a function of an extension made DuckDB try to download it and
    create ~/.duckdb/extensions. Off, and INSTALL refused (and external access is off too)."""
    home = tmp_path / "home"
    home.mkdir()
    proc = cli("--db", str(workspace), "sql", "SELECT st_point(1, 2)", env={"HOME": str(home)})
    assert proc.returncode == 2
    assert one_line(proc) == ('traceql: error: SQL: Catalog Error: Scalar Function with name "st_point" is not in '
                              "the catalog, but it exists in the spatial extension.")
    wrote = cli("--db", str(workspace), "sql", "--write", "INSTALL spatial", env={"HOME": str(home)})
    assert wrote.returncode == 2
    assert one_line(wrote) == ("traceql: error: SQL: INSTALL is refused: traceql works offline, with the extensions "
                               "of its own package (none is installed, loaded or configured, even with --write)")
    assert list(home.iterdir()) == []


def test_a_view_stored_in_a_workspace_reads_no_host_file(workspace, tmp_path):
    """A workspace someone sent, whose kernel view reads /etc/passwd into kernel names: a plain
    report ran it. Refused: queries read the workspace only."""
    import duckdb

    secret = tmp_path / "secret.txt"
    secret.write_text("root:x:0:0:hunter2\n")
    con = duckdb.connect(str(workspace))
    con.execute("ALTER TABLE kernel RENAME TO kernel_data")
    con.execute(f"CREATE VIEW kernel AS SELECT * REPLACE ((SELECT content FROM read_text('{secret}')) AS name) "
                "FROM kernel_data")
    con.execute("DROP TABLE IF EXISTS stored_report")
    con.close()
    proc = cli("--db", str(workspace), "report", "--by", "kernel", "--recompute")
    assert proc.returncode == 2
    assert one_line(proc) == host_file_message(secret)
    assert "hunter2" not in proc.stdout


# -- Ctrl-C ----------------------------------------------------------------------------------

def test_ctrl_c_while_the_extension_loads_stops_the_ingest(workspace, tmp_path, monkeypatch):
    """DuckDB turns Ctrl-C into InterruptException; a broad `except Exception` around the
    extension load took it for 'extension unavailable', read the file with sqlite3 and
    committed the ingest with exit 0."""
    import duckdb

    class Interrupted(types.ModuleType):
        def __getattr__(self, name):
            raise duckdb.InterruptException("INTERRUPT Error: Interrupted!")

    monkeypatch.setitem(sys.modules, "duckdb_extension_sqlite_scanner", Interrupted("x"))
    before = sha256(workspace)
    with pytest.raises(duckdb.InterruptException):
        traceql.ingest([nsys_stub(tmp_path / "b.sqlite")], db=workspace)
    assert sha256(workspace) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.sqlite", "good.sqlite", "ws.duckdb"]


def cpu_of_threads(pid: int) -> tuple[float, float]:
    """(CPU seconds of the main thread, of all the others) of process PID so far."""
    ticks = os.sysconf("SC_CLK_TCK")
    main = others = 0.0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:  # a thread that ended
            continue
        used = (int(fields[11]) + int(fields[12])) / ticks
        if int(tid) == pid:
            main = used
        else:
            others += used
    return main, others


def interrupt_after(args, seconds, work=0.2, **kw):
    """Run traceql ARGS, send SIGINT once it is at work in DuckDB, not starting, however loaded
    the machine, and return (exit code, stdout, stderr). At work: its threads other than the
    main one have used WORK CPU seconds; DuckDB's workers are the only ones that run (none do
    before the workspace is open; then they run the statements). Where DuckDB runs no worker
    (a machine of one core): once the process has used SECONDS of CPU time. (SECONDS alone,
    3.0, spent 2 CPU s a test past a start-up of 0.5.)

    The child starts with SIGINT's default action, as in a terminal: a suite started in the
    background by a shell without job control (`make test &`) ignores SIGINT, its children inherit
    that, and Python then never sees the signal (the query ran on, the ingest ended with exit 0)."""
    proc = subprocess.Popen([sys.executable, "-m", "traceql", *args], cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
                            env={**os.environ, "PYTHONPATH": str(REPO), **kw.get("env", {})})
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            main, others = cpu_of_threads(proc.pid)
        except OSError:  # it has just ended
            break
        if others >= work or main + others >= seconds:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:  # the interrupt was lost: fail, and leave no process counting on
        proc.kill()
        proc.communicate()
        raise AssertionError(f"traceql {' '.join(args[:3])} ... still ran 120 s after Ctrl-C") from None
    return proc.returncode, out, err


def test_ctrl_c_during_a_query_exits_130(workspace):
    """Ctrl-C while DuckDB runs a statement was 'internal error: RuntimeError: Query
    interrupted', exit 1; docs/errors.md promises 130. DuckDB scans range() on the main thread
    alone, so the signal comes when the process has used 1 CPU s: the command starts in 0.13 CPU s
    (`sql 'SELECT 1'`), the query has run for most of it. (3 CPU s proved the same, 2 s later.)"""
    code, out, err = interrupt_after(["--db", str(workspace), "sql",
                                      "SELECT count(*) FROM range(100000000000) t(i) WHERE i % 7 = 3"], 1.0)
    assert code == 130, err
    assert err.strip().splitlines()[-1] == "traceql: interrupted"
    assert out == ""


def test_ctrl_c_during_an_ingest_exits_130_and_changes_nothing(workspace, tmp_path, tmp_path_factory):
    big = generated_nsys(tmp_path_factory, kernels=300_000, seed=1)  # shared with test_workspace.py
    before = sha256(workspace), sha256(big)
    code, out, err = interrupt_after(["--db", str(workspace), "ingest", str(big)], 3.0)
    assert code == 130, err
    assert err.strip().splitlines()[-1].startswith("traceql: interrupted")
    assert (sha256(workspace), sha256(big)) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["good.sqlite", "ws.duckdb"]
    assert [p.name for p in big.parent.iterdir() if p.name.startswith(big.name)] == [big.name]


# -- symbolic links, modes, groups -------------------------------------------------------------

def test_ingest_through_a_symlinked_workspace_updates_its_target(workspace, tmp_path):
    """--db link.duckdb replaced the link by a regular file: the target was not updated, and the
    two names had two locks, so two writers. The target is written, one lock beside it."""
    link = tmp_path / "link.duckdb"
    link.symlink_to(workspace)
    proc = cli("--db", str(link), "ingest", str(nsys_stub(tmp_path / "b.sqlite")))
    assert proc.returncode == 0, proc.stderr
    assert link.is_symlink() and link.resolve() == workspace
    assert rows(workspace, "SELECT count(*) AS n FROM trace") == [{"n": 2}]
    assert not (tmp_path / "link.duckdb.lock").exists() and not (tmp_path / "ws.duckdb.lock").exists()


def test_ingest_keeps_the_mode_and_group_of_the_workspace(workspace, tmp_path):
    """Every ingest made a private (600) workspace 644 and reset its group."""
    workspace.chmod(0o600)
    group = 65534 if os.geteuid() == 0 else os.getegid()
    if os.geteuid() == 0:
        os.chown(workspace, -1, group)
    proc = cli("--db", str(workspace), "ingest", str(nsys_stub(tmp_path / "b.sqlite")))
    assert proc.returncode == 0, proc.stderr
    st = workspace.stat()
    assert (stat.S_IMODE(st.st_mode), st.st_gid) == (0o600, group)
    assert rows(workspace, "SELECT count(*) AS n FROM trace") == [{"n": 2}]


def test_symlink_loops(workspace, tmp_path):
    loop = tmp_path / "loop.sqlite"
    loop.symlink_to(loop)
    proc = cli("--db", str(workspace), "ingest", str(loop))
    assert proc.returncode == 3
    assert one_line(proc) == f"traceql: error: {loop}: cannot be read (a symbolic link loop)"
    db_loop = tmp_path / "loop.duckdb"
    db_loop.symlink_to(db_loop)
    proc = cli("--db", str(db_loop), "ingest", str(nsys_stub(tmp_path / "b.sqlite")))
    assert proc.returncode == 5
    assert one_line(proc) == (f"traceql: error: {db_loop}: cannot be opened (Too many levels of symbolic links: "
                              "a symbolic link loop)")
    assert db_loop.is_symlink()


# -- removing a trace; orphan rows ---------------------------------------------------------------

def contract_rows(db, trace_id):
    from traceql.core.resources import CONTRACT_TABLES

    with traceql.open(db) as ws:
        return {t: ws.execute(f"SELECT count(*) FROM {t} WHERE trace_id = ?", [trace_id]).fetchone()[0]
                for t in CONTRACT_TABLES}


def test_rm_removes_a_trace_from_every_table(workspace, tmp_path, one_trace):
    b = generated(tmp_path / "b.sqlite", kernels=59)
    traceql.ingest([b], db=workspace)
    assert sum(contract_rows(workspace, 2).values()) > 59
    proc = cli("--db", str(workspace), "rm", "2")
    assert proc.returncode == 0, proc.stderr
    n = int(proc.stdout.split("(")[1].split(" rows")[0].replace(",", ""))
    assert proc.stdout == f"removed trace 2: {b.resolve()} ({n:,} rows)\nworkspace: {workspace}\n"
    assert set(contract_rows(workspace, 2).values()) == {0}
    assert rows(workspace, "SELECT DISTINCT trace_id FROM stored_report") == [{"trace_id": 1}]
    assert contract_rows(workspace, 1)["kernel"] == 1
    missing = cli("--db", str(workspace), "rm", "1", "9")
    assert missing.returncode == 2
    assert one_line(missing) == f"traceql: error: trace 9: no such trace in {workspace} (traces: 1); nothing was removed"
    assert contract_rows(workspace, 1)["kernel"] == 1
    # the library function
    assert [(r.trace_id, r.path) for r in traceql.remove([1], db=workspace)] == [(1, str(one_trace[1].resolve()))]
    assert rows(workspace, "SELECT count(*) AS n FROM trace") == [{"n": 0}]


def test_ingest_after_a_deleted_trace_row_absorbs_no_orphans(workspace, tmp_path):
    """`DELETE FROM trace` left the trace's rows; the next ingest took its id and reported
    them as its own (7,387 kernels for a 59-kernel file). Orphan rows are purged first."""
    traceql.ingest([generated(tmp_path / "b.sqlite", kernels=500)], db=workspace)
    proc = cli("--db", str(workspace), "sql", "--write", "DELETE FROM trace WHERE trace_id = 2")
    assert proc.returncode == 0, proc.stderr
    [res] = traceql.ingest([generated(tmp_path / "c.sqlite", kernels=59)], db=workspace)
    assert res.counts["kernel"] == 59
    assert rows(workspace, "SELECT trace_id, count(*) AS n FROM kernel GROUP BY 1 ORDER BY 1") == [
        {"trace_id": 1, "n": 1}, {"trace_id": res.trace_id, "n": 59}]


# -- faults that crashed with 'internal error' -------------------------------------------------

def test_full_disk_is_a_workspace_error(workspace, tmp_path):
    """A file size limit (ulimit -f, like a full disk): SIGXFSZ killed the process, or the
    error was 'internal error'. One line, exit 5, the workspace as it was, no leftovers."""
    import resource

    src = generated(tmp_path / "b.sqlite", kernels=20_000)
    before = sha256(workspace)
    limit = workspace.stat().st_size + 64 * 1024

    def small_disk():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    proc = subprocess.run([sys.executable, "-m", "traceql", "--db", str(workspace), "ingest", str(src)],
                          capture_output=True, text=True, cwd=REPO, preexec_fn=small_disk, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 5, proc.stderr
    line = one_line(proc)
    assert line.startswith(f"traceql: error: {workspace}: out of disk space (") and "File too large" in line, line
    assert sha256(workspace) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.sqlite", "good.sqlite", "ws.duckdb"]


def corrupt_block(db: Path) -> Path:
    """Damage a data block of a DuckDB file (its checksum no longer matches)."""
    size = db.stat().st_size
    with open(db, "r+b") as fh:
        for offset in range(3 * 4096 + 64, size - 4096, 256 * 1024):
            fh.seek(offset)
            fh.write(b"\xa5" * 512)
    return db


def test_a_damaged_workspace_is_a_workspace_error(workspace, tmp_path):
    """A workspace with a damaged block crashed info and ingest (internal error), and was
    called 'in use by another process' because 'block' contains 'lock'."""
    corrupt_block(workspace)
    before = sha256(workspace)
    for args in (["info"], ["sql", "SELECT count(*) FROM kernel"], ["report", "--by", "kernel", "--recompute"],
                 ["ingest", str(nsys_stub(tmp_path / "b.sqlite"))]):
        proc = cli("--db", str(workspace), *args)
        assert proc.returncode == 5, (args, proc.stderr)
        line = one_line(proc)
        assert line.startswith(f"traceql: error: {workspace}: damaged workspace"), line
        assert "in use" not in line
    assert sha256(workspace) == before


@pytest.mark.parametrize("args, message", [
    (["sql", "SELECT 1", "-o", "{tmp}/missing/x.csv"], "{tmp}/missing/x.csv: directory {tmp}/missing does not exist"),
    (["sql", "SELECT 1", "-o", "{tmp}"], "{tmp}: is a directory (-o names the file to write)"),
    (["report", "--by", "kernel", "--format", "parquet", "-o", "{tmp}"], "{tmp}: is a directory (-o names the file to write)"),
    (["summary", "-o", "{tmp}/missing/s.txt"], "{tmp}/missing/s.txt: directory {tmp}/missing does not exist"),
    (["export", "-o", "{tmp}/good.sqlite"], "{tmp}/good.sqlite: exists and is not a directory (-o names the directory to write into)"),
    (["export", "--format", "perfetto", "-o", "{tmp}"], "{tmp}: is a directory (-o names the file to write)"),
])
def test_output_targets(workspace, tmp_path, args, message):
    proc = cli("--db", str(workspace), *[a.format(tmp=tmp_path) for a in args])
    assert proc.returncode == 2
    assert one_line(proc) == "traceql: error: " + message.format(tmp=tmp_path)


@pytest.mark.parametrize("value", ["lots", "3GB'; CREATE TABLE x AS SELECT 1; --", "-1GB"])
def test_a_bad_memory_limit(workspace, tmp_path, value):
    """TRACEQL_MEMORY_LIMIT was pasted into SQL unquoted: a bad value crashed, a quote injected."""
    before = sha256(workspace)
    proc = cli("--db", str(workspace), "ingest", str(nsys_stub(tmp_path / "b.sqlite")),
               env={"TRACEQL_MEMORY_LIMIT": value})
    assert proc.returncode == 2
    assert one_line(proc) == (f"traceql: error: TRACEQL_MEMORY_LIMIT={value}: not a memory size "
                              "(a number and a unit: 3GB, 500MB, 80%)")
    assert sha256(workspace) == before


def test_a_user_query_sqlglot_cannot_read(workspace, tmp_path):
    folder = tmp_path / "q"
    folder.mkdir()
    (folder / "hexq.sql").write_text("-- hexq: a blob literal\n-- param n: a number\nSELECT x'00' AS b, $n AS n\n")
    proc = cli("--db", str(workspace), "--queries", str(folder), "query", "hexq", "--param", "n=3", "--format", "csv")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "b,n\nx00,3\n"  # DuckDB's x'00' (sqlglot cannot read it; DuckDB's parser checked it)
    (folder / "bad.sql").write_text("-- bad: undeclared\nSELECT x'00', $m AS m\n")
    bad = cli("--db", str(workspace), "--queries", str(folder), "query", "bad")
    assert bad.returncode == 2
    assert one_line(bad) == f"traceql: error: {folder / 'bad.sql'}: $m is not declared; add '-- param m: <description>'"


def test_ingest_into_a_workspace_whose_table_became_a_view(workspace, tmp_path):
    proc = cli("--db", str(workspace), "sql", "--write",
               "CREATE TABLE kernel_old AS SELECT * FROM kernel; DROP TABLE kernel; "
               "CREATE VIEW kernel AS SELECT * FROM kernel_old")
    assert proc.returncode == 0, proc.stderr
    before = sha256(workspace)
    proc = cli("--db", str(workspace), "ingest", str(nsys_stub(tmp_path / "b.sqlite")))
    assert proc.returncode == 5
    assert one_line(proc) == (f"traceql: error: {workspace}: kernel is a view, not the table traceql ingests into "
                              "(changed with sql --write?); make it a table with the contract's columns again, "
                              "or ingest into a new workspace")
    assert sha256(workspace) == before


def test_output_cut_by_head_exits_quietly(workspace):
    proc = subprocess.Popen([sys.executable, "-m", "traceql", "--db", str(workspace), "sql", "--format", "csv",
                             "SELECT * FROM range(2000000)"], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.stdout.readline() == b"range\n"
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 141
    assert err == b""


def test_a_lock_timeout_that_is_not_a_number_of_seconds(workspace, tmp_path):
    src = nsys_stub(tmp_path / "b.sqlite")
    for value in ("nan", "inf", "-1"):
        proc = cli("--db", str(workspace), "ingest", str(src),
                   env={"TRACEQL_LOCK_TIMEOUT": value})
        assert proc.returncode == 2
        assert one_line(proc) == (f"traceql: error: TRACEQL_LOCK_TIMEOUT={value}: must be a finite number of "
                                  "seconds, 0 or more")


# -- silent gaps ---------------------------------------------------------------------------------

def test_a_missing_name_column_is_a_warning(tmp_path):
    """Without StringIds.value (or NVTX_EVENTS.text) every name was NULL with no warning row."""
    g = GLOBAL_PID
    path = make_sqlite(tmp_path / "renamed.sqlite", BASE + [
        "ALTER TABLE StringIds RENAME COLUMN value TO val",
        "ALTER TABLE NVTX_EVENTS RENAME COLUMN text TO txt",
        f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (1, 5, 0, 7, 5, {g}, 1, 2)",
        f"INSERT INTO NVTX_EVENTS VALUES (0, 10, 59, NULL, NULL, NULL, 'r', {g}, NULL, NULL, NULL)"])
    db = tmp_path / "ws.duckdb"
    [res] = traceql.ingest([path], db=db)
    assert rows(db, "SELECT key, value, severity, detail FROM ingest_stats WHERE key LIKE 'source.column_absent%' "
                    "ORDER BY key") == [
        {"key": "source.column_absent.NVTX_EVENTS", "value": 1, "severity": "warning",
         "detail": "NVTX_EVENTS has no column text (a damaged or edited export): what it gives (names, ids) is NULL "
                   "in every row that needs it"},
        {"key": "source.column_absent.StringIds", "value": 1, "severity": "warning",
         "detail": "StringIds has no column value (a damaged or edited export): what it gives (names, ids) is NULL "
                   "in every row that needs it"}]
    assert sum("has no column" in w for w in res.warnings) == 2


def test_an_unreadable_sm_count_keeps_the_gpu(tmp_path):
    """A GPU whose smCount is unreadable was dropped as a 'display adapter' at info level."""
    path = make_sqlite(tmp_path / "gpu.sqlite", BASE + [
        "CREATE TABLE TARGET_INFO_GPU (id INTEGER, name TEXT, smCount TEXT, computeMajor INTEGER, "
        "computeMinor INTEGER)",
        "INSERT INTO TARGET_INFO_GPU VALUES (0, 'NVIDIA A100', 'garbage', 8, 0), (1, 'Intel HD Graphics', 0, 0, 0)",
        f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (1, 5, 0, 7, 5, {GLOBAL_PID}, 1, 2)"])
    db = tmp_path / "ws.duckdb"
    traceql.ingest([path], db=db)
    assert rows(db, "SELECT device_id, name, sm_count FROM device") == [
        {"device_id": 0, "name": "NVIDIA A100", "sm_count": None}]
    assert {r["key"]: (r["value"], r["severity"]) for r in rows(db, "SELECT * FROM ingest_stats")
            if r["key"].startswith("device.")} == {"device.sm_count_missing": (1, "warning"),
                                                  "device.non_cuda_adapters_skipped": (1, "info")}


def test_sums_beyond_64_bits_leave_the_reports_working(tmp_path):
    """Copies of 2**62 bytes each fit the contract, but their sum does not: report --by memcpy
    failed with an INT128 conversion error for every trace of the workspace. The byte sum that
    does not fit is NULL; the rest answers. Ranges in three traces whose durations add up to just
    below 2**62 ns (the workspace's limit, docs/errors.md) are summed exactly across them."""
    g = GLOBAL_PID
    big = 1 << 62
    third = (big - 1000) // 3
    paths = [make_sqlite(tmp_path / f"big{n}.sqlite", BASE + [
        "CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER, end INTEGER, deviceId INTEGER, streamId INTEGER, "
        "correlationId INTEGER, globalPid INTEGER, bytes INTEGER, copyKind INTEGER, srcKind INTEGER, dstKind INTEGER)",
        *[f"INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES ({i * 10}, {i * 10 + 5}, 0, 7, {100 + i}, {g}, {big}, 1, 0, 2)"
          for i in range(4 if n == 0 else 0)],
        f"INSERT INTO NVTX_EVENTS VALUES (0, {third}, 59, NULL, NULL, NULL, 'huge', {g}, NULL, NULL, NULL)"])
        for n in range(3)]
    db = tmp_path / "ws.duckdb"
    traceql.ingest([nsys_stub(tmp_path / "small.sqlite"), *paths], db=db)
    memcpy = cli("--db", str(db), "report", "--by", "memcpy", "--per-trace", "--format", "csv", "-c",
                 "trace_id,kind,calls,total_ns,total_bytes")
    assert memcpy.returncode == 0, memcpy.stderr
    assert memcpy.stdout == "trace_id,kind,calls,total_ns,total_bytes\n2,Host-to-Device,4,20,\n"
    ranges = cli("--db", str(db), "report", "--by", "range", "--format", "csv", "-c", "name,instances,cpu_total_ns")
    assert ranges.returncode == 0, ranges.stderr
    assert ranges.stdout.splitlines()[0] == "name,instances,cpu_total_ns"
    assert f"huge,3,{3 * third}" in ranges.stdout.splitlines()


# -- unclear errors ------------------------------------------------------------------------------

def test_where_that_is_not_a_condition(workspace):
    proc = cli("--db", str(workspace), "report", "--by", "kernel", "--where", "1")
    assert proc.returncode == 2
    assert one_line(proc) == ('traceql: error: --where 1: not a condition; give a boolean expression over the '
                              'columns of kernel, e.g. "dur > 10000"')


def wal_copy(path: Path, dest: Path) -> Path:
    shutil.copyfile(path, dest)
    con = sqlite3.connect(dest)
    con.execute("PRAGMA journal_mode = WAL")
    con.close()  # the last connection checkpoints and removes -wal and -shm
    return dest


def test_a_wal_mode_export_in_a_read_only_folder(shared_tmp):
    """'damaged or unreadable' (it could not create its -shm), and in a writable folder -shm and
    -wal files appeared next to it. Read as immutable: ingested, nothing created."""
    src = shared_tmp / "src"
    src.mkdir()
    wal = wal_copy(nsys_stub(shared_tmp / "stub.sqlite"), src / "wal.sqlite")
    assert wal.read_bytes()[18:20] == b"\x02\x02"
    wal.chmod(0o444)
    src.chmod(0o555)
    before = (sha256(wal), sorted(os.listdir(src)))
    ws = shared_tmp / "ws"
    ws.mkdir()
    ws.chmod(0o777)
    user = "nobody" if can_drop_privileges() else None
    proc = cli("--db", str(ws / "ws.duckdb"), "ingest", str(wal), user=user, env={"HOME": str(ws)})
    assert proc.returncode == 0, proc.stderr
    assert (sha256(wal), sorted(os.listdir(src))) == before
    assert rows(ws / "ws.duckdb", "SELECT count(*) AS n FROM kernel") == [{"n": 1}]
    assert "WAL-mode file" in rows(ws / "ws.duckdb", "SELECT detail FROM ingest_stats WHERE key = 'source.reader'")[0]["detail"]


def test_a_wal_mode_export_with_pending_changes(tmp_path, workspace):
    src = wal_copy(nsys_stub(tmp_path / "stub.sqlite"), tmp_path / "wal.sqlite")
    writer = sqlite3.connect(src)
    writer.execute("PRAGMA wal_autocheckpoint = 0")
    writer.execute("INSERT INTO StringIds VALUES (9, 'new')")
    writer.commit()
    shm = Path(f"{src}-shm")
    try:  # a program still writing it: -wal and -shm exist, a snapshot is read
        proc = cli("--db", str(workspace), "ingest", str(src))
        assert proc.returncode == 0, proc.stderr
    finally:
        writer.close()
    # a log left without its index (a crashed writer): reading would create the -shm
    wal_copy(nsys_stub(tmp_path / "stub2.sqlite"), tmp_path / "wal2.sqlite")
    (tmp_path / "wal2.sqlite-wal").write_bytes(b"\x37\x7f\x06\x82" + b"\x00" * 60)
    proc = cli("--db", str(workspace), "ingest", str(tmp_path / "wal2.sqlite"))
    assert proc.returncode == 3
    assert one_line(proc) == (f"traceql: error: {tmp_path / 'wal2.sqlite'}: a WAL-mode SQLite file whose write-ahead "
                              "log wal2.sqlite-wal holds changes not yet in it; traceql creates no files next to a "
                              "source: checkpoint it first (sqlite3 wal2.sqlite 'PRAGMA wal_checkpoint(TRUNCATE)') "
                              "or ingest a copy")
    assert not Path(f"{tmp_path / 'wal2.sqlite'}-shm").exists() and not shm.exists()


def test_a_source_locked_by_its_writer(tmp_path, workspace):
    src = nsys_stub(tmp_path / "busy.sqlite")
    writer = sqlite3.connect(src, isolation_level=None)
    writer.execute("BEGIN EXCLUSIVE")
    try:
        proc = cli("--db", str(workspace), "ingest", str(src))
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert proc.returncode == 3
    assert one_line(proc) == (f"traceql: error: {src}: locked by a program that is writing it (database is "
                              "locked); ingest it when that program has finished")


def test_usage_errors_are_one_line(workspace, tmp_path):
    """click printed three lines (usage, hint, error) for a bad option or an unreadable -f."""
    proc = cli("--db", str(workspace), "report", "--by", "nope")
    assert proc.returncode == 2
    assert one_line(proc).startswith("traceql: error: --by: 'nope' is not one of 'kernel', 'api', ")
    assert one_line(proc).endswith(" (see traceql report --help)")
    proc = cli("--db", str(workspace), "sql", "-f", str(tmp_path))
    assert proc.returncode == 3
    assert one_line(proc) == f"traceql: error: {tmp_path}: is a directory, not a file of SQL"


def test_escape_sequences_are_not_sent_to_the_terminal(tmp_path):
    """An NVTX name or a file name can hold escape sequences (colours, cursor moves, the window
    title): they are printed visibly, not interpreted by the terminal."""
    g = GLOBAL_PID
    path = make_sqlite(tmp_path / "evil\x1b]0;pwned\x07.sqlite", BASE + [
        f"INSERT INTO NVTX_EVENTS VALUES (0, 10, 59, NULL, NULL, NULL, 'red\x1b[31m\x1b[2J', {g}, NULL, NULL, NULL)"])
    db = tmp_path / "ws.duckdb"
    ingest = cli("--db", str(db), "ingest", str(path))
    assert ingest.returncode == 0, ingest.stderr
    info = cli("--db", str(db), "info")
    table = cli("--db", str(db), "sql", "SELECT name FROM nvtx_range")
    for proc in (ingest, info, table):
        assert "\x1b" not in proc.stdout and "\x07" not in proc.stdout
    assert "evil\\x1b]0;pwned\\x07.sqlite" in info.stdout
    missing = cli("--db", str(db), "ingest", str(tmp_path / "no\x1b[2Jfile.sqlite"))
    assert one_line(missing) == f"traceql: error: {tmp_path}/no\\x1b[2Jfile.sqlite: no such file"


def test_fuzz_sql_subset(fuzz_work):
    """40 seeded SQL-surface variants in-process (`make fuzz` runs 200 through the CLI): each
    answers or is one error, writes and reads no file, leaves a read-only workspace as it was."""
    outcomes = fuzz.run_sql(40, seed=2024, mode="api", work=fuzz_work, log=lambda *_: None)
    failures = [f"{o.index} {o.mutator}: {o.what}: {o.problems}" for o in outcomes if not o.ok]
    assert not failures, "\n".join(failures)
    assert {o.mutator for o in outcomes} == {f"sql:{f}" for f in fuzz.SQL_FAMILIES}


def test_fuzz_fault_subset(fuzz_work):
    """One seeded variant of each workspace fault through the CLI (`make fuzz` runs 100): a new
    interpreter for the file size limit and SIGINT, a child of the warm server for the rest."""
    if not fuzz.sources(400_000):
        pytest.skip("../shared/traces not present")
    outcomes = fuzz.run_faults(len(fuzz.FAULTS), seed=2024, work=fuzz_work, max_bytes=400_000, log=lambda *_: None,
                               served=lambda argv, env, timeout: served(*argv, env=env, timeout=timeout))
    failures = [f"{o.index} {o.mutator}: {o.what}: {o.problems}" for o in outcomes if not o.ok]
    assert not failures, "\n".join(failures)
    assert {o.mutator for o in outcomes} == {f"fault:{f}" for f in fuzz.FAULTS}


def test_printable_takes_any_value():
    """A damaged nvprof export gave a warning without text (None): printing it crashed ingest
    with 'internal error: TypeError' (found by make fuzz)."""
    from traceql.core.faults import printable

    assert printable(None) == "None"
    assert printable("red\x1b[31m\x07") == "red\\x1b[31m\\x07"
