"""The derivation graph (schemas/derive/graph.csv, traceql.derivation): derived tables built on
first use equal those an ingest builds eagerly, row for row, on representative shared traces; a
workspace that cannot be written still answers; two first uses at once build a family once."""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

import traceql
from traceql.derive import derivation
from traceql.sources.detect import detect
from traceql.core.errors import TraceqlError
from traceql.store.lock import workspace_lock
from traceql.core.resources import CONTRACT_TABLES, RANGE_SOURCE, read_schema

from ..cli.test_bad_input import can_drop_privileges, cli, modes_as_for_a_user, shared_tmp  # noqa: F401 - a fixture
from ..util import REPO, TRACES, ingested, sha256, trace_file

NAMES = set(CONTRACT_TABLES) | {"gpu_op", RANGE_SOURCE}


def _tables_read(sql: str) -> set[str]:
    code = re.sub(r"--[^\n]*", "", sql)
    code = re.sub(r"'[^']*'", "''", code)
    return {w.lower() for w in re.findall(r"[A-Za-z_]\w*", code)} & NAMES


def test_graph_inputs_are_what_the_sql_reads():
    """Each step's declared inputs are exactly the contract tables its SQL names (kernel_op: also
    derive/kernel_op_units.sql and the torch_op names traceql/pytorch.py reads; torch_op: also
    derive/torch_parse.sql, which traceql/pytorch.py runs first), in build order."""
    built = set()
    for s in derivation.graph():
        sql = read_schema(f"derive/{s.table}.sql")
        if s.table == "kernel_op":
            sql += (read_schema("derive/kernel_op_units.sql") + read_schema("derive/kernel_op_inputs.sql")
                    + "\nSELECT name FROM torch_op")
        if s.table == "torch_op":
            sql = read_schema("derive/torch_parse.sql") + sql
        if s.table == "nvtx_range":  # then the memory events' ranges (traceql.store.families.derive)
            sql += read_schema("derive/memory_range.sql")
        reads = _tables_read(sql) - {s.table} - set(s.writes)
        assert set(s.inputs) == reads, s.table
        assert set(s.needs_any) <= NAMES and set(s.writes) <= NAMES, s.table
        assert not (set(s.inputs) & (set(derivation.tables()) - built)), f"{s.table} reads a table built after it"
        built.add(s.table)
    assert set(derivation.tables()) == {"launch", "nvtx_range", "op_range", "range_gpu", "torch_op", "kernel_op", "device_peak",
                                        "device_busy", "unattributed_gpu", "op_stack"}


def test_families_and_what_reads_them():
    from traceql.query.library import builtin

    assert derivation.read_by(builtin("kernel").sql) == set()
    assert derivation.read_by(builtin("range").sql) == {"nesting", "attribution"}
    assert derivation.read_by(builtin("op").sql) == {"nesting", "attribution", "pytorch", "peak"}
    assert derivation.read_by(builtin("gpu").sql) == derivation.read_by(builtin("api").sql) == set()
    assert derivation.read_by("SELECT * FROM device_peak") == {"peak"}
    assert derivation.read_by("SELECT path FROM nvtx_range") == {"nesting"}
    assert derivation.read_by("SELECT * FROM range_gpu") == {"nesting", "attribution"}
    assert derivation.read_by("SELECT * FROM KERNEL_OP") == {"nesting", "attribution", "pytorch"}
    assert derivation.read_by("SELECT * FROM call_stack") == {"nesting", "attribution", "pytorch"}  # op_stack writes PyProf stacks
    assert derivation.read_by("SELECT range_id FROM memory_event") == {"nesting"}  # the nesting places them in ranges
    assert "nesting" in derivation.read_by(builtin("memory").sql)
    assert derivation.read_by("SELECT * FROM device_busy") == {"busy"}
    assert derivation.read_by("SELECT * FROM ingest_stats") == {"nesting", "attribution", "pytorch", "busy", "peak"}
    keys = derivation.stat_keys(["attribution"])
    assert keys == {"op_range.unattributed_ops", "nvtx_range.without_gpu_work"}
    # the ranges' own diagnostics read nvtx_range_any (their rows are there before the nesting is built);
    # the memory events' are written with the nesting, which completes memory_event (their ranges)
    assert derivation.stat_keys(["nesting"]) == {"nvtx_range.beyond_depth_cap", "nvtx_range.without_gpu_work",
                                                 "memory_event.free_without_allocation",
                                                 "memory_event.allocation_not_freed", "memory_event.without_address",
                                                 "memory_event.held_before_capture"}


