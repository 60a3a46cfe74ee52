"""Ranks and hosts of multi-rank jobs (traceql/ranks.py) and the parallel ingest of several files
(traceql/parallel.py).

Real exports: the NCCL ring set (6 rank files, 2 hosts; every value checked against Python's
sqlite3 over the file: TARGET_INFO_SYSTEM_ENV's Hostname, the profiled process's environment in
META_DATA_CAPTURE) ingested by two worker processes, and compared row by row with a serial
ingest (Kineto's distributedInfo and host_name: tests/sources/test_kineto.py). Generated ones: the rule's every
branch (the environment nsys's agent recorded, two processes that disagree, file names, --rank
and --host), all or nothing when a worker's file fails, the CLI end to end."""

from __future__ import annotations

import statistics
from pathlib import Path

import duckdb
import pytest

import traceql
from traceql.store import parallel
from traceql.sources import ranks
from traceql.core.errors import InputError, UsageError
from traceql.core.resources import RANGE_SOURCE, TRACE_TABLES

from .. import rank_oracle
from ..util import cli as served
from ..util import ingested, make_sqlite, nsys_stub, sha256, trace_file
from ..util import source_rows as source

NCCL = "nccl-ring-2nodes-3gpus-nsys2024.5"


def cli(*args, env=None):
    return served(*args, env=env, timeout=300)


def trace_rows(db) -> dict[str, dict]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        cur = con.execute("SELECT * FROM trace")
        names = [d[0] for d in cur.description]
        return {Path(r[names.index("path")]).name: dict(zip(names, r)) for r in cur.fetchall()}
    finally:
        con.close()


# ------------------------------------------------------------------------------ the NCCL ring set

@pytest.fixture(scope="module")
def nccl(tmp_path_factory):
    """The six rank files ingested by two worker processes, and one after another (the default for
    files of less than 64 MB together: the suite's shared ingest, tests/util.py ingested)."""
    files = sorted(trace_file(NCCL).glob("*.sqlite"))
    par = tmp_path_factory.mktemp("ranks") / "parallel.duckdb"
    traceql.ingest(files, db=par, jobs=2)
    ser = ingested(tmp_path_factory, *(f"{NCCL}/{p.name}" for p in files))
    return files, par, ser


def test_nccl_hosts_and_ranks_are_what_each_file_records(nccl):
    """The three ault44 files say host ault44 (the profiled machine's Hostname), though nsys
    export ran on ault43 for all six; six distinct ranks from SLURM_PROCID of the profiled
    process, which PMI_RANK repeats."""
    files, db, _ = nccl
    got = trace_rows(db)
    assert len(got) == 6
    for path in files:
        [(hostname,)] = source(path, "SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'Hostname'")
        [(exported_on,)] = source(path, "SELECT value FROM META_DATA_EXPORT WHERE name = 'EXPORT_HOST'")
        env = dict(v.split("=", 1) for (v,) in source(
            path, "SELECT value FROM META_DATA_CAPTURE WHERE name = 'PROCESS_0:ENVIRONMENT_VARIABLE'"))
        env = {k: v.strip('"') for k, v in env.items()}
        assert env["PMI_RANK"] == env["SLURM_PROCID"]
        row = got[path.name]
        assert (row["host"], row["host_source"]) == (hostname, "recorded")
        assert (row["rank"], row["rank_source"]) == (int(env["SLURM_PROCID"]), "recorded")
        assert (row["local_rank"], row["local_rank_source"]) == (int(env["SLURM_LOCALID"]), "recorded")
        assert (row["world_size"], row["world_size_source"]) == (int(env["SLURM_NTASKS"]), "recorded")
        assert exported_on == "ault43.cscs.ch"
    assert sorted(r["rank"] for r in got.values()) == list(range(6))
    assert {n: r["host"] for n, r in got.items() if "ault44" in n} == {
        n: "ault44.cscs.ch" for n in got if "ault44" in n} and len([n for n in got if "ault44" in n]) == 3
    with duckdb.connect(str(db), read_only=True) as con:  # ingest_stats says where each came from
        [(detail,)] = con.execute("SELECT s.detail FROM ingest_stats s JOIN trace t USING (trace_id) "
                                  "WHERE t.path LIKE '%869579.sqlite' AND s.key = 'trace.rank'").fetchall()
    assert detail == ("rank 4: recorded, PMI_RANK=4 in the environment of the profiled process (META_DATA_CAPTURE)")


