"""Issue 37, the second adversarial round: each numbered finding with the exact message and exit
code of its refusal, and the workspace byte-identical (sha256) where a command fails."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import duckdb
import pytest

import traceql
from fixtures.gen_nsys import generate
from traceql.store import guard
from traceql.core.errors import WorkspaceError

from ..cli_server import CliServer
from .test_bad_input import cli as process_cli
from .test_bad_input import one_line
from ..util import REPO, nsys_stub, sha256
from ..util import cli as served


@pytest.fixture(autouse=True, scope="module")
def eager():
    """Every family derived at ingest (TRACEQL_DERIVE=eager): a later read builds nothing, so a
    workspace's sha256 before and after a refused command compares what the command did."""
    old = os.environ.get("TRACEQL_DERIVE")
    os.environ["TRACEQL_DERIVE"] = "eager"
    yield
    if old is None:
        os.environ.pop("TRACEQL_DERIVE", None)
    else:
        os.environ["TRACEQL_DERIVE"] = old


def cli(*args, env=None, timeout=120):
    """`python -m traceql ARGS` as a user runs it (a fresh process forked from the warm server of
    this test process, tests.util.cli), in this process's environment (TRACEQL_DERIVE=eager) at
    the call. (A server of this module's own cost 1.1 CPU s to start.)"""
    return served(*args, env=env, timeout=timeout)


@pytest.fixture(scope="module")
def built(eager, tmp_path_factory):
    """A workspace of one generated nsys export (kernels, NVTX ranges), and the export."""
    folder = tmp_path_factory.mktemp("hardening")
    src = folder / "gen.sqlite"
    generate(src, layout="3", kernels=60, seed=3)
    db = folder / "base.duckdb"
    traceql.ingest([src], db=db)
    return db, src


@pytest.fixture
def ws(built, tmp_path):
    """A private copy of the built workspace."""
    db = tmp_path / "w.duckdb"
    shutil.copy(built[0], db)
    return db


def store(db: Path, *statements: str) -> None:
    """What a received workspace can hold: statements run on it directly, as DuckDB would."""
    con = duckdb.connect(str(db))
    try:
        for s in statements:
            con.execute(s)
    finally:
        con.close()


# ----------------------------------------------------------------------- 1. stored macros