def shared_traces() -> list[Path]:
    """Every file under ../shared/traces that traceql reads (detect accepts it)."""
    if not TRACES.is_dir():
        pytest.skip("../shared/traces not present (third-party traces are not part of the repository)")
    out = []
    for p in sorted(TRACES.rglob("*")):
        if not p.is_file() or p.name in ("SOURCE.txt", "README.md") or "oracle" in p.parts or p.suffix in (".csv", ".md"):
            continue
        try:
            detect(p)
        except TraceqlError:
            continue
        out.append(p)
    return out


def _ingest(files, db: Path, mode: str) -> None:
    old = os.environ.get("TRACEQL_DERIVE")
    os.environ["TRACEQL_DERIVE"] = mode
    try:
        traceql.ingest(files, db=db, jobs=1)
    finally:
        if old is None:
            os.environ.pop("TRACEQL_DERIVE")
        else:
            os.environ["TRACEQL_DERIVE"] = old


def _differences(a: Path, b: Path) -> dict[str, tuple[int, int]]:
    """Per table (contract tables, ingest_stats, the stored reports and their registry): rows only
    in A, rows only in B (multisets; trace.ingested_at aside)."""
    con = duckdb.connect()
    con.execute(f"ATTACH '{a}' AS a (READ_ONLY)")
    con.execute(f"ATTACH '{b}' AS b (READ_ONLY)")
    stored = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() WHERE database_name IN ('a', 'b') "
                                        "AND table_name LIKE 'stored_%'").fetchall()}
    out = {}
    for t in sorted(set(CONTRACT_TABLES) | stored):
        cols = ", ".join(f'"{r[0]}"' for r in con.execute(f"DESCRIBE a.{t}").fetchall() if r[0] != "ingested_at")
        only = [con.execute(f"SELECT count(*) FROM (SELECT {cols} FROM {x}.{t} EXCEPT ALL SELECT {cols} FROM {y}.{t})")
                .fetchone()[0] for x, y in (("a", "b"), ("b", "a"))]
        out[t] = (con.execute(f"SELECT count(*) FROM a.{t}").fetchone()[0], *only)
    con.close()
    return out


# The traces the lazy/eager comparison ingests: one of every source format and layout, and every
# shared trace with a feature a derived family treats apart (each names what it brings). Ingesting all
# ~50 shared traces twice cost 175 s of the suite's time, mostly repeating the same layouts.
REPRESENTATIVES = {
    # one of each source format / layout
    "kmeans-rtx3080-old-nsys/report2.sqlite": "nsys/legacy",
    "dlprof-pytorch-emit-nvtx-nsys2022.1/nsys_profile.sqlite": "nsys/v2, PyTorch emit_nvtx: torch_op, kernel_op",
    "nsysai-mock-rtx3080-nsys2026.1/mock.sqlite": "nsys/v3, schema 3.24",
    "nvprof-pytorch-emit-nvtx-lm-v100-a/net.sql": "nvprof/v12, PyTorch emit_nvtx with PyProf stacks: op_stack",
    "kineto-hta-alexnet-a100/benchmark_result_2869224_1695835535_trace.json.gz": "kineto/v1",
    "rocpd-mi300x-batched-gemm-rocprofv3/21_results.db": "rocpd/v3 (rocprofv3 database)",
    "rocprofv3-json-tracelens/908_results.json.gz": "rocprofv3 JSON (rocpd/v3)",
    "rocprofv1-batched-gemm/results.db": "rocprof/v1",
    "rpd-rocmprofiledata/matmul_result.rpd": "rpd/v2",
    # features
    "cardiac-old-nsys-no-activity/report1.sqlite": "no GPU activity: every step with empty inputs skipped",
    "centerformer-tensorrt-nvtx-only-nsys2022.4/poolformer.sqlite": "NVTX ranges without GPU work",
    "extrap-a100x4-sampled-callchains-old-nsys/ex-gpu.s10.sqlite": "sampled call chains: op_stack from call_stack",
    "kineto-tracelens-h100-bert-small/gaunernst_bert-small-uncased__1016001.json.gz": "Kineto Python stacks: op_stack",
    "kineto-hta-legacy-categories/inference_rank_1.json.gz": "Kineto without a schema version",
    "kineto-hta-amd-mi250/mi250_minitoy_train_ROCm6_2_kineto.json.gz": "Kineto of an AMD GPU",
    "nsysai-h100-2gpu-pytorch-nsys2026.2/h100_2gpu_1s.sqlite": "2 GPUs (device_busy per device), PyTorch ranges "
                                                                "with work launched on autograd threads",
}