def test_parallel_ingest_gives_the_rows_of_a_serial_one(nccl):
    """Every contract table, row for row (multisets, the ingest time left out), the stored
    reports too, and the same trace ids in the same order."""
    _, par, ser = nccl
    con = duckdb.connect(str(par), read_only=True)
    try:
        con.execute(f"ATTACH '{ser}' AS ser (READ_ONLY)")
        for table in TRACE_TABLES:  # (the ranges not nested yet too)
            cols = ", ".join(f'"{r[0]}"' for r in con.execute(f"DESCRIBE {table}").fetchall()
                             if r[0] != "ingested_at")
            n = con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            assert n == con.execute(f"SELECT count(*) FROM ser.{table}").fetchone()[0], table
            for a, b in (("", "ser."), ("ser.", "")):
                diff = con.execute(f"SELECT count(*) FROM (SELECT {cols} FROM {a}{table} "
                                   f"EXCEPT ALL SELECT {cols} FROM {b}{table})").fetchone()[0]
                assert diff == 0, (table, a, b)
        assert con.execute(f"SELECT count(*) FROM {RANGE_SOURCE}").fetchone()[0] > 9000  # nested on first use
        order = "SELECT trace_id, path FROM {}trace"
        assert con.execute(order.format("")).fetchall() == con.execute(order.format("ser.")).fetchall()
        assert [r[0] for r in con.execute(order.format("")).fetchall()] == [1, 2, 3, 4, 5, 6]
        stored = ("SELECT report, trace_id, row_count FROM {}stored_report ORDER BY ALL")
        assert con.execute(stored.format("")).fetchall() == con.execute(stored.format("ser.")).fetchall() != []
    finally:
        con.close()
    with traceql.open(par) as a, traceql.open(ser) as b:
        assert a.report("range", per_trace=True).equals(b.report("range", per_trace=True, recompute=True))
    leftovers = [p.name for p in par.parent.iterdir() if p.name.startswith(".")]
    assert leftovers == []


def test_nccl_rank_report_and_collectives_equal_the_files(nccl):
    """One all-reduce kernel per rank, nothing to hide it: all communication is exposed. The
    collective summary's counts are an independent sqlite3 count of NCCL kernels per file."""
    files, db, _ = nccl
    with traceql.open(db) as ws:
        got = {r["trace_id"]: r for r in ws.report("rank").to_pylist()}
        ids = {Path(r["path"]).name: r["trace_id"] for r in ws.sql("SELECT trace_id, path FROM trace").to_pylist()}
        [summary] = ws.report("collective").to_pylist()
        per_trace = {r["trace_id"]: r for r in ws.report("collective", per_trace=True).to_pylist()}
    assert [r["rank"] for r in got.values()] == list(range(6))  # ordered by rank
    totals = {}
    for path in files:
        want = rank_oracle.rank_figures(path)
        row = got[ids[path.name]]
        assert {k: row[k] for k in want} == want, path.name
        assert want["compute_ns"] == 0 and want["comm_exposed_ns"] == want["comm_ns"] > 0
        [(name, (calls, total))] = rank_oracle.collectives(path).items()
        [(count,)] = source(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s "
                                  "ON s.id = k.demangledName WHERE s.value LIKE 'ncclKernel%'")
        assert calls == count == 1
        assert (per_trace[row["trace_id"]]["calls"], per_trace[row["trace_id"]]["total_ns"]) == (calls, total)
        totals[row["rank"]] = total
    assert summary["name"] == name == "ncclKernel_AllReduce_RING_LL_Sum_float"
    assert (summary["collective"], summary["ranks"], summary["calls"], summary["matched"]) == ("AllReduce", 6, 6, True)
    assert summary["total_ns"] == sum(totals.values())
    assert (summary["min_rank_ns"], summary["max_rank_ns"]) == (min(totals.values()), max(totals.values()))
    assert summary["median_rank_ns"] == int(statistics.median(totals.values()))
    assert summary["least_rank"] == min(totals, key=totals.get)


