"""Contract versions of workspaces and `traceql upgrade`.

The workspace of the previous contract (1) is made by the previous traceql itself: the package
as it was at commit V1 (the last commit before contract 2), taken from the repository's
history with `git show` and laid out as the wheel installs it, ingests the files; nothing is
edited by hand. Upgraded, it must hold exactly the rows a fresh ingest of the same files gives;
killed at any point, the upgrade must leave it intact and usable."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time

import duckdb
import pytest

import traceql
from traceql.store.contract import CONTRACT_VERSION
from traceql.core.resources import CONTRACT_TABLES, ROW_ORDER

from ..util import REPO, ingested, sha256, trace_file
from ..util import cli as served

V1 = "e1dfd9025cff6a490423b6827d2a513d408f1138"  # contract 1: the last commit before contract 2
V2 = "f29a8b64a66dc30bedd9b1f39374493c67b00fb2"  # contract 2: the last commit before contract 3
VOLATILE = {"trace": ["ingested_at"]}  # columns that differ between two ingests of one file


def git(*args):
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, check=True).stdout


def package_at(commit, tmp_path_factory):
    """The traceql package of COMMIT in a folder of its own (traceql/, traceql/schemas,
    traceql/queries, as pyproject's package-dir maps them), or skip without the history."""
    try:
        files = git("ls-tree", "-r", "--name-only", commit, "traceql", "schemas", "queries").decode().split()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip(f"the repository's history (commit {commit[:8]}) is not available: a source tarball or a "
                    "shallow clone")
    root = tmp_path_factory.mktemp(f"traceql_{commit[:8]}")
    for name in files:
        rel = name if name.startswith("traceql/") else "traceql/" + name
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(git("show", f"{commit}:{name}"))
    return root


@pytest.fixture(scope="session")
def v1_package(tmp_path_factory):
    return package_at(V1, tmp_path_factory)


@pytest.fixture(scope="session")
def v2_package(tmp_path_factory):
    return package_at(V2, tmp_path_factory)


def ingest_v1(package, sources, db):
    """Ingest with the traceql of commit V1, in a child process that imports it first."""
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import traceql; "
            "assert traceql.__file__.startswith(sys.argv[1]), traceql.__file__; "
            "traceql.ingest(sys.argv[3:], db=sys.argv[2])")
    proc = subprocess.run([sys.executable, "-c", code, str(package), str(db), *map(str, sources)],
                          capture_output=True, text=True, cwd=package)
    assert proc.returncode == 0, proc.stderr


def cli(*args, timeout=300):
    return served(*args, timeout=timeout)


def sources(tmp):
    """A PyTorch-shaped trace (autograd thread, start/end ranges across threads, two processes)
    and the hand-made attribution fixture."""
    from fixtures.gen_torch import generate

    a = tmp / "torch.sqlite"
    generate(a, kernels=3000, seed=5)
    b = tmp / "attribution.sqlite"
    con = sqlite3.connect(b)
    con.executescript((REPO / "fixtures" / "nsys_attribution.sql").read_text())
    con.close()
    return [a, b]


def rows_of(db, skip=()):
    """Every contract table's rows, in ROW_ORDER, volatile columns left out; every family of
    derived tables built first (traceql.derivation: an ingest leaves most for the first query)."""
    with traceql.open(db) as ws:
        ws.ensure()
    con = duckdb.connect(str(db), read_only=True)
    try:
        out = {}
        for name in CONTRACT_TABLES:
            if name in skip:
                continue
            cols = [r[0] for r in con.execute(f"DESCRIBE {name}").fetchall() if r[0] not in VOLATILE.get(name, [])]
            out[name] = con.execute(f"SELECT {', '.join(cols)} FROM {name} ORDER BY {ROW_ORDER[name]}").fetchall()
        return out
    finally:
        con.close()


@pytest.fixture(scope="module")
def v1_workspace(v1_package, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("upgrade")
    srcs = sources(tmp)
    db = tmp / "v1.duckdb"
    ingest_v1(v1_package, srcs, db)
    fresh = tmp / "fresh.duckdb"
    traceql.ingest(srcs, db=fresh)
    return tmp, srcs, db, fresh


def test_a_v1_workspace_is_refused_with_how_to_upgrade(v1_workspace):
    tmp, _, db, _ = v1_workspace
    before = sha256(db)
    for args in (["report", "--by", "range"], ["info"], ["sql", "SELECT 1"], ["ingest", tmp / "torch.sqlite"],
                 ["sql", "--write", "DELETE FROM kernel"]):
        proc = cli("--db", db, *args)
        assert proc.returncode == 6, (args, proc.stderr)
        assert proc.stderr.startswith(f"traceql: error: {db}: workspace of contract version 1, this traceql reads "
                                      f"version {CONTRACT_VERSION} (changed in 2: attribution:"), proc.stderr
        assert proc.stderr.rstrip().endswith(f"run 'traceql --db {db} upgrade' to bring it forward "
                                             "(nothing is changed until you do)")
    with pytest.raises(traceql.StaleWorkspaceError):
        traceql.open(db)
    assert sha256(db) == before


def test_upgrade_gives_the_rows_of_a_fresh_ingest(v1_workspace, tmp_path):
    _, _, v1, fresh = v1_workspace
    db = tmp_path / "ws.duckdb"
    shutil.copyfile(v1, db)
    proc = cli("--db", db, "upgrade")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "trace 1: read again from its source", "trace 2: read again from its source",
        f"upgraded {db} from contract version 1 to {CONTRACT_VERSION} (2 traces)"]
    assert rows_of(db) == rows_of(fresh)
    with traceql.open(db) as ws:  # readable now; the stored reports are this version's
        assert ws.report("range").equals(ws.report("range", recompute=True))
        assert ws.sql("SELECT contract_version FROM workspace_version").to_pylist() == [
            {"contract_version": CONTRACT_VERSION}]
    again = cli("--db", db, "upgrade")
    assert again.returncode == 0 and again.stdout.strip() == f"{db}: already at contract version {CONTRACT_VERSION}; nothing to do"