def test_lazily_built_tables_equal_eagerly_built_ones_on_representative_traces(tmp_path):
    """Representative shared traces (REPRESENTATIVES: one of every source format and layout the
    shared traces hold, checked against them, and every trace with a feature a family treats
    apart; with TRACEQL_EVERY_TRACE=1 every shared trace, 49 files, about 100 s) ingested twice: TRACEQL_DERIVE=full (every step at ingest, none skipped: as ingest was
    before families) and the default (families built on first use, steps with empty inputs
    skipped), its families then built in the order queries ask for them. Every contract table,
    ingest_stats and the stored reports hold the same rows."""
    shared = shared_traces()
    assert len(shared) >= 30
    files = [TRACES / rel for rel in REPRESENTATIVES]
    assert set(files) <= set(shared), sorted(set(files) - set(shared))
    if os.environ.get("TRACEQL_EVERY_TRACE") == "1":  # every shared trace, not the representatives (100 s)
        files = shared
    layouts = {p: (d.source_format, d.layout) for p in shared for d in [detect(p)]}
    assert set(layouts.values()) == {layouts[p] for p in files}, "a layout without a representative"
    full, lazy = tmp_path / "full.duckdb", tmp_path / "lazy.duckdb"
    _ingest(files, full, "full")
    _ingest(files, lazy, "lazy")
    con = duckdb.connect(str(full), read_only=True)
    ranged = {r[0] for r in con.execute("SELECT DISTINCT trace_id FROM nvtx_range").fetchall()}
    con.close()
    with traceql.open(lazy) as ws:
        n = len(ws.trace_ids())
        # no range is nested at ingest, not even those of traces with memory events: their ranges
        # (memory_event.range_id) wait for the nesting too; every trace's ranges wait in nvtx_range_source
        with_memory = {r[0] for r in ws.con.execute("SELECT DISTINCT trace_id FROM memory_event").fetchall()}
        assert with_memory & ranged and len(ranged - with_memory) >= 5
        assert ws.con.execute("SELECT family, count(*) AS n FROM derived_family GROUP BY 1 ORDER BY 1").fetchall() == [
            ("ingest", n)]
        assert {r[0] for r in ws.con.execute(f"SELECT DISTINCT trace_id FROM {RANGE_SOURCE}").fetchall()} == ranged
        assert ws.con.execute("SELECT count(*) FROM nvtx_range").fetchone()[0] == 0
        assert ws.con.execute("SELECT count(range_id) FROM memory_event").fetchone()[0] == 0
        placed = ws.sql("SELECT count(range_id) AS n FROM memory_event").column("n")[0].as_py()  # builds nesting
        assert placed > 0 and sorted(r[0] for r in ws.con.execute("SELECT DISTINCT family FROM derived_family").fetchall()) == [
            "ingest", "nesting"]
        assert ws.sql("SELECT count(*) AS n FROM op_range").column("n")[0].as_py() > 0  # builds attribution
        assert sorted(r[0] for r in ws.con.execute("SELECT DISTINCT family FROM derived_family").fetchall()) == [
            "attribution", "ingest", "nesting"]
        assert ws.con.execute(f"SELECT count(*) FROM {RANGE_SOURCE}").fetchone()[0] == 0  # each range kept once
        ws.report("op")  # pytorch and peak
        ws.summary()  # busy
        assert ws.con.execute("SELECT count(*) FROM derived_family").fetchone()[0] == 6 * n
    diff = _differences(full, lazy)
    assert {t: d for t, d in diff.items() if d[1] or d[2]} == {}
    for table in ("launch", "nvtx_range", "op_range", "range_gpu", "torch_op", "kernel_op", "device_busy", "op_stack", "device_peak",
                  "memory_event", "ingest_stats"):
        assert diff[table][0] > 0, table  # the comparison saw rows of every family