# ------------------------------------------------------------------------------ the rule, branch by branch

def nsys_with_env(path: Path, hostname=None, processes=(), device_env=None) -> Path:
    """nsys_stub with a TARGET_INFO_SYSTEM_ENV (Hostname, DeviceEnvironment) and the
    environment of each profiled process in META_DATA_CAPTURE."""
    nsys_stub(path)
    stmts = ["CREATE TABLE TARGET_INFO_SYSTEM_ENV (globalVid INTEGER, devStateName TEXT, name TEXT, nameEnum INTEGER, "
             "value TEXT)", "CREATE TABLE META_DATA_CAPTURE (name TEXT NOT NULL, value TEXT)"]
    if hostname is not None:
        stmts.append(f"INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (1, 'd', 'Hostname', 1, '{hostname}')")
    if device_env is not None:
        stmts.append(f"INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (1, 'd', 'DeviceEnvironment', 2, '{device_env}')")
    for i, env in enumerate(processes):
        stmts += [f"INSERT INTO META_DATA_CAPTURE VALUES ('PROCESS_{i}:ENVIRONMENT_VARIABLE', '{k}=\"{v}\"')"
                  for k, v in env.items()]
    stmts.append("INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_HOST', 'login1')")
    return make_sqlite(path, stmts)


def identity(db, name):
    row = trace_rows(db)[name]
    return {f: (row[f], row[f"{f}_source"]) for f in ranks.FIELDS}


def stats(db, key):
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute("SELECT value, severity, detail FROM ingest_stats WHERE key = ?", [key]).fetchall()


def test_framework_rank_before_launcher_before_scheduler(tmp_path):
    path = nsys_with_env(tmp_path / "job.sqlite", "node7", [
        {"SLURM_PROCID": "9", "OMPI_COMM_WORLD_RANK": "5", "RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "16",
         "SLURM_NTASKS": "99", "HOSTNAME": "launcher"}])
    traceql.ingest([path], db=tmp_path / "ws.duckdb")
    assert identity(tmp_path / "ws.duckdb", "job.sqlite") == {
        "host": ("node7", "recorded"), "rank": (3, "recorded"), "local_rank": (1, "recorded"),
        "world_size": (16, "recorded")}


def test_agent_environment_and_slurm_node_name_when_nothing_else(tmp_path):
    """No process environment: the one nsys's agent recorded (DeviceEnvironment); no Hostname:
    SLURMD_NODENAME; EXPORT_HOST is never taken over a recorded host."""
    path = nsys_with_env(tmp_path / "job.sqlite", None, [],
                         "PATH=/bin;SLURM_PROCID=12;SLURM_LOCALID=0;SLURMD_NODENAME=nid0042;SLURM_NTASKS=32")
    traceql.ingest([path], db=tmp_path / "ws.duckdb")
    assert identity(tmp_path / "ws.duckdb", "job.sqlite") == {
        "host": ("nid0042", "recorded"), "rank": (12, "recorded"), "local_rank": (0, "recorded"),
        "world_size": (32, "recorded")}
    [(_, _, detail)] = stats(tmp_path / "ws.duckdb", "trace.rank")
    assert detail == ("rank 12: recorded, SLURM_PROCID=12 in the environment nsys recorded on the profiled "
                      "machine (TARGET_INFO_SYSTEM_ENV DeviceEnvironment)")


