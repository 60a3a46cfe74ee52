"""Workspace behaviour: several traces, replacement, atomicity, the fallback reader, export."""

import os
import signal
import subprocess
import sys
import time
from importlib import import_module

import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

import traceql
from traceql.core.errors import InputError

from fixtures.gen_nsys import generate

from ..util import REPO, generated_nsys, make_sqlite, nsys_stub, sha256, trace_file

SAXPY = "pipit-saxpy-mpi-cuda-nsys2022.2/saxpy-mpi-cuda_nsys_perlmutter0.sqlite"
WINDOWS = "extrap-windows-gtx1060-nsys2022.1/profile1.sqlite"


def table_rows(db, query):
    with traceql.open(db) as ws:
        return ws.sql(query).to_pylist()


def test_several_traces_and_replacement(tmp_path):
    a = nsys_stub(tmp_path / "a.sqlite")
    b = nsys_stub(tmp_path / "b.sqlite")
    db = tmp_path / "ws.duckdb"
    first = traceql.ingest([a, b], db=db)
    assert [(r.trace_id, r.replaced) for r in first] == [(1, False), (2, False)]
    again = traceql.ingest([b], db=db)
    assert [(r.trace_id, r.replaced) for r in again] == [(2, True)]
    rows = table_rows(db, "SELECT trace_id, count(*) AS n FROM kernel GROUP BY 1 ORDER BY 1")
    assert rows == [{"trace_id": 1, "n": 1}, {"trace_id": 2, "n": 1}]
    assert table_rows(db, "SELECT trace_id, path FROM trace ORDER BY 1") == [
        {"trace_id": 1, "path": str(a.resolve())}, {"trace_id": 2, "path": str(b.resolve())}]


def test_a_bad_file_among_good_ones_changes_nothing(tmp_path):
    db = tmp_path / "ws.duckdb"
    traceql.ingest([nsys_stub(tmp_path / "a.sqlite")], db=db)
    before = sha256(db)
    bad = tmp_path / "bad.sqlite"
    bad.write_text("not a database")
    with pytest.raises(InputError):
        traceql.ingest([nsys_stub(tmp_path / "b.sqlite"), bad], db=db)
    assert sha256(db) == before