H100 = "nsysai-h100-2gpu-pytorch-nsys2026.2/h100_2gpu_1s.sqlite"


@pytest.fixture(scope="module")
def h100(tmp_path_factory):
    """(full, lazy): H100 ingested with TRACEQL_DERIVE=full and with the default (families on
    first use), once for the module; the tests below take copies (each ingested both itself).
    The default ingest is the session's (tests/util.py ingested: test_contract and
    test_analyze_real read it too)."""
    src = trace_file(H100)
    folder = tmp_path_factory.mktemp("h100")
    full = folder / "full.duckdb"
    _ingest([src], full, "full")
    if derivation.mode() == "lazy":  # the session's plain ingest is the lazy one
        return full, ingested(tmp_path_factory, H100)
    lazy = folder / "lazy.duckdb"
    _ingest([src], lazy, "lazy")
    return full, lazy


def _range_report(db: Path, env=None, user=None) -> subprocess.CompletedProcess:
    return cli("--db", str(db), "report", "--by", "range", "--format", "csv", env=env, user=user)


def test_a_read_only_workspace_answers(shared_tmp, monkeypatch, h100):  # noqa: F811 - the fixture
    """A workspace the user cannot write: the family is derived in a private copy, the answer is
    the eagerly built one, a note says so, and the workspace file is not touched. As the user
    'nobody' through the CLI when root can become it, else in-process with file modes applied as
    for any user (tests/cli/test_bad_input.py)."""
    full, ro = shared_tmp / "full.duckdb", shared_tmp / "ro" / "ws.duckdb"
    ro.parent.mkdir()
    shutil.copyfile(h100[0], full)
    shutil.copyfile(h100[1], ro)
    ro.chmod(0o444)
    ro.parent.chmod(0o555)
    before, listing = sha256(ro), sorted(os.listdir(ro.parent))
    note = "cannot be written: nvtx_range, op_range, range_gpu, unattributed_gpu derived for this command only"
    if can_drop_privileges():
        expected = _range_report(full)
        got = _range_report(ro, user="nobody")
        assert expected.returncode == 0 and got.returncode == 0, got.stderr
        assert got.stdout == expected.stdout and got.stdout.count("\n") > 100
        assert note in got.stderr
    else:
        modes_as_for_a_user(monkeypatch)
        try:
            with traceql.open(ro) as ws:
                got, notes = ws.report("range"), list(ws.notes)
        finally:
            monkeypatch.undo()
        with traceql.open(full) as ws:
            expected = ws.report("range")
        assert got.equals(expected) and got.num_rows > 100
        assert len(notes) == 1 and note in notes[0]
    assert sha256(ro) == before
    assert sorted(os.listdir(ro.parent)) == listing  # nothing written next to it
    with traceql.open(ro) as ws:  # still not built in the file itself
        assert ws.con.execute("SELECT count(*) FROM op_range").fetchone()[0] == 0


def test_concurrent_first_uses_build_once(tmp_path, h100):
    """Two `report --by range` start while another writer holds the workspace lock: both find the
    attribution family missing and wait; the first to get the lock builds it, the second finds it
    built in the workspace it then copies, and builds nothing (built twice, op_range would hold
    every row twice)."""
    full, db = tmp_path / "full.duckdb", tmp_path / "ws.duckdb"
    shutil.copyfile(h100[0], full)
    shutil.copyfile(h100[1], db)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "traceql", "--db", str(db), "report", "--by", "range", "--format", "csv"]
    with workspace_lock(db):
        procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
                 for _ in range(2)]
        lock = db.with_name(db.name + ".lock")
        waiting = 0
        for p in procs:  # both reached the lock (each says that it waits)
            line = p.stderr.readline()
            assert "waiting" in line or "is writing" in line, line
            waiting += 1
        assert waiting == 2 and lock.exists()
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    expected = _range_report(full).stdout
    assert outs[0][0] == outs[1][0] == expected
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT family, count(*) FROM derived_family GROUP BY 1 ORDER BY 1").fetchall() == [
        ("attribution", 1), ("ingest", 1), ("nesting", 1)]
    n = con.execute("SELECT count(*) FROM op_range").fetchone()[0]
    con.close()
    con = duckdb.connect(str(full), read_only=True)
    assert n == con.execute("SELECT count(*) FROM op_range").fetchone()[0] > 0
    con.close()