def test_processes_that_disagree_leave_the_rank_unknown(tmp_path):
    path = nsys_with_env(tmp_path / "mpirun.sqlite", "n1", [{"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2"},
                                                             {"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2"}])
    db = tmp_path / "ws.duckdb"
    traceql.ingest([path], db=db)
    assert identity(db, "mpirun.sqlite") == {"host": ("n1", "recorded"), "rank": (None, None),
                                             "local_rank": (None, None), "world_size": (2, "recorded")}
    [(value, severity, detail)] = stats(db, "rank.ambiguous")
    assert (value, severity) == (2, "warning")
    assert detail == ("the 2 profiled processes of this file give different values of rank (PROCESS_0: "
                      "OMPI_COMM_WORLD_RANK=0, PROCESS_1: OMPI_COMM_WORLD_RANK=1): it is left NULL; --rank gives "
                      "it, if the file is one rank's")


def test_file_name_then_exporter_then_user(tmp_path):
    """Nothing recorded: the rank from 'rank3' in the name, the host from nsys's %h_%p, else
    EXPORT_HOST ('exporter'); --rank and --host win over all, and a recorded rank the name
    contradicts is kept with an info row."""
    named = nsys_with_env(tmp_path / "train_rank3_a100-07.cluster.org_4242.sqlite")
    plain = nsys_with_env(tmp_path / "plain.sqlite")
    db = tmp_path / "ws.duckdb"
    traceql.ingest([named, plain], db=db)
    assert identity(db, named.name) == {"host": ("a100-07.cluster.org", "file name"), "rank": (3, "file name"),
                                        "local_rank": (None, None), "world_size": (None, None)}
    assert identity(db, plain.name)["host"] == ("login1", "exporter")
    assert identity(db, plain.name)["rank"] == (None, None)
    traceql.ingest([named], db=db, rank=5, host="given")
    assert identity(db, named.name)["rank"] == (5, "user") and identity(db, named.name)["host"] == ("given", "user")
    [(value, _, detail)] = stats(db, "rank.file_name_differs")
    assert value == 3 and detail.endswith("kept 5 (user)")
    recorded = nsys_with_env(tmp_path / "rank1.sqlite", "n", [{"RANK": "2"}])
    traceql.ingest([recorded], db=db)
    assert identity(db, "rank1.sqlite")["rank"] == (2, "recorded")


@pytest.mark.parametrize("name, expected", [
    ("rank3.sqlite", {"rank": 3}),
    ("run_rank_03.nsys-rep.sqlite", {"rank": 3}),
    ("out-rank-12.json.gz", {"rank": 12}),
    ("local_rank2_rank7.sqlite", {"rank": 7, "local_rank": 2}),
    ("local_rank2.sqlite", {"local_rank": 2}),
    ("franky3.sqlite", {}),
    ("rank1_vs_rank2.sqlite", {}),  # two ranks: none
    ("example_2_nsys_report_ault44.cscs.ch_869579.sqlite", {"host": "ault44.cscs.ch"}),
    ("report_12345.sqlite", {}),  # a pid without a dotted host: not a host
    ("gpu-node3_1102.1712345678901.pt.trace.json.gz", {"host": "gpu-node3"}),  # Kineto's default name
    ("rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz", {"rank": 0}),
])
def test_file_name_patterns(name, expected):
    assert {k: f.value for k, f in ranks.from_file_name(name).items()} == expected


def test_bad_rank_host_and_jobs_are_refused(tmp_path):
    a, b = nsys_stub(tmp_path / "a.sqlite"), nsys_stub(tmp_path / "b.sqlite")
    db = tmp_path / "ws.duckdb"
    with pytest.raises(UsageError, match=r"^--rank gives the rank of one file, and 2 were given"):
        traceql.ingest([a, b], db=db, rank=1)
    for bad in (-1, True, "3", 2**31):
        with pytest.raises(UsageError, match="a rank is a whole number from 0"):
            traceql.ingest([a], db=db, rank=bad)
    with pytest.raises(UsageError, match="^--host: give a host name$"):
        traceql.ingest([a], db=db, host="  ")
    for bad in (0, -2, 1.5):
        with pytest.raises(UsageError, match="the number of files read at a time is a whole number from 1"):
            traceql.ingest([a], db=db, jobs=bad)
    assert not db.exists()


# ------------------------------------------------------------------------------ parallel ingest