def test_upgrade_without_the_source_files_derives_from_the_workspace(v1_workspace, tmp_path):
    """The source files moved away: every derived table is computed again from the workspace's
    own rows and equals a fresh ingest's; what only the source holds (the graph tables) stays
    as it was, and a warning says so."""
    _, srcs, v1, fresh = v1_workspace
    db = tmp_path / "ws.duckdb"
    shutil.copyfile(v1, db)
    hidden = [s.with_name(s.name + ".away") for s in srcs]
    for s, h in zip(srcs, hidden):
        s.rename(h)
    try:
        proc = cli("--db", db, "upgrade")
    finally:
        for s, h in zip(srcs, hidden):
            h.rename(s)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0].startswith(f"trace 1: computed from the workspace's rows: the source file {srcs[0]}")
    # trace rows lack the hash; ingest_stats gains the warning; the rest is a fresh ingest's
    got, want = rows_of(db, skip=("trace", "ingest_stats")), rows_of(fresh, skip=("trace", "ingest_stats"))
    assert got == want
    with traceql.open(db) as ws:
        notes = ws.sql("SELECT trace_id, severity FROM ingest_stats WHERE key = 'upgrade.without_source' "
                       "ORDER BY trace_id").to_pylist()
        derived = ws.sql("SELECT trace_id, key, value, severity FROM ingest_stats WHERE key <> 'upgrade.without_source' "
                         "AND key <> 'source.tables_absent' ORDER BY ALL").to_pylist()
    assert notes == [{"trace_id": 1, "severity": "warning"}, {"trace_id": 2, "severity": "warning"}]
    # every other diagnostic as a fresh ingest has it, but those only the source tells (graph tables)
    with traceql.open(fresh) as ws:
        want = ws.sql("SELECT trace_id, key, value, severity FROM ingest_stats WHERE key NOT LIKE 'graph%' "
                      "AND key <> 'source.tables_absent' ORDER BY ALL").to_pylist()
    assert derived == want


def test_a_changed_source_is_not_read_again(v1_workspace, tmp_path):
    _, srcs, v1, _ = v1_workspace
    db = tmp_path / "ws.duckdb"
    shutil.copyfile(v1, db)
    os.utime(srcs[1], None)  # touched after the ingest: contract 1 recorded no hash, so the mtime tells
    try:
        proc = cli("--db", db, "upgrade")
    finally:
        os.utime(srcs[1], (0, 0))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[:2] == [
        "trace 1: read again from its source",
        f"trace 2: computed from the workspace's rows: the source file {srcs[1]} was modified after it was ingested"]


def test_killed_upgrade_leaves_the_old_workspace(v1_workspace, tmp_path):
    """kill -9 at several moments of an upgrade while it writes its temporary copy, from the
    moment the copy appears to 0.6 s into it (0.6-0.9 s on an idle machine: the workspace copied,
    the traces read again, the copy checkpointed): each time the workspace is byte for byte the
    v1 one (or, had the kill come after the rename, a complete upgrade), and it still upgrades,
    leaving nothing behind. The kills are timed from the copy's appearance, not from the start of
    the process: fixed delays from the start (0.3-2.0 s) fell before the upgrade began (Python
    starting) on a loaded machine and after it had ended on an idle one."""
    _, _, v1, fresh = v1_workspace
    db = tmp_path / "ws.duckdb"
    shutil.copyfile(v1, db)
    original = sha256(db)
    killed_writing = 0
    for delay in (0.0, 0.15, 0.3, 0.45, 0.6):
        proc = subprocess.Popen([sys.executable, "-m", "traceql", "--db", str(db), "upgrade"], cwd=REPO,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        copy = db.with_name(f".{db.name}.ingest-{proc.pid}.tmp")
        deadline = time.monotonic() + 60
        while not copy.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.002)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if sha256(db) == original:
            killed_writing += copy.exists()  # kill -9 leaves the copy it was writing
            assert cli("--db", db, "info").returncode == 6  # still the v1 workspace, still refused the same way
        else:  # finished before the kill
            assert rows_of(db) == rows_of(fresh)
            shutil.copyfile(v1, db)
    assert killed_writing >= 3
    proc = cli("--db", db, "upgrade")
    assert proc.returncode == 0, proc.stderr
    assert rows_of(db) == rows_of(fresh)
    assert not [p for p in db.parent.iterdir() if ".ingest-" in p.name]