def test_failure_midway_leaves_workspace_and_no_temporary_files(tmp_path, monkeypatch):
    db = tmp_path / "ws.duckdb"
    traceql.ingest([nsys_stub(tmp_path / "a.sqlite")], db=db)
    before = sha256(db)

    def boom(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(import_module("traceql.store.load"), "_add_trace_row", boom)
    with pytest.raises(KeyboardInterrupt):
        traceql.ingest([nsys_stub(tmp_path / "b.sqlite")], db=db)
    assert sha256(db) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.sqlite", "b.sqlite", "ws.duckdb"]


def test_killed_ingest_leaves_previous_workspace_usable(tmp_path, tmp_path_factory):
    big = generated_nsys(tmp_path_factory, kernels=300_000, seed=1)  # shared with test_bad_input.py
    db = tmp_path / "ws.duckdb"
    traceql.ingest([nsys_stub(tmp_path / "a.sqlite")], db=db)
    before = sha256(db)
    proc = subprocess.Popen([sys.executable, "-m", "traceql", "--db", str(db), "ingest", str(big)],
                            cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    tmp_files = []
    deadline = time.time() + 30
    while time.time() < deadline and not tmp_files:
        tmp_files = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
        time.sleep(0.05)
    assert tmp_files, "the ingest never started writing its temporary copy"
    time.sleep(0.3)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert sha256(db) == before
    assert table_rows(db, "SELECT count(*) AS n FROM kernel") == [{"n": 1}]
    # the next ingest is not blocked by the dead one's lock or temporary files
    [res] = traceql.ingest([nsys_stub(tmp_path / "b.sqlite")], db=db)
    assert res.trace_id == 2


def test_source_file_is_not_modified(tmp_path):
    src = trace_file(SAXPY)
    before = (sha256(src), src.stat().st_mtime_ns)
    traceql.ingest([src], db=tmp_path / "ws.duckdb")
    assert (sha256(src), src.stat().st_mtime_ns) == before


def test_invalid_utf8_strings_are_replaced_not_fatal(tmp_path):
    path = make_sqlite(tmp_path / "bad_utf8.sqlite", [
        "CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL)",
        "INSERT INTO StringIds VALUES (1, CAST(X'6b65726e656ce1287829' AS TEXT)), (2, 'k')",
        "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL, "
        "deviceId INTEGER NOT NULL, streamId INTEGER, correlationId INTEGER, globalPid INTEGER, "
        "demangledName INTEGER, shortName INTEGER)",
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (10, 20, 0, 7, 1, 0, 1, 2)"])
    db = tmp_path / "ws.duckdb"
    traceql.ingest([path], db=db)
    assert table_rows(db, "SELECT name, short_name FROM kernel") == [{"name": "kernel\ufffd(x)", "short_name": "k"}]
    stats = table_rows(db, "SELECT key, severity FROM ingest_stats WHERE key LIKE 'source.read_with_sqlite3%'")
    assert stats == [{"key": "source.read_with_sqlite3.StringIds", "severity": "warning"}]


@pytest.mark.parametrize("rel", [SAXPY, WINDOWS, "kmeans-rtx3080-old-nsys/report2.sqlite"])
def test_sqlite3_fallback_reader_gives_identical_contract_rows(tmp_path, monkeypatch, rel):
    src = trace_file(rel)
    traceql.ingest([src], db=tmp_path / "scanner.duckdb")
    monkeypatch.setenv("TRACEQL_READER", "sqlite3")
    traceql.ingest([src], db=tmp_path / "sqlite3.duckdb")
    for view, order in (("kernel", "kernel_id"), ("api_call", "api_id"), ("memcpy", "memcpy_id"),
                        ("memset", "memset_id"), ("nvtx_range", "range_id"), ("nvtx_mark", "mark_id"),
                        ("thread", "pid, tid"), ("device", "device_id")):
        q = f"SELECT * FROM {view} ORDER BY {order}"
        assert table_rows(tmp_path / "scanner.duckdb", q) == table_rows(tmp_path / "sqlite3.duckdb", q), view
    readers = table_rows(tmp_path / "sqlite3.duckdb", "SELECT detail FROM ingest_stats WHERE key = 'source.reader'")
    assert readers == [{"detail": "source tables read with sqlite3 (sqlite_scanner unavailable: TRACEQL_READER=sqlite3)"}]


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_export_writes_every_view_with_all_rows(tmp_path, fmt):
    db = tmp_path / "ws.duckdb"
    traceql.ingest([trace_file(SAXPY), nsys_stub(tmp_path / "a.sqlite")], db=db)
    out = tmp_path / "out"
    with traceql.open(db) as ws:
        files = ws.export(out, fmt)
        assert sorted(f.name for f in files) == sorted(
            f"{v}.{fmt}" for v in ("trace", "device", "thread", "api_call", "kernel", "memcpy", "memset",
                                   "graph_exec", "graph_event", "sync_event", "osrt_call", "profiler_overhead",
                                   "gpu_metric", "memory_event", "nvtx_range", "nvtx_mark", "launch", "op_range",
                                   "range_gpu", "torch_op", "kernel_op", "device_peak", "device_busy", "unattributed_gpu",
                                   "call_stack", "op_stack", "ingest_stats", "gpu_op"))
        for f in files:
            table = pq.read_table(f) if fmt == "parquet" else pacsv.read_csv(f)
            n = ws.sql(f"SELECT count(*) AS n FROM {f.stem}").to_pylist()[0]["n"]
            assert table.num_rows == n, f.name
        per = ws.export(tmp_path / "per", fmt, per_trace=True)
        assert len(per) == 2 * 28
        kernels_1 = pq.read_table(tmp_path / "per" / "trace_1" / f"kernel.{fmt}") if fmt == "parquet" \
            else pacsv.read_csv(tmp_path / "per" / "trace_1" / f"kernel.{fmt}")
        assert kernels_1.num_rows == 5 and set(kernels_1.column("trace_id").to_pylist()) == {1}
        with pytest.raises(traceql.UsageError, match="exists; use --overwrite"):
            ws.export(out, fmt)


def test_nsys_and_nvprof_files_in_one_ingest(tmp_path):
    files = [trace_file("nvprof-gpuml-titanv/timeline.nvvp"), trace_file(SAXPY),
             trace_file("nvprof-pytorch-emit-nvtx-lm-v100-a/net.sql")]
    db = tmp_path / "ws.duckdb"
    results = traceql.ingest(files, db=db)
    assert [r.detected.layout for r in results] == ["nvprof/v12", "nsys/v2", "nvprof/v12"]
    assert table_rows(db, "SELECT trace_id, count(*) AS n FROM kernel GROUP BY 1 ORDER BY 1") == [
        {"trace_id": 1, "n": 38}, {"trace_id": 2, "n": 5}, {"trace_id": 3, "n": 284}]


@pytest.mark.parametrize("limit", [None, "1GB"])
def test_ingest_memory_settings(tmp_path, monkeypatch, limit):
    """The default memory limit comes with a 1.5 GB block-allocator budget (traceql/core/settings.py
    configure); a limit the user sets through TRACEQL_MEMORY_LIMIT is applied alone, with
    DuckDB's default budget, and an ingest under it works."""
    import duckdb

    ingest_mod = import_module("traceql.core.settings")
    if limit is None:
        monkeypatch.delenv("TRACEQL_MEMORY_LIMIT", raising=False)
    else:
        monkeypatch.setenv("TRACEQL_MEMORY_LIMIT", limit)
    con = duckdb.connect()
    ingest_mod.configure(con, tmp_path / "spill")
    ref = duckdb.connect()
    ref.execute(f"SET memory_limit = '{limit or ingest_mod.DEFAULT_MEMORY_LIMIT}'")
    if limit is None:
        ref.execute(f"SET block_allocator_memory = '{ingest_mod.BLOCK_ALLOCATOR_MEMORY}'")
    for name in ("memory_limit", "block_allocator_memory"):
        got, want = (c.execute(f"SELECT current_setting('{name}')").fetchone()[0] for c in (con, ref))
        assert got == want, name
    assert (con.execute("SELECT current_setting('block_allocator_memory')").fetchone()[0] == "0 bytes") \
        == (limit is not None)
    db = tmp_path / "ws.duckdb"
    traceql.ingest([nsys_stub(tmp_path / "a.sqlite")], db=db)
    assert table_rows(db, "SELECT count(*) AS n FROM trace") == [{"n": 1}]


def test_small_inputs_are_written_on_one_duckdb_thread(tmp_path):
    """A writing connection runs DuckDB on one thread and without FSST compression when what it
    reads (the exports of an ingest, else the workspace) holds fewer than SMALL_INPUT_BYTES, and on
    every core with every compression otherwise: a sparse file of SMALL_INPUT_BYTES is not small."""
    import duckdb

    from traceql.core.settings import SMALL_INPUT_BYTES, cores
    from traceql.store.transaction import writing_copy

    small = nsys_stub(tmp_path / "a.sqlite")
    big = tmp_path / "big.sqlite"
    with open(big, "wb") as fh:
        fh.truncate(SMALL_INPUT_BYTES)
    default = duckdb.connect().execute("SELECT current_setting('threads')").fetchone()[0]
    assert default == cores()
    db = tmp_path / "ws.duckdb"
    import gzip

    packed = tmp_path / "trace.json.gz"  # a gzip file counts as what it holds
    with gzip.open(packed, "wb") as fh:
        fh.write(b" " * SMALL_INPUT_BYTES)
    assert packed.stat().st_size < SMALL_INPUT_BYTES // 100
    for files, want in (([small], 1), ([small, big], default), ((), 1), ([packed], default)):
        with writing_copy(db, files=files) as con:
            assert con.execute("SELECT current_setting('threads')").fetchone()[0] == want, files
            disabled = con.execute("SELECT current_setting('disabled_compression_methods')").fetchone()[0]
            assert disabled == ("FSST" if want == 1 else ""), files
    traceql.ingest([small], db=db)
    assert table_rows(db, "SELECT count(*) AS n FROM kernel") == [{"n": 1}]


def test_the_first_family_build_checks_the_workspace_objects_once(tmp_path, monkeypatch):
    """Opening a workspace and building a family on first use (a writing copy, then a new connection)
    lists its objects for macros once: the copy of the checked file and the file written from it
    are the same files (guard.identity). A file changed behind traceql's back is checked again."""
    import duckdb

    from traceql.core.errors import WorkspaceError
    from traceql.store import guard

    db = tmp_path / "ws.duckdb"
    monkeypatch.delenv("TRACEQL_DERIVE", raising=False)
    traceql.ingest([trace_file(SAXPY)], db=db)
    # a record of clean files without the one the ingest wrote (which would not be checked at all)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    calls = []
    real = guard.shadowing
    monkeypatch.setattr(guard, "shadowing", lambda con: calls.append(1) or real(con))
    ws = traceql.open(db)
    try:
        assert "attribution" in ws._pending
        ranges = ws.report("range")
        assert ranges.num_rows > 0 and "attribution" not in ws._pending
        assert len(calls) == 1
        ws.con.close()
        con = duckdb.connect(str(db))
        con.execute("CREATE MACRO lower(x) AS x")
        con.close()
        with pytest.raises(WorkspaceError, match='"lower"'):
            ws._connect()
        assert len(calls) == 2
    finally:
        ws._held.close()


def test_a_file_s_digest_is_remembered_for_its_version_only(tmp_path, monkeypatch):
    """sources.digest.sha256 records each digest for the file's version (device, inode, size,
    times) in the user's cache folder: asked again for that version it reads nothing; a file
    written since is hashed again. A report on a file (Workspace.held) asks it every time."""
    import hashlib
    import os
    import time

    from traceql.sources import digest

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (tmp_path / "cache").mkdir()
    src = tmp_path / "g.sqlite"
    generate(src, layout="3", kernels=50, seed=4)
    old = time.time() - 60
    os.utime(src, (old, old))  # (the change time is now: a fresh file is hashed, not recorded)
    assert digest.sha256(src) == hashlib.sha256(src.read_bytes()).hexdigest()
    assert digest.sha256(src) == hashlib.sha256(src.read_bytes()).hexdigest()  # (first: not a second old)
    time.sleep(1.1)
    expected = hashlib.sha256(src.read_bytes()).hexdigest()
    assert digest.sha256(src) == expected  # hashed and recorded now
    record = (tmp_path / "cache" / "traceql" / "file-digests").read_text().splitlines()
    assert record[-1].endswith(" " + expected) and record[-1].split()[1] == str(src.stat().st_ino)

    def no_hashing(path):
        raise AssertionError(f"{path} hashed again")

    monkeypatch.setattr(digest, "file_sha256", no_hashing)
    assert digest.sha256(src) == expected
    db = tmp_path / "w.duckdb"
    traceql.ingest([src], db=db)  # its digest from the record too
    with traceql.open(db) as ws:
        assert ws.held(src) == 1
        assert ws.execute("SELECT file_sha256 FROM trace").fetchone()[0] == expected
    with open(src, "r+b") as fh:  # the same size, other bytes: a new version
        fh.seek(100)
        fh.write(b"\x00")
    monkeypatch.undo()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with traceql.open(db) as ws:
        assert ws.held(src) is None