def _called_builtins() -> list[str]:
    """The DuckDB built-in functions traceql's own SQL calls: every name followed by '(' in the
    SQL files and the Python package that DuckDB knows as a function (count(*) is count_star)."""
    names = set()
    for path in [*(REPO / "schemas").rglob("*.sql"), *(REPO / "queries").rglob("*.sql"),
                 *(REPO / "traceql").rglob("*.py")]:
        text = re.sub(r"--[^\n]*", "", path.read_text(encoding="utf-8"))
        names |= {m.lower() for m in re.findall(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*\(", text)}
    con = duckdb.connect()
    builtin = {r[0] for r in con.execute("SELECT DISTINCT function_name FROM duckdb_functions()").fetchall()}
    con.close()
    return sorted((names & builtin) | {"count_star"})


CALLED = _called_builtins()


def test_called_builtins_found():
    # the list the parametrized test below runs over is the real one, not empty or trivial
    for name in ("regexp_replace", "lower", "coalesce" if "coalesce" in CALLED else "sum", "row_number",
                 "list_contains", "count_star", "duckdb_tables", "current_database"):
        assert name in CALLED, name
    assert len(CALLED) > 80


def macro_message(db: Path, name: str, table: bool = False) -> str:
    return (f'{db}: holds macro "{name}" with the name of a DuckDB built-in function (run in place of the built-in '
            f"inside traceql's own SQL); refused. Remove it with: traceql --db {db} sql --write "
            f"'DROP MACRO {'TABLE ' if table else ''}\"{name}\"'")


TABLE_FUNCTIONS = ("duckdb_tables", "duckdb_columns", "duckdb_views", "duckdb_functions", "range", "unnest",
                   "generate_series", "read_text", "duckdb_schemas", "duckdb_extensions")


def _shadow(db: Path, names) -> None:
    """A macro of each of NAMES (a table macro for the table functions) stored in DB directly."""
    store(db, *(f'CREATE MACRO "{name}"(a := 0, b := 0, c := 0, d := 0, e := 0) AS '
                f"{'TABLE SELECT 1 AS x' if name in TABLE_FUNCTIONS else repr('/etc/hostname')}" for name in names))


@pytest.mark.parametrize("name", ["regexp_replace", "lower", "count_star", "duckdb_tables", "sum", "row_number",
                                  "list_contains", "current_database"])
def test_macro_shadowing_builtin_refused(built, tmp_path, name):
    """A stored macro named like a built-in traceql calls, alone: ingest and opening the workspace
    refuse it before running any of traceql's SQL; the workspace is unchanged. (Every name
    traceql calls: test_every_builtin_macro_refused, all at once.)"""
    assert name in CALLED
    db = tmp_path / "w.duckdb"
    shutil.copy(built[0], db)
    _shadow(db, [name])
    before = sha256(db)
    want = macro_message(db, name, name in TABLE_FUNCTIONS)
    for call in (lambda: traceql.ingest([built[1]], db=db), lambda: traceql.open(db)):  # (rm, upgrade: below)
        with pytest.raises(WorkspaceError) as err:
            call()
        assert str(err.value) == want
    assert sha256(db) == before


def test_every_builtin_macro_refused(built, tmp_path):
    """A macro named like each of the ~130 built-ins traceql's SQL and Python call, all stored in
    one workspace (every one of them shadowed while traceql checks): ingest, opening it, upgrade
    and rm refuse it with one message naming each macro and the DROP that removes it, the
    workspace unchanged; running that DROP script (sql --write) makes the workspace usable."""
    db = tmp_path / "w.duckdb"
    shutil.copy(built[0], db)
    _shadow(db, CALLED)
    before = sha256(db)
    quoted = [f'"{name}"' for name in sorted(CALLED)]
    fixes = "; ".join(f"DROP MACRO {'TABLE ' if name in TABLE_FUNCTIONS else ''}\"{name}\"" for name in sorted(CALLED))
    want = (f"{db}: holds macros {', '.join(quoted)} with the name of a DuckDB built-in function (run in place of "
            f"the built-in inside traceql's own SQL); refused. Remove them with: traceql --db {db} sql --write "
            f"'{fixes}'")
    for call in (lambda: traceql.ingest([built[1]], db=db), lambda: traceql.open(db)):
        with pytest.raises(WorkspaceError) as err:
            call()
        assert str(err.value) == want
    for args in (["upgrade"], ["rm", "1"], ["info"]):
        proc = cli("--db", str(db), *args)
        assert (proc.returncode, one_line(proc)) == (5, "traceql: error: " + want), args
    assert sha256(db) == before
    proc = cli("--db", str(db), "sql", "--write", fixes)
    assert proc.returncode == 0, proc.stderr
    with traceql.open(db) as w:
        assert w.con.execute("SELECT count(*) FROM kernel").fetchone()[0] == 60


def test_builtin_macros_removed_from_a_lazy_workspace(built, tmp_path):
    """The fix the refusal gives also works where the derived families are not built yet
    (TRACEQL_DERIVE=lazy): `sql --write` reads the catalog and the contract version with
    system.main's built-ins and builds no family over the macros. Before, its catalog query ran
    the stored duckdb_tables macro (exit 1, internal error). A script that leaves one macro is
    refused whole; the full one works, and the next report builds the families."""
    db = tmp_path / "lazy.duckdb"
    proc = cli("--db", str(db), "ingest", str(built[1]), env={"TRACEQL_DERIVE": "lazy"})
    assert proc.returncode == 0, proc.stderr
    eager = tmp_path / "eager.csv"
    assert cli("--db", str(built[0]), "report", "--by", "range", "--format", "csv", "-o", str(eager)).returncode == 0
    names = ["count_star", "duckdb_columns", "duckdb_tables", "list", "max"]
    _shadow(db, names)
    before = sha256(db)
    proc = cli("--db", str(db), "sql", "--write", 'DROP MACRO "list"', env={"TRACEQL_DERIVE": "lazy"})
    left = [n for n in names if n != "list"]
    assert (proc.returncode, one_line(proc)) == (5, f"traceql: error: {db}: holds macros "
                                                 + ", ".join(f'"{n}"' for n in left)
                                                 + " with the name of a DuckDB built-in function (run in place of "
                                                 "the built-in inside traceql's own SQL); refused. Remove them with: "
                                                 f"traceql --db {db} sql --write '"
                                                 + "; ".join(f"DROP MACRO {'TABLE ' if n in TABLE_FUNCTIONS else ''}"
                                                             f'"{n}"' for n in left) + "'")
    assert sha256(db) == before
    fix = "; ".join(f"DROP MACRO {'TABLE ' if n in TABLE_FUNCTIONS else ''}\"{n}\"" for n in names)
    proc = cli("--db", str(db), "sql", "--write", fix, env={"TRACEQL_DERIVE": "lazy"})
    assert proc.returncode == 0, proc.stderr
    proc = cli("--db", str(db), "report", "--by", "range", "--format", "csv", env={"TRACEQL_DERIVE": "lazy"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == eager.read_text()


def test_macro_cli_ingest_upgrade_rm(ws, built, tmp_path):
    """The issue's case end to end: a regexp_replace macro with a file path as a default
    parameter cannot be stored with sql --write (exit 5, nothing stored); stored directly (a
    received workspace), every command refuses with exit 5 and the workspace is unchanged."""
    secret = tmp_path / "secret"
    secret.write_text("SECRET-CONTENT")
    body = (f"CREATE MACRO regexp_replace(a,b,c, y := '{secret}') AS (SELECT content FROM read_text(y)), "
            f"(a,b,c,d, y := '{secret}') AS (SELECT content FROM read_text(y))")
    before = sha256(ws)
    proc = cli("--db", str(ws), "sql", "--write", body)
    assert proc.returncode == 5
    assert one_line(proc) == "traceql: error: " + macro_message(ws, "regexp_replace")
    assert sha256(ws) == before
    store(ws, body)
    before = sha256(ws)
    for args in (["ingest", str(built[1])], ["upgrade"], ["rm", "1"], ["report", "--by", "kernel"], ["info"]):
        proc = cli("--db", str(ws), *args)
        assert proc.returncode == 5, (args, proc.stderr)
        assert one_line(proc) == "traceql: error: " + macro_message(ws, "regexp_replace"), args
        assert sha256(ws) == before
    # the fix the message gives works
    proc = cli("--db", str(ws), "sql", "--write", 'DROP MACRO "regexp_replace"')
    assert proc.returncode == 0, proc.stderr
    proc = cli("--db", str(ws), "sql", "SELECT count(*) FROM api_call WHERE name LIKE '%SECRET%'", "--format", "csv")
    assert proc.stdout.splitlines()[1] == "0"


def test_clean_versions_remembered_not_trusted_blindly(ws, built, tmp_path, monkeypatch):
    """The macro check lists every DuckDB function (0.05 s of each command), so a version of a
    workspace file found clean, or renamed in place by traceql's own write, is recorded in the
    user's cache folder (when there is one: none is made) and not checked again. A change to
    the file (macros stored into it) is a new version, checked; a record another user could
    have written is ignored: a hostile file whose version is forged into it is refused, and
    accepted (the record is read) only when the record is the user's own."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    checks = []
    real = guard.shadowing
    monkeypatch.setattr(guard, "shadowing", lambda con: checks.append(1) or real(con))
    for _ in range(2):  # no cache folder: none is made (nothing written into HOME), each open checks
        traceql.open(ws).close()
    assert len(checks) == 2 and not (tmp_path / "cache").exists()
    (tmp_path / "cache").mkdir()
    for _ in range(3):
        traceql.open(ws).close()
    assert len(checks) == 3
    record = tmp_path / "cache" / "traceql" / "clean-workspaces"
    assert record.read_text().splitlines() == [" ".join(map(str, guard.identity(ws)))]
    assert (record.stat().st_mode & 0o777, record.parent.stat().st_mode & 0o777) == (0o600, 0o700)
    # written by traceql (an ingest renames a checked copy in place): not checked when next opened
    traceql.ingest([built[1]], db=ws)
    traceql.open(ws).close()
    assert len(checks) == 4  # the ingest's own check of the file it copied, none at the open
    # a new version: checked, refused
    store(ws, "CREATE MACRO lower(a) AS 'x'")
    with pytest.raises(WorkspaceError, match='holds macro "lower"'):
        traceql.open(ws)
    assert len(checks) == 5
    # a version forged into the record: ignored unless the record is private to the user
    forged = " ".join(map(str, guard.identity(ws)))
    record.write_text(record.read_text() + forged + "\n")
    for mode, refused in ((0o666, True), (0o600, False)):
        record.chmod(mode)
        if refused:
            with pytest.raises(WorkspaceError, match='holds macro "lower"'):
                traceql.open(ws)
        else:
            traceql.open(ws).close()
    assert len(checks) == 6


def test_schema_named_raw_refused(ws, built):
    store(ws, "CREATE SCHEMA raw", "CREATE TABLE raw.nvtx_stage AS SELECT 1 AS x")
    before = sha256(ws)
    with pytest.raises(WorkspaceError) as err:
        traceql.ingest([built[1]], db=ws)
    assert str(err.value) == (f'{ws}: holds schema "raw", the name of a catalog traceql attaches while it writes; '
                              f"refused. Remove it with: traceql --db {ws} sql --write 'DROP SCHEMA \"raw\" CASCADE'")
    assert sha256(ws) == before


def test_own_macros_and_views_not_redirected(ws, built):
    """Macros named like traceql's own (temporary) macros and a contract view changed in the
    workspace do not change what ingest computes: the same rows as a fresh ingest (built's,
    of the same export into a new workspace)."""
    store(ws, "CREATE MACRO nvtx_group_name(name) AS 'HIJACKED'",
          "CREATE OR REPLACE VIEW gpu_op AS SELECT * FROM kernel WHERE false")
    traceql.ingest([built[1]], db=ws)
    fresh = built[0]
    q = "SELECT count(*), count(DISTINCT group_name), sum(CASE WHEN group_name = 'HIJACKED' THEN 1 END) FROM nvtx_range"
    with traceql.open(ws) as a, traceql.open(fresh) as b:
        got, want = a.con.execute(q).fetchone(), b.con.execute(q).fetchone()
        assert got == want and got[0] > 0 and got[2] is None
        assert a.con.execute("SELECT count(*) FROM gpu_op").fetchone() == \
            b.con.execute("SELECT count(*) FROM gpu_op").fetchone() != (0,)


def test_ingest_connection_reaches_no_file(tmp_path, built):
    """The connection traceql's ingest runs on: the source it was given is readable through the
    sqlite extension loaded from the package, any other file is not; no extension folder is
    created (nothing installed or downloaded). The package's extension is loaded without its
    signature check (a hash of 35 MB), which is on again before anything else runs."""
    con = guard.connect(tmp_path / "c.duckdb", files=[built[1]], temp_directory=tmp_path / "spill")
    try:
        assert con.execute("SELECT current_setting('allow_unsigned_extensions')").fetchone()[0] is False
        assert con.execute("SELECT count(*) FROM sqlite_scan(?, 'StringIds')", [str(built[1])]).fetchone()[0] > 0
        other = tmp_path / "other.txt"
        other.write_text("x")
        for sql in ("SELECT * FROM read_text(?)", "SELECT * FROM read_csv(?)"):
            with pytest.raises(duckdb.PermissionException, match="file system operations are disabled"):
                con.execute(sql, [str(other)])
        with pytest.raises(duckdb.Error):
            con.execute("SET enable_external_access = true")
        with pytest.raises(duckdb.Error):
            con.execute("INSTALL httpfs")
    finally:
        con.close()


# ------------------------------------------------------------- 4. --db that is not DuckDB

@pytest.mark.parametrize("command", [["ingest", "SRC"], ["upgrade"], ["rm", "1"], ["report", "--by", "kernel"],
                                     ["sql", "--write", "SELECT 1"]])
def test_db_sqlite_export_refused(tmp_path, command):
    """--db naming a SQLite export: refused before DuckDB opens it (exit 5), the file unchanged
    and no DuckDB extension folder created under HOME (no download attempted)."""
    src = nsys_stub(tmp_path / "copy.sqlite")
    home = tmp_path / "home"
    home.mkdir()
    before = sha256(src)
    proc = cli("--db", str(src), *[str(src) if a == "SRC" else a for a in command], env={"HOME": str(home)})
    assert proc.returncode == 5, proc.stderr
    assert one_line(proc) == (f"traceql: error: {src}: not a traceql workspace (a SQLite database, perhaps a profiler "
                              "export: read it with 'traceql ingest FILE'); --db names the workspace (a .duckdb file)")
    assert sha256(src) == before
    assert not (home / ".duckdb").exists()


def test_ingest_downloads_nothing(tmp_path, built):
    """A whole ingest (and a second one over the workspace) with HOME empty: no .duckdb folder."""
    home = tmp_path / "home"
    home.mkdir()
    db = tmp_path / "w.duckdb"
    for _ in range(2):
        proc = cli("--db", str(db), "ingest", str(built[1]), env={"HOME": str(home)})
        assert proc.returncode == 0, proc.stderr
    assert not (home / ".duckdb").exists()


def _network_jail() -> list[str] | None:
    """`unshare -n strace ...`: a network namespace with no interface up, and every socket the
    process tree opens logged; None where the machine cannot (not root, no strace). With
    --seccomp-bpf a process stops for strace at socket and connect only, not at each of its
    system calls (2 CPU s less for the test; a socket(AF_INET) added to traceql is still caught)."""
    import subprocess

    if shutil.which("unshare") is None or shutil.which("strace") is None:
        return None
    try:
        ok = subprocess.run(["unshare", "-n", "true"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return None
    return ["unshare", "-n", "--", "strace", "-f", "--seccomp-bpf", "-qq", "-e", "trace=socket,connect"] if ok else None


def test_no_command_opens_a_network_socket(tmp_path, built):
    """Run with no network at all and every socket logged: ingest (two processes, SQLite and
    Kineto JSON), report, analyze, export, upgrade, `--db` on an export and `sql --write
    --allow-files INSTALL` give their usual exit codes, and no process opens an internet
    socket (only AF_UNIX). INSTALL used to try extensions.duckdb.org. The commands are forked
    off one warm server (tests/cli_server.py) started in the jail: strace -ff logs each process
    of the tree to a file of its own, the server's start-up (every import) included, and a
    command's processes are the files that appear while it runs (8 interpreters started
    under strace cost 13 CPU s, most of it Python's start-up and traceql's imports)."""
    from fixtures.gen_kineto import generate as kineto

    jail = _network_jail()
    if jail is None:
        pytest.skip("needs root for `unshare -n` (a network namespace) and strace")
    home = tmp_path / "home"
    home.mkdir()
    kineto(tmp_path / "k.json.gz", kernels=200)
    src = tmp_path / "copy.sqlite"
    shutil.copy(built[1], src)
    db = tmp_path / "w.duckdb"
    logs = tmp_path / "strace"
    logs.mkdir()
    runs = [
        (0, "ingest", "-j", "2", str(built[1]), str(tmp_path / "k.json.gz")),
        (0, "report", "--by", "kernel"),
        (0, "analyze"),
        (0, "export", "-o", str(tmp_path / "out"), "--format", "parquet"),
        (0, "upgrade"),
        (2, "sql", "--write", "--allow-files", "INSTALL httpfs"),
        (2, "sql", "--allow-files", "SELECT * FROM read_csv('https://example.com/x.csv')"),
    ]

    def internet(files) -> list[str]:
        lines = [line for f in files for line in f.read_text().splitlines()]
        return [line for line in lines if ("socket(" in line or "connect(" in line) and "AF_UNIX" not in line]

    with CliServer(env={"HOME": str(home)}, prefix=[*jail, "-ff", "-o", str(logs / "log")]) as jailed:
        assert jailed.run("--version").returncode == 0
        seen = set(logs.iterdir())
        assert seen, "strace logged no process"
        for code, *args in runs + [(5, "--db", str(src), "ingest", str(src))]:
            argv = [*args] if args[0] == "--db" else ["--db", str(db), *args]
            proc = jailed.run(*argv, timeout=300)
            assert proc.returncode == code, (args, proc.stderr)
            mine = set(logs.iterdir()) - seen
            assert mine, args  # the command's own process: forked under strace
            assert not internet(mine), (args, internet(mine))
            seen |= mine
    assert not internet(logs.iterdir())  # the server's own log, complete now that it has ended
    assert not (home / ".duckdb").exists()


# ----------------------------------------------------------- 3. sql --write all or nothing

def test_sql_write_all_or_nothing(ws):
    """A script whose second statement fails changes nothing: the DELETE is rolled back and
    the stored reports stay valid (report --by kernel still counts every kernel)."""
    with traceql.open(ws) as w:
        kernels = w.con.execute("SELECT count(*) FROM kernel").fetchone()[0]
        report = w.report("kernel").to_pylist()
    before = sha256(ws)
    proc = cli("--db", str(ws), "sql", "--write",
               "DELETE FROM kernel WHERE kernel_id < 10; SELECT CAST(name AS INTEGER) FROM kernel")
    assert proc.returncode == 2
    assert re.fullmatch(r"traceql: error: SQL: Conversion Error: Could not convert string '.*' to INT32.*",
                        one_line(proc))
    assert sha256(ws) == before
    with traceql.open(ws) as w:
        assert w.con.execute("SELECT count(*) FROM kernel").fetchone()[0] == kernels
        assert w.report("kernel").to_pylist() == report
    # a script that succeeds: the change and the dropped stored reports together
    proc = cli("--db", str(ws), "sql", "--write", "DELETE FROM kernel WHERE kernel_id < 10")
    assert proc.returncode == 0, proc.stderr
    with traceql.open(ws) as w:
        assert w.con.execute("SELECT count(*) FROM kernel").fetchone()[0] == kernels - 10
        assert sum(r["calls"] for r in w.report("kernel").to_pylist()) == kernels - 10
        assert w.con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name LIKE 'stored_%'").fetchone()[0] == 0
    assert sha256(ws) != before


def test_sql_write_refuses_transaction_statements(ws):
    before = sha256(ws)
    proc = cli("--db", str(ws), "sql", "--write", "BEGIN; DELETE FROM kernel; COMMIT")
    assert proc.returncode == 2
    assert one_line(proc) == ("traceql: error: SQL: BEGIN, COMMIT and ROLLBACK are not needed: a script run with "
                              "--write is one transaction (all of it or, when a statement fails, nothing)")
    assert sha256(ws) == before


def test_hard_links_refused(ws, built):
    link = ws.with_name("link.duckdb")
    os.link(ws, link)
    before = sha256(ws)
    with pytest.raises(WorkspaceError) as err:
        traceql.ingest([built[1]], db=link)
    assert str(err.value) == (f"{link}: the workspace file has 2 hard links; a write replaces the file, which would "
                              "split them into separate workspaces: keep one name (a symbolic link is fine)")
    assert sha256(ws) == before


# ------------------------------------------------------------------ 2. -o and the workspace

OUTPUT_COMMANDS = [["report", "--by", "kernel"], ["sql", "SELECT 1"], ["summary"], ["analyze"],
                   ["query", "kernel"], ["export", "--format", "perfetto"], ["export", "--format", "folded"],
                   ["plot", "--by", "kernel"], ["diff", "1", "1"]]


@pytest.mark.parametrize("command", OUTPUT_COMMANDS, ids=lambda c: "-".join(c[:3]))
def test_output_never_the_workspace(ws, tmp_path, command):
    """-o naming the workspace, through a symbolic link, a hard link or its WAL/lock name: exit
    2 with one message, --overwrite or not, and the workspace byte-identical."""
    link = tmp_path / "link.duckdb"
    link.symlink_to(ws)
    before = sha256(ws)
    for target in (ws, link, Path(str(ws) + ".wal"), Path(str(ws) + ".lock")):
        for extra in ([], ["--overwrite"]):
            proc = cli("--db", str(ws), *command, "-o", str(target), *extra)
            assert proc.returncode == 2, (command, target, proc.stderr)
            assert one_line(proc) == (f"traceql: error: {target}: is the workspace {ws} (or its WAL or lock file): "
                                      "-o never writes over it; name another file")
            assert sha256(ws) == before


def test_output_exists_needs_overwrite(ws, tmp_path):
    """An existing file is replaced only with --overwrite, by every command writing -o."""
    out = tmp_path / "out.txt"
    for command in (["report", "--by", "kernel"], ["sql", "SELECT 1"], ["summary"], ["analyze"], ["query", "kernel"]):
        out.write_text("keep me")
        proc = cli("--db", str(ws), *command, "-o", str(out))
        assert proc.returncode == 2, command
        assert one_line(proc) == f"traceql: error: {out}: exists; use --overwrite to replace it"
        assert out.read_text() == "keep me"
        proc = cli("--db", str(ws), *command, "-o", str(out), "--overwrite")
        assert proc.returncode == 0, proc.stderr
        assert out.read_text() != "keep me"


def test_output_never_an_input(ws, built, tmp_path):
    src = tmp_path / "a.sqlite"
    shutil.copy(built[1], src)
    before = sha256(src)
    proc = cli("--db", str(ws), "diff", str(src), "1", "-o", str(src), "--overwrite")
    assert proc.returncode == 2
    assert one_line(proc) == (f"traceql: error: {src}: is an input of this command ({src}): -o never writes over it; "
                              "name another file")
    assert sha256(src) == before


def test_api_export_never_the_workspace(ws):
    """The library refuses it too: an export folder whose file would be the workspace."""
    with traceql.open(ws) as w:
        with pytest.raises(traceql.UsageError, match="is the workspace"):
            w.export_perfetto(ws, overwrite=True)
        with pytest.raises(traceql.UsageError, match="is the workspace"):
            w.export_folded(ws, overwrite=True)


# ------------------------------------------------------------------- 10. one escaping function

NASTY = "a\x1b[31mRED\x07\rb\nc|d\u202e"
SHOWN = "a\\x1b[31mRED\\x07\\rb\\nc|d\\u202e"


def test_clean_text_is_the_one_escape():
    from traceql.core.faults import printable
    from traceql.core.text import clean_text

    assert clean_text(NASTY) == SHOWN
    assert printable(NASTY) == SHOWN
    assert clean_text("\x9b2J\t") == "\\x9b2J\\t"
    assert clean_text("kernel<float, 4> é 日本") == "kernel<float, 4> é 日本"


def test_markdown_and_headers_escaped(ws):
    """Markdown cells and headers and table headers: no raw ESC, BEL or CR, one line per row."""
    sql = "SELECT $v AS \"h\x1b[31mX\nY\", 1 AS n"
    proc = cli("--db", str(ws), "sql", sql, "--param", f"v={NASTY}", "--format", "markdown")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ("| h\\x1b[31mX\\nY | n |\n|---|---|\n"
                           "| a\\x1b[31mRED\\x07\\rb\\nc\\|d\\u202e | 1 |\n")
    proc = cli("--db", str(ws), "sql", sql, "--param", f"v={NASTY}", env={"COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    assert "\x1b" not in proc.stdout and "\x07" not in proc.stdout and "\r" not in proc.stdout
    lines = proc.stdout.splitlines()
    assert lines == ["n  h\\x1b[31mX\\nY", "-  " + "-" * len(SHOWN), "1  " + SHOWN, "1 row"]


def test_info_and_queries_escaped(ws, built, tmp_path):
    """GPU names, hosts (--host with a newline) and a user query's description (an OSC title
    sequence) are printed escaped, even into a pipe."""
    db = tmp_path / "h.duckdb"
    proc = cli("--db", str(db), "ingest", str(built[1]), "--host", "node1\nforged line")
    assert proc.returncode == 0, proc.stderr
    proc = cli("--db", str(db), "sql", "--write", "UPDATE device SET name = $n", "--param", f"n={NASTY}")
    assert proc.returncode == 0, proc.stderr
    proc = cli("--db", str(db), "info")
    assert proc.returncode == 0, proc.stderr
    assert "  host     node1\\nforged line (user)" in proc.stdout.splitlines()
    gpus = [line for line in proc.stdout.splitlines() if line.startswith("  GPUs")]
    assert gpus and SHOWN in gpus[0]
    assert "\x1b" not in proc.stdout and "\x07" not in proc.stdout
    folder = tmp_path / "q"
    folder.mkdir()
    (folder / "mine.sql").write_text("-- mine: counts \x1b]0;owned\x07 kernels\nSELECT count(*) AS n FROM kernel\n")
    proc = cli("--db", str(db), "queries", "mine", "--queries", str(folder))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == "mine: counts \\x1b]0;owned\\x07 kernels [" + str(folder / "mine.sql") + "]"
    assert "\x1b" not in proc.stdout


# ------------------------------------------------------------------- 5. views in an export

def test_export_views_not_read(tmp_path):
    """An export whose StringIds is an endless WITH RECURSIVE view (and a cross join view in
    place of a kernel table's neighbour): ingest reads tables only, finishes at once, and says
    which views it did not read; the kernel's name is NULL, not hung."""
    src = nsys_stub(tmp_path / "v.sqlite")
    import sqlite3

    con = sqlite3.connect(src)
    con.execute("DROP TABLE StringIds")
    con.execute("CREATE VIEW StringIds AS WITH RECURSIVE r(id, value) AS (SELECT 1, 'k' UNION ALL "
                "SELECT id + 1, value FROM r) SELECT id, value FROM r")
    con.execute("CREATE VIEW NVTX_EVENTS AS SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL a, CUPTI_ACTIVITY_KIND_KERNEL b, "
                "CUPTI_ACTIVITY_KIND_KERNEL c, CUPTI_ACTIVITY_KIND_KERNEL d")
    con.commit()
    con.close()
    db = tmp_path / "w.duckdb"
    proc = cli("--db", str(db), "ingest", str(src), timeout=120)
    assert proc.returncode == 0, proc.stderr
    with traceql.open(db) as w:
        assert w.con.execute("SELECT count(*), count(name) FROM kernel").fetchone() == (1, 0)
        assert w.con.execute("SELECT detail FROM ingest_stats WHERE key = 'schema.note'").fetchall() == [
            ("NVTX_EVENTS, StringIds: a view where the exporter writes a table; not read (traceql reads tables only), "
             "its rows are absent",)]


# ------------------------------------------------------------- 6, 7. JSON linear and bounded

def test_kineto_truncated_linear(tmp_path):
    """2 MB of '}]' after an open string: refused in seconds (was 67 s, quadratic)."""
    import time

    path = tmp_path / "t.json"
    path.write_text('{"traceEvents":[{"ph":"X","name":"' + "}]" * 1_000_000)
    started = time.process_time()
    with pytest.raises(traceql.InputError) as err:
        traceql.ingest([path], db=tmp_path / "w.duckdb")
    assert str(err.value) == f"{path}: truncated or damaged JSON (the traceEvents array is not closed properly)"
    assert time.process_time() - started < 10
    assert not (tmp_path / "w.duckdb").exists()


def gzip_of_blanks(path: Path, head: bytes, mib: int, tail: bytes) -> Path:
    """PATH: a gzip file (one member, deflate at level 9) of HEAD, MIB MiB of blanks and TAIL,
    written without deflating each MiB: behind a window of blanks, a MiB of blanks followed by a
    sync flush deflates to the same bytes every time (checked on two), so those are written MIB
    - 1 times; the trailer holds the CRC-32 and size of the whole. gzip.open at level 9 spent
    6.8 CPU s deflating 1 GiB; this 0.5 s, for a stream Python's gzip reads back as the same data."""
    import struct
    import zlib

    block = b" " * (1 << 20)
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = deflate.compress(head + block) + deflate.flush(zlib.Z_SYNC_FLUSH)
    again = [deflate.compress(block) + deflate.flush(zlib.Z_SYNC_FLUSH) for _ in range(2)]
    assert again[0] == again[1]
    crc = zlib.crc32(head)
    for _ in range(mib):
        crc = zlib.crc32(block, crc)
    crc = zlib.crc32(tail, crc)
    with open(path, "wb") as fh:
        fh.write(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff")  # gzip, deflate, no name, no time
        fh.write(first)
        for _ in range(mib - 1):
            fh.write(again[0])
        fh.write(deflate.compress(tail) + deflate.flush())
        fh.write(struct.pack("<II", crc, (len(head) + (mib << 20) + len(tail)) & 0xFFFFFFFF))
    return path


def test_gzip_of_blanks_is_what_it_says(tmp_path):
    """The helper's stream read back by Python's gzip (CRC and size checked): HEAD, the blanks, TAIL."""
    import gzip

    path = gzip_of_blanks(tmp_path / "b.gz", b"[", 5, b"]")
    assert gzip.decompress(path.read_bytes()) == b"[" + b" " * (5 << 20) + b"]"
    assert path.stat().st_size < 30_000


def test_kineto_gzip_bomb(tmp_path):
    """1 MB of gzip holding 1 GiB of blanks inside traceEvents: refused after 64 MB of it."""
    import resource
    import time

    path = gzip_of_blanks(tmp_path / "bomb.json.gz", b'{"traceEvents":[', 1024, b"]}")
    assert 1_000_000 < path.stat().st_size < 1_100_000
    started = time.process_time()
    proc = process_cli("--db", str(tmp_path / "w.duckdb"), "ingest", str(path))  # its own process: RUSAGE_CHILDREN
    assert proc.returncode == 3
    assert re.fullmatch(rf"traceql: error: {re.escape(str(path))}: gzip data expanding more than 250 times "
                        r"\([\d,]+ bytes from [\d,]+\): not a profiler trace \(a gzip bomb\?\)", one_line(proc))
    assert resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss < 1_500_000  # KB: no GiB held
    assert time.process_time() - started < 10


def test_kineto_whitespace_unbounded_refused(tmp_path):
    """Plain JSON: 80 MB of blanks inside traceEvents is no event boundary within 64 MB."""
    path = tmp_path / "blank.json"
    with open(path, "wb") as fh:
        fh.write(b'{"traceEvents":[{"ph":"X"},')
        fh.write(b" " * (80 << 20))
        fh.write(b'{"ph":"X"}]}')
    with pytest.raises(traceql.InputError) as err:
        traceql.ingest([path], db=tmp_path / "w.duckdb")
    assert re.fullmatch(rf"{re.escape(str(path))}: no boundary between two events in [\d,]+ bytes of traceEvents "
                        r"\(an event larger than 64 MB, or not a Kineto trace\)", str(err.value))


# ---------------------------------------------------------- 8, 11. crashes, quiet wrong answers

def _kineto_mm(path: Path, dims, device=0, extra_keys: str = "", op: str = "aten::mm") -> Path:
    """One aten::mm (or OP) with its launch and kernel (Kineto), of input DIMS and kernel device DEVICE."""
    import json

    events = [
        {"ph": "X", "cat": "cpu_op", "name": op, "pid": 1, "tid": 1, "ts": 100, "dur": 50,
         "args": {"External id": 1, "Input Dims": dims, "Input type": ["float", "float"]}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 110, "dur": 10,
         "args": {"External id": 1, "correlation": 7}},
        {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 200, "dur": 30,
         "args": {"External id": 1, "device": device, "stream": 7, "correlation": 7}}]
    path.write_text('{"schemaVersion": 1, ' + extra_keys + '"traceEvents": ' + json.dumps(events) + "}")
    return path


@pytest.mark.parametrize("op, dims", [
    ("aten::mm", [[2**31, 2**31], [2**31, 2**31]]), ("aten::mm", [[10**30, 3], [3, 3]]),
    ("aten::mm", [[-3, 4], [4, 5]]), ("aten::mm", [["a", 3], [3, 3]]), ("aten::mm", [[None, 3], [3, 3]]),
    ("aten::bmm", [[2**31, 2**31, 2**31], [2**31, 2**31, 2**31]]),
], ids=lambda v: str(v)[:40])
def test_sizes_out_of_range_are_null(tmp_path, op, dims):
    """Input Dims that overflow a count, are negative or are not numbers: the ingest succeeds,
    the op's FLOPs and bytes are NULL (never negative), and ingest_stats says so (64x64, the same
    trace otherwise, is costed: test_sizes_in_range_are_costed)."""
    db = tmp_path / "w.duckdb"
    traceql.ingest([_kineto_mm(tmp_path / "mm.json", dims, op=op)], db=db)
    with traceql.open(db) as w:
        assert w.con.execute("SELECT flops, bytes FROM kernel_op").fetchall() == [(None, None)]
        warned = w.con.execute("SELECT value, severity FROM ingest_stats WHERE key = 'flops.sizes_out_of_range'")
        assert warned.fetchall() == [(1, "warning")]
        assert [r["bytes"] for r in w.report("op").to_pylist()] == [None]


def test_sizes_in_range_are_costed(tmp_path):
    """The trace of test_sizes_out_of_range_are_null with Input Dims 64x64: FLOPs and bytes of
    the formula, no warning (each case of that test ingested it again)."""
    good = tmp_path / "g.duckdb"
    traceql.ingest([_kineto_mm(tmp_path / "ok.json", [[64, 64], [64, 64]])], db=good)
    with traceql.open(good) as w:
        assert w.con.execute("SELECT flops, bytes FROM kernel_op").fetchall() == [(2 * 64**3, 4 * 3 * 64 * 64)]
        assert w.con.execute("SELECT count(*) FROM ingest_stats WHERE key = 'flops.sizes_out_of_range'"
                             ).fetchall() == [(0,)]


PYPROF = "dlprof-pytorch-emit-nvtx-nsys2022.1/nsys_profile.sqlite"
BAD_SHAPES = {"(32, 400)": "('a', 3)", "(32, 120)": "(None, 3)", "(32, 84)": "(1e400, 3)", "(32, 3, 32, 32)": "([1], 3)"}


def test_pyprof_marker_shapes_that_are_no_counts(tmp_path):
    """PyProf argument markers (a real DLProf nsys export) whose first shape of linear and conv2d
    is ('a', 3), (None, 3), (1e400, 3) or ([1], 3): the ingest succeeds (it crashed with exit 1),
    the kernels under those markers have NULL FLOPs and bytes, every other kernel the FLOPs of the
    unchanged export, and flops.sizes_out_of_range counts the 4 markers."""
    import sqlite3

    from ..util import trace_file

    src = trace_file(PYPROF)
    bad = tmp_path / "bad.sqlite"
    shutil.copyfile(src, bad)
    con = sqlite3.connect(bad)
    changed = 0
    for old, new in BAD_SHAPES.items():
        changed += con.execute("UPDATE NVTX_EVENTS SET text = replace(text, ?, ?) WHERE text LIKE ? OR text LIKE ?",
                               [f"'shape': {old}", f"'shape': {new}", "{'mod': 'torch.nn.functional', 'op': 'linear'%",
                                "{'mod': 'torch.nn.functional', 'op': 'conv2d'%"]).rowcount
    con.commit()
    con.close()
    assert changed >= 4
    dbs = {}
    for name, path in (("good", src), ("bad", bad)):
        dbs[name] = tmp_path / f"{name}.duckdb"
        proc = cli("--db", str(dbs[name]), "ingest", str(path))
        assert proc.returncode == 0, proc.stderr
    q = ("SELECT k.kernel_id, k.flops, k.bytes, r.name FROM kernel_op k LEFT JOIN nvtx_range r "
         "ON r.trace_id = k.trace_id AND r.range_id = k.marker_range_id ORDER BY k.kernel_id")
    with traceql.open(dbs["good"]) as g, traceql.open(dbs["bad"]) as b:
        good = {r[0]: r[1:3] for r in g.con.execute(q).fetchall()}
        rows = b.con.execute(q).fetchall()
        assert b.con.execute("SELECT value, severity FROM ingest_stats WHERE key = 'flops.sizes_out_of_range'"
                             ).fetchall() == [(4, "warning")]
    damaged = {new: 0 for new in BAD_SHAPES.values()}
    for kernel_id, flops, nbytes, marker in rows:
        hit = [new for new in BAD_SHAPES.values() if marker and f"'shape': {new}" in marker]
        if hit:
            damaged[hit[0]] += 1
            assert (flops, nbytes) == (None, None), marker
        else:
            assert (flops, nbytes) == good[kernel_id], marker
    assert all(damaged.values()), damaged  # every bad shape reached a kernel
    assert len(rows) == len(good)


def test_kineto_device_beyond_32_bits(tmp_path):
    db = tmp_path / "w.duckdb"
    traceql.ingest([_kineto_mm(tmp_path / "d.json", [[4, 4], [4, 4]], device=2**40)], db=db)
    with traceql.open(db) as w:
        assert w.con.execute("SELECT device_id FROM kernel").fetchall() == [(None,)]
        assert w.con.execute("SELECT value, severity FROM ingest_stats WHERE key = 'kineto.device_out_of_range'"
                             ).fetchall() == [(1, "warning")]


@pytest.mark.parametrize("text, message", [
    ('{"traceEvents":[{"ph":"X","name":"a","ts":1,"dur":1,"pid":1,"tid":1,"args":' + "[" * 5000 + "]" * 5000 + "}]}",
     "JSON nested too deeply inside an event (more than 1000 levels): not a PyTorch profiler trace"),
    ('{"traceEvents":[{"ph":"X","name":"a","ts":NaN,"dur":1,"pid":1,"tid":1}]}',
     "JSON with NaN or Infinity as a number, which JSON does not allow (a writer's bug); not read"),
    ('{"traceEvents":[],"traceEvents":[{"ph":"X","cat":"kernel","name":"k","ts":1,"dur":1,"pid":1,"tid":1}]}',
     "the JSON object has traceEvents twice (a damaged or concatenated file); traceql reads a trace with one"),
], ids=["deep", "nan", "duplicate-key"])
def test_kineto_refusals(tmp_path, text, message):
    path = tmp_path / "k.json"
    path.write_text(text)
    proc = cli("--db", str(tmp_path / "w.duckdb"), "ingest", str(path))
    assert proc.returncode == 3
    assert one_line(proc) == f"traceql: error: {path}: {message}"
    assert not (tmp_path / "w.duckdb").exists()


def test_kineto_invalid_utf8(tmp_path):
    path = tmp_path / "u.json"
    path.write_bytes(b'{"traceEvents":[{"ph":"X","name":"a\xff\xfe","ts":1,"dur":1,"pid":1,"tid":1}]}')
    proc = cli("--db", str(tmp_path / "w.duckdb"), "ingest", str(path))
    assert proc.returncode == 3
    assert one_line(proc).startswith(f"traceql: error: {path}: text that is not valid UTF-8 (")


SQL_OUT_OF_RANGE = ("traceql: error: a value of the result is out of the range traceql can print (a date or timestamp "
                    "outside years 1-9999, an interval beyond 999,999,999 days): CAST it to VARCHAR, or write "
                    "--format parquet -o FILE")


@pytest.mark.parametrize("sql", ["SELECT 'infinity'::DATE", "SELECT make_date(10000, 1, 1)",
                                 "SELECT to_timestamp(1e12)", "SELECT * FROM test_all_types()"])
def test_sql_values_out_of_range(ws, sql):
    for fmt in ("table", "csv", "json", "markdown"):
        proc = cli("--db", str(ws), "sql", sql, "--format", fmt)
        assert proc.returncode == 2, (fmt, proc.stderr)
        assert one_line(proc) == SQL_OUT_OF_RANGE


def test_sql_and_params_edges(ws):
    before = sha256(ws)
    deep = "(" * 60 + "true" + ")" * 60
    proc = cli("--db", str(ws), "report", "--by", "kernel", "--where", deep)
    assert proc.returncode == 2
    assert one_line(proc) == ("traceql: error: --where: nested too deeply to check (parentheses more than about 50 "
                              "levels deep)")
    for sql, args in ((f"SELECT $v AS v, {'(' * 60}1{')' * 60} AS x", ["--param", "v=2"]),
                      (f"SELECT {'(' * 1000}nosuchcol{')' * 1000} AS x FROM kernel", [])):
        proc = cli("--db", str(ws), "sql", sql, *args)
        assert proc.returncode == 2
        assert one_line(proc) == ("traceql: error: SQL: nested too deeply to check (parentheses, subqueries or CASE "
                                  "more than about 50 levels deep)")
    proc = cli("--db", str(ws), "sql", "SELECT $n AS n", "--param", "n=" + "9" * 5000)
    assert proc.returncode == 2
    assert one_line(proc) == ("traceql: error: --param n: a whole number of 5,000 digits; at most 38 (DuckDB's "
                              "widest integer); quote it as text in the query if it is an identifier")
    proc = cli("--db", str(ws), "sql", "SELECT typeof($n) AS t, $n AS n", "--param", "n=١٢٣", "--format", "csv")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[1] == "VARCHAR,١٢٣"
    proc = cli("--db", str(ws), "sql", "SELECT (SELECT sum(dur) FROM kernel k WHERE k.trace_id = t.trace_id) AS s "
               "FROM trace t", "--format", "csv")
    assert proc.returncode == 0, proc.stderr
    with traceql.open(ws) as w:
        assert proc.stdout.splitlines()[1] == str(w.con.execute("SELECT sum(dur) FROM kernel").fetchone()[0])
    for script, message in [
            ("CALL enable_logging(storage := 'file', storage_path := '/tmp/traceql-logs')",
             'traceql: error: SQL: the query reads or writes the directory "/tmp/traceql-logs" of this machine, which '
             "traceql allows only when asked: traceql sql --allow-files (traceql.open(..., allow_files=True)) to "
             "allow it"),
            ("SET enable_profiling='json'; SET profiling_output='/tmp/traceql-prof.json'; SELECT 1",
             "traceql: error: SQL: DuckDB failed inside while running it (INTERNAL Error: Attempted to dereference "
             "unique_ptr that is NULL!); nothing it did was saved")]:
        proc = cli("--db", str(ws), "sql", "--write", script)
        assert proc.returncode == 2, proc.stderr
        assert one_line(proc) == message
    assert sha256(ws) == before


def test_memory_limit_edges(tmp_path, built):
    db = tmp_path / "w.duckdb"
    proc = cli("--db", str(db), "ingest", str(built[1]), env={"TRACEQL_MEMORY_LIMIT": "80%"})
    assert proc.returncode == 0, proc.stderr
    before = sha256(db)
    proc = cli("--db", str(db), "ingest", str(built[1]), env={"TRACEQL_MEMORY_LIMIT": "1KB"})
    assert proc.returncode == 5, proc.stderr
    assert one_line(proc).startswith("traceql: error: TRACEQL_MEMORY_LIMIT=1KB: too small for DuckDB to work in (")
    assert sha256(db) == before


def test_plot_name_with_dollars(ws, tmp_path):
    proc = cli("--db", str(ws), "sql", "--write", "UPDATE kernel SET name = '$\\undefinedcmd$ ' || name")
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "p.png"
    proc = cli("--db", str(ws), "plot", "--by", "kernel", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_terminal_of_zero_columns(monkeypatch):
    from traceql.outputs import tables

    class Tty:
        def isatty(self):
            return True

        def fileno(self):
            return 1

    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setattr(tables.os, "get_terminal_size", lambda fd: os.terminal_size((0, 24)))
    assert tables.terminal_width(Tty()) is None


@pytest.mark.parametrize("body, detail", [
    ("return 2**70, 1", "returned 1180591620717411303424: more than 2**63-1, the largest count stored"),
    ("return 1e300, 1", "returned 1e+300: more than 2**63-1, the largest count stored"),
    ("raise SystemExit(0)", "SystemExit: 0"),
], ids=["2**70", "1e300", "SystemExit"])
def test_flops_plugin_extremes(tmp_path, body, detail):
    """A plug-in that overflows a count or raises SystemExit: a warning, the ingest goes on (the
    built-in formula costs the op), never exit 0 with nothing ingested."""
    plugin = tmp_path / "bad.py"
    plugin.write_text(f"def mm(op, shapes, dtypes, direction):\n    {body}\n\nFLOPS = {{'aten::mm': mm}}\n")
    db = tmp_path / "w.duckdb"
    proc = cli("--db", str(db), "ingest", str(_kineto_mm(tmp_path / "mm.json", [[8, 8], [8, 8]])),
               "--flops", str(plugin))
    assert proc.returncode == 0, proc.stderr
    with traceql.open(db) as w:
        assert w.con.execute("SELECT flops FROM kernel_op").fetchall() == [(2 * 8**3,)]
        rows = w.con.execute("SELECT key, detail FROM ingest_stats WHERE key LIKE 'flops.plugin_failed.%'").fetchall()
    assert len(rows) == 1 and detail in rows[0][1], rows


# ----------------------------------------------------------------------- 9. signals, workers

def _children(pid: int) -> set[int]:
    out = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    out.add(int(entry.name))
            except (OSError, ValueError, IndexError):
                pass
    return out


def _alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.fixture(scope="module")
def two_exports(tmp_path_factory):
    folder = tmp_path_factory.mktemp("signals")
    files = [folder / f"r{i}.sqlite" for i in range(2)]
    for i, f in enumerate(files):
        generate(f, layout="3", kernels=20000, seed=i)
    return files


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
def test_workers_die_with_their_parent(tmp_path, two_exports):
    """kill -9 of an `ingest -j 2` parent (as the OOM killer does): its workers end within
    seconds (parent-death signal), and the next command of any kind removes the leftovers."""
    import signal
    import subprocess
    import sys
    import time

    db = tmp_path / "w.duckdb"
    proc = subprocess.Popen([sys.executable, "-m", "traceql", "--db", str(db), "ingest", "-j", "2",
                             *map(str, two_exports)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    deadline = time.monotonic() + 120
    workers: set[int] = set()
    while time.monotonic() < deadline and len(workers) < 2:
        workers = {c for c in _children(proc.pid)
                   if b"multiprocessing" in (Path("/proc") / str(c) / "cmdline").read_bytes()
                   and b"resource_tracker" not in (Path("/proc") / str(c) / "cmdline").read_bytes()}
        time.sleep(0.2)
    assert len(workers) == 2, "the workers did not start"
    time.sleep(1.0)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and any(_alive(w) for w in workers):
        time.sleep(0.2)
    assert not any(_alive(w) for w in workers), "a worker outlived its parent"
    assert proc.stdout.read() is not None  # the pipe closed: no worker holds it
    leftovers = list(tmp_path.glob(".w.duckdb.ingest-*"))
    assert leftovers, "nothing to clean up: the kill came too late to test it"
    out = cli("--db", str(db), "info")
    assert out.returncode == 5  # no workspace yet (the first ingest was killed)
    assert list(tmp_path.glob(".w.duckdb.ingest-*")) == []


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
def test_sigterm_like_ctrl_c(tmp_path, two_exports, sig):
    """SIGTERM or SIGHUP to a one-process ingest: exit 130 with the Ctrl-C message, the old
    workspace unchanged and no temporary file left."""
    import signal
    import subprocess
    import sys
    import time

    db = tmp_path / "w.duckdb"
    shutil.copy(nsys_ws(tmp_path), db)
    before = sha256(db)
    # both exports, 40,000 kernels: about 4 s of work after the temporary file appears on a quiet
    # machine (one export left too little once ingest got faster: it ended before the signal
    # when the other xdist worker held both cores)
    proc = subprocess.Popen([sys.executable, "-m", "traceql", "--db", str(db), "ingest", "-j", "1",
                             *map(str, two_exports)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(REPO)},
                            # as from a terminal: under nohup (a CI step may be) SIGHUP is inherited
                            # ignored, and traceql rightly keeps it ignored
                            preexec_fn=lambda: signal.signal(getattr(signal, sig), signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not list(tmp_path.glob(".w.duckdb.ingest-*.tmp")):
        time.sleep(0.02)
    time.sleep(0.1)  # inside the ingest's transaction
    assert proc.poll() is None, "the ingest ended before the signal: too little work to test it"
    proc.send_signal(getattr(signal, sig))
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] in ("traceql: interrupted; the workspace is unchanged", "traceql: interrupted")
    assert sha256(db) == before
    assert list(tmp_path.glob(".w.duckdb.ingest-*")) == []


# Run as `python -c`: traceql's command line, with a signal that arrives while DuckDB runs Python code
# of its own inside a statement. DuckDB's client tries `import pandas` for each Python value it
# converts (each parameter) and swallows whatever that import raises: the 200th try sends SIGTERM
# to the process and waits in Python, so traceql's handler raises KeyboardInterrupt right there.
_SIGNAL_IN_DUCKDB = """
import os, signal, sys
from traceql.cli import main

class SignalOnImport:
    tries = 0
    def find_spec(self, name, path=None, target=None):
        if name != "pandas":
            return None
        SignalOnImport.tries += 1
        if SignalOnImport.tries == 200:
            sys.stderr.write("test: SIGTERM sent inside DuckDB\\n")
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(100000):  # the handler runs here, inside DuckDB's import of pandas
                pass
        raise ModuleNotFoundError("No module named 'pandas'", name="pandas")

sys.meta_path.insert(0, SignalOnImport())
sys.argv[0] = "traceql"
main()
"""


def test_signal_that_duckdb_swallows_still_stops_the_ingest(tmp_path, built):
    """DuckDB's Python client swallows an exception raised by Python code it runs inside a
    statement, the KeyboardInterrupt of a signal that arrives then included. The signal is
    remembered: the ingest stops before it renames anything into place (exit 130, the workspace
    unchanged), where it went on and ended with exit 0 (seen in CI: test_sigterm_like_ctrl_c)."""
    import subprocess
    import sys

    db = tmp_path / "w.duckdb"
    shutil.copy(nsys_ws(tmp_path), db)
    before = sha256(db)
    proc = subprocess.run([sys.executable, "-c", _SIGNAL_IN_DUCKDB, "--db", str(db), "ingest", "-j", "1",
                           str(built[1])], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=300)
    assert "test: SIGTERM sent inside DuckDB" in proc.stderr, proc.stderr  # (the signal came where it should)
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] in ("traceql: interrupted; the workspace is unchanged", "traceql: interrupted")
    assert sha256(db) == before
    assert list(tmp_path.glob(".w.duckdb.ingest-*")) == []


# Run as `python -c`: traceql's command line, interrupted (the command raises KeyboardInterrupt),
# with a SIGTERM that arrives while the interrupt is being reported: as when one signal both stops
# DuckDB's statement (the watching thread) and runs the Python handler late.
_SIGNAL_WHILE_REPORTING = """
import os, signal, sys, click
import traceql.cli.group as group
from traceql.cli import run

def interrupted(*args, **kwargs):
    raise KeyboardInterrupt
group.cli.main = interrupted
echo = click.echo
def late_signal(message=None, **kwargs):
    if message is not None and "interrupted" in str(message):
        os.kill(os.getpid(), signal.SIGTERM)
    echo(message, **kwargs)
click.echo = late_signal
sys.argv = ["traceql", "sql", "SELECT 1"]
run()
"""


def test_signal_while_reporting_an_interrupt_exits_130():
    """A signal handled while traceql reports an interrupt is the same interrupt: exit 130 with
    the message once, not killed by SIGINT (exit -2) by a KeyboardInterrupt that escaped (seen once
    in test_sigterm_like_ctrl_c[SIGHUP]: 'traceql: interrupted' printed, return code -2)."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", _SIGNAL_WHILE_REPORTING], cwd=REPO, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr.splitlines() == ["traceql: interrupted; the workspace is unchanged"], proc.stderr


def nsys_ws(tmp_path: Path) -> Path:
    db = tmp_path / "small.duckdb"
    traceql.ingest([nsys_stub(tmp_path / "small.sqlite")], db=db)
    return db