def test_a_newer_workspace_is_refused(tmp_path):
    from ..util import nsys_stub

    db = tmp_path / "ws.duckdb"
    traceql.ingest([nsys_stub(tmp_path / "k.sqlite")], db=db)
    con = duckdb.connect(str(db))
    con.execute("UPDATE workspace_version SET contract_version = ?", [CONTRACT_VERSION + 1])
    con.close()
    before = sha256(db)
    for args in (["info"], ["upgrade"], ["ingest", tmp_path / "k.sqlite"]):
        proc = cli("--db", db, *args)
        assert proc.returncode == 6, (args, proc.stderr)
        assert proc.stderr == (f"traceql: error: {db}: workspace of contract version {CONTRACT_VERSION + 1}, written "
                               f"by a newer traceql; this traceql ({traceql.__version__}) reads version "
                               f"{CONTRACT_VERSION}: update traceql\n")
    assert sha256(db) == before


def test_every_version_has_a_changelog_section():
    from traceql.store.contract import CHANGES

    text = (REPO / "schemas" / "CHANGELOG.md").read_text()
    for version in range(1, CONTRACT_VERSION + 1):
        assert f"## Contract {version}" in text, version
    assert set(CHANGES) == set(range(2, CONTRACT_VERSION + 1))


def test_upgrade_from_contract_2_recomputes_kernel_op(v2_package, tmp_path, tmp_path_factory):
    """2 -> 3: a workspace of contract 2 (the package at V2 ingests the PyProf trace lm-a),
    its source gone, is upgraded from its own rows: kernel_op (new call_range_id, PyProf's
    params) equals a fresh ingest's (the session's of the same file, tests/util.py ingested:
    kernel_op holds no path), and the kernel-op report names linear as PyProf does."""
    rel = "nvprof-pytorch-emit-nvtx-lm-v100-a/net.sql"
    src = tmp_path / "net.sql"
    shutil.copyfile(trace_file(rel), src)
    fresh = ingested(tmp_path_factory, rel)
    db = tmp_path / "v2.duckdb"
    ingest_v1(v2_package, [src], db)
    src.unlink()
    proc = cli("--db", db, "upgrade")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == f"upgraded {db} from contract version 2 to {CONTRACT_VERSION} (1 trace)"
    assert rows_of(db)["kernel_op"] == rows_of(fresh)["kernel_op"]
    with traceql.open(db) as ws:
        ops = ws.report("kernel-op", columns="op,aten_op,params", limit=31).to_pylist()
    assert ops[30] == {"op": "linear", "aten_op": "mm", "params": "M=200,N=(35,20),K=200,fp32"}


def test_upgrade_from_contract_2_fills_memory_event(v2_package, tmp_path):
    """2 -> 3 with memory sources: the package at V2 (no memory_event) ingests a PyTorch profiler
    trace recorded with profile_memory and with_stack (bert-small) and an nsys export captured
    with --cuda-memory-usage (Extra-P profile1). Upgraded with the files in place, every table
    equals a fresh ingest's: memory_event filled (levels, pairs, ranges, stacks) and call_stack
    with the stacks only memory events have. Without the files, memory_event stays empty for
    those traces (only the source holds the events) and report --by memory says why."""
    srcs = []
    for rel in ("kineto-tracelens-h100-bert-small/gaunernst_bert-small-uncased__1016001.json.gz",
                "extrap-windows-gtx1060-nsys2022.1/profile1.sqlite"):
        srcs.append(tmp_path / rel.split("/")[-1])
        shutil.copyfile(trace_file(rel), srcs[-1])
    fresh = tmp_path / "fresh.duckdb"
    traceql.ingest(srcs, db=fresh)
    v2 = tmp_path / "v2.duckdb"
    ingest_v1(v2_package, srcs, v2)
    db = tmp_path / "ws.duckdb"
    shutil.copyfile(v2, db)
    proc = cli("--db", db, "upgrade")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "trace 1: read again from its source", "trace 2: read again from its source",
        f"upgraded {db} from contract version 2 to {CONTRACT_VERSION} (2 traces)"]
    got, want = rows_of(db), rows_of(fresh)
    assert got == want
    assert len(want["memory_event"]) == 236 + 60
    assert sum(r[-1] is not None for r in want["memory_event"]) == 236  # bert's events have their stacks

    for s in srcs:
        s.unlink()
    db = tmp_path / "sourceless.duckdb"
    shutil.copyfile(v2, db)
    proc = cli("--db", db, "upgrade")
    assert proc.returncode == 0, proc.stderr
    with traceql.open(db) as ws:
        assert ws.sql("SELECT count(*) AS n FROM memory_event").to_pylist() == [{"n": 0}]
    proc = cli("--db", db, "report", "--by", "memory")
    assert proc.returncode == 0 and "no memory allocations recorded in this workspace" in proc.stdout + proc.stderr