def test_jobs_default_reads_small_files_in_this_process(tmp_path):
    files = [nsys_stub(tmp_path / f"{i}.sqlite") for i in range(3)]
    assert parallel.workers(files) == 1
    assert parallel.workers(files, jobs=2) == 2
    assert parallel.workers(files, jobs=8) == 3


def test_a_file_failing_in_a_worker_leaves_the_workspace_as_it_was(tmp_path):
    from ..cli.test_bad_input import _corrupt_page, generated

    db = tmp_path / "ws.duckdb"
    traceql.ingest([nsys_stub(tmp_path / "first.sqlite")], db=db)
    before = sha256(db)
    files = [generated(tmp_path / "good1.sqlite", kernels=300), _corrupt_page(tmp_path),
             generated(tmp_path / "good2.sqlite", kernels=300)]
    with pytest.raises(InputError, match="corrupt_page.sqlite: damaged SQLite database"):
        traceql.ingest(files, db=db, jobs=2)
    assert sha256(db) == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_parallel_replaces_a_file_ingested_before_and_keeps_its_trace_id(tmp_path):
    from ..cli.test_bad_input import generated

    a, b, c = (generated(tmp_path / f"{n}.sqlite", kernels=200) for n in "abc")
    db = tmp_path / "ws.duckdb"
    traceql.ingest([a, b], db=db, jobs=1)
    results = traceql.ingest([c, b], db=db, jobs=2)
    assert [(r.path.name, r.trace_id, r.replaced) for r in results] == [("c.sqlite", 3, False), ("b.sqlite", 2, True)]
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT trace_id, count(*) FROM kernel GROUP BY 1 ORDER BY 1").fetchall() == [
            (1, 200), (2, 200), (3, 200)]
        assert con.execute("SELECT count(*) FROM stored_report WHERE trace_id = 2").fetchone()[0] > 0


# ------------------------------------------------------------------------------ the command line

def test_cli_ingest_rank_host_jobs(tmp_path):
    a = nsys_with_env(tmp_path / "a.sqlite", "n1", [{"RANK": "1", "WORLD_SIZE": "2"}])
    b = nsys_with_env(tmp_path / "b.sqlite")
    db = tmp_path / "ws.duckdb"
    proc = cli("--db", db, "ingest", "-j", "2", a, b)
    assert proc.returncode == 0, proc.stderr
    # each file's block: its 'added trace' line and the indented lines under it (looked up by
    # the file's name, not by line number: the order of the blocks is not what is tested here)
    blocks = {}
    for line in proc.stdout.splitlines():
        if line.startswith("added trace "):
            blocks[Path(line.split(": ", 1)[1].split(" (")[0]).name] = block = []
        elif line.startswith("  ") and blocks:
            block.append(line)
    assert set(blocks) == {"a.sqlite", "b.sqlite"}, proc.stdout
    assert "  rank 1 (recorded), world size 2 (recorded), host n1 (recorded)" in blocks["a.sqlite"], proc.stdout
    assert "  host login1 (exporter)" in blocks["b.sqlite"], proc.stdout
    proc = cli("--db", db, "ingest", "--rank", "7", "--host", "gpu3", b)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[2] == "  rank 7 (user), host gpu3 (user)"
    bad = cli("--db", db, "ingest", "--rank", "7", a, b)
    assert bad.returncode == 2
    assert bad.stderr.strip() == ("traceql: error: --rank gives the rank of one file, and 2 were given: ingest each "
                                  "with its own --rank, or let traceql read the rank from the files (their "
                                  "environment or a 'rankN' in their names)")
    bad = cli("--db", db, "ingest", "--jobs", "0", a)
    assert bad.returncode == 2 and "--jobs" in bad.stderr
    assert identity(db, "b.sqlite") == {"host": ("gpu3", "user"), "rank": (7, "user"), "local_rank": (None, None),
                                        "world_size": (None, None)}
    info = cli("--db", db, "info").stdout.splitlines()
    assert info[2:4] == ["  host     n1 (recorded)", "  rank     1 of 2 (recorded)"]
    assert "  host     gpu3 (user)" in info and "  rank     7 (user)" in info