def test_forgotten_families_are_rebuilt_not_doubled(tmp_path):
    """derived_family's rows deleted (`sql --write`) while the family tables keep theirs: the next
    query rebuilds the families over the trace's old rows instead of beside them, so that every
    table and ingest_stats hold what an untouched eager workspace holds (found by the fuzzer's
    derived:forget variants: op_range counted twice)."""
    src = trace_file("memfusion-rtx3090-onnx-nvtx-nsys2023.1/report1.sqlite")
    eager, db = tmp_path / "eager.duckdb", tmp_path / "ws.duckdb"
    _ingest([src], eager, "eager")
    shutil.copyfile(eager, db)  # the same ingest (an ingest of its own gave the same rows)
    proc = cli("--db", str(db), "sql", "--write", "DELETE FROM derived_family WHERE family <> 'ingest'")
    assert proc.returncode == 0, proc.stderr
    with traceql.open(db) as ws:
        assert ws.sql("SELECT count(*) AS n FROM op_range").column("n")[0].as_py() > 0  # rebuilds attribution
        ws.report("op")  # pytorch and peak
        ws.summary()  # busy
        # nesting too: the ranges, nested at ingest, have no source rows left to nest again
        assert ws.con.execute("SELECT count(*) FROM derived_family").fetchone()[0] == 6
    con = duckdb.connect()  # the contract tables (sql --write dropped the stored reports, rebuilt on use)
    con.execute(f"ATTACH '{eager}' AS a (READ_ONLY)")
    con.execute(f"ATTACH '{db}' AS b (READ_ONLY)")
    for t in CONTRACT_TABLES:
        cols = ", ".join(f'"{r[0]}"' for r in con.execute(f"DESCRIBE a.{t}").fetchall() if r[0] != "ingested_at")
        n = con.execute(f"SELECT count(*) FROM a.{t}").fetchone()[0]
        assert con.execute(f"SELECT count(*) FROM b.{t}").fetchone()[0] == n, t
        assert con.execute(f"SELECT count(*) FROM (SELECT {cols} FROM a.{t} EXCEPT ALL SELECT {cols} FROM b.{t})"
                           ).fetchone()[0] == 0, t
        if t in ("nvtx_range", "op_range", "range_gpu", "device_busy", "ingest_stats"):
            assert n > 0, t
    con.close()


def test_a_workspace_from_before_nvtx_range_source_keeps_its_ranges(tmp_path):
    """A contract-3 workspace written before the ranges waited in nvtx_range_source (its ranges
    nested at ingest, no such table, no 'nesting' in derived_family): a query does not nest them
    again (which would delete them: their source rows are not there), and the next ingest creates
    the table and records the old trace's ranges as nested, leaving its rows as they were."""
    first = trace_file("memfusion-rtx3090-onnx-nvtx-nsys2023.1/report1.sqlite")
    second = trace_file("centerformer-tensorrt-nvtx-only-nsys2022.4/poolformer.sqlite")
    db = tmp_path / "ws.duckdb"
    _ingest([first], db, "eager")
    con = duckdb.connect(str(db))
    con.execute(f"DROP TABLE {RANGE_SOURCE}")
    con.execute("DELETE FROM derived_family WHERE family = 'nesting'")
    before = con.execute("SELECT * FROM nvtx_range ORDER BY range_id").fetchall()
    con.close()
    assert len(before) > 50
    with traceql.open(db) as ws:
        assert derivation.nesting() not in derivation.pending(ws.con)
        assert ws.report("range").num_rows > 0
    _ingest([second], db, "lazy")
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT * FROM nvtx_range WHERE trace_id = 1 ORDER BY range_id").fetchall() == before
    assert con.execute("SELECT trace_id, family FROM derived_family WHERE family = 'nesting'").fetchall() == [(1, "nesting")]
    # the new trace's ranges wait, as many as the export holds
    ranges = sqlite3.connect(f"file:{second}?mode=ro", uri=True).execute(
        "SELECT count(*) FROM NVTX_EVENTS WHERE eventType IN (59, 60, 70, 71) AND start IS NOT NULL").fetchone()[0]
    assert con.execute(f"SELECT count(*) FROM {RANGE_SOURCE} WHERE trace_id = 2").fetchone()[0] == ranges > 0
    con.close()
