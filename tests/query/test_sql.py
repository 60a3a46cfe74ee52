"""Ad-hoc SQL (issue 7): `traceql sql` checks, --write, --param, stdin and -f, --dialect,
the query library commands, user query folders and the Python API."""

import sqlite3
from decimal import Decimal

import duckdb
import pyarrow as pa
import pytest

import traceql
from fixtures import gen_nsys
from traceql.core.errors import UsageError
from traceql.core.names import closest
from traceql.query.sqlcheck import parse_params

from ..util import cli as run, nsys_stub


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    path = tmp_path_factory.mktemp("sql") / "fixture.sqlite"
    gen_nsys.generate(path, layout="3", kernels=40, seed=0)
    return path


@pytest.fixture(scope="module")
def ws_path(source):
    db = source.with_name("ws.duckdb")
    traceql.ingest([source], db=db)
    return db


@pytest.fixture
def scratch(ws_path, tmp_path):
    """A copy of the workspace that a test may change."""
    db = tmp_path / "scratch.duckdb"
    db.write_bytes(ws_path.read_bytes())
    return db


def sql(db, *args, input=None, env=None):
    """`traceql --db DB sql ARGS`, with INPUT on its stdin if given (tests.util.cli)."""
    return run("--db", db, "sql", *args, env=env, input=input)


def error_of(proc) -> str:
    assert proc.returncode != 0, proc.stdout
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


# ------------------------------------------------------------------ error paths, exact messages

@pytest.mark.parametrize("query, message", [
    ("SELECT duration FROM kernel",
     "SQL: no column kernel.duration; did you mean kernel.dur?"),
    ("SELECT k.nmae, k.dur FROM kernel k",
     "SQL: no column k.nmae; did you mean k.name?"),
    ("SELECT correlationId FROM kernel",
     "SQL: no column kernel.correlationId; did you mean kernel.correlation_id?"),
    ("SELECT k.name FROM kernel k JOIN api_call a ON a.correlation_id = k.correlation_id WHERE strm = 7",
     "SQL: no column strm in k, a; did you mean k.stream_id?"),
    ("WITH t AS (SELECT name, sum(dur) AS total FROM kernel GROUP BY name) SELECT name, totl FROM t",
     "SQL: no column t.totl; did you mean t.total?"),
    ("SELECT name FROM kernel k WHERE EXISTS (SELECT 1 FROM launch l WHERE l.op_idd = k.kernel_id)",
     "SQL: no column l.op_idd; did you mean l.op_id?"),
    ("SELECT * FROM kernels",
     "SQL: no view kernels; did you mean kernel?"),
    ("SELECT count(*) FROM nvtx_ranges r JOIN kernel k USING (trace_id)",
     "SQL: no view nvtx_ranges; did you mean nvtx_range?"),
    ("SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL",
     "SQL: no view CUPTI_ACTIVITY_KIND_KERNEL; did you mean kernel? (traceql's view of that profiler table; "
     "see traceql schema kernel)"),
    ("SELECT * FROM zzz",
     "SQL: no view zzz; views: trace, device, thread, api_call, kernel, memcpy, memset, graph_exec, graph_event, "
                                   "sync_event, osrt_call, profiler_overhead, gpu_metric, memory_event, nvtx_range, nvtx_mark, "),
    ("DROP TABLE kernel",
     "SQL: DROP TABLE is not a query: it can change the workspace or write files; add --write to run it"),
    ("SELECT 1 FROM kernel WHERE ts > AND",
     'SQL: syntax error at or near "AND" (line 1, column 33): incomplete expression'),
    ("SELECT name,\n       count(*\nFROM kernel\nGROUP BY name",
     'SQL: syntax error at or near "FROM" (line 3, column 1): expecting )'),
    ("SELECT 'unterminated FROM kernel",
     'SQL: Parser Error: unterminated quoted string at or near "\'unterminated FROM kernel" (line 1, column 8)'),
    ("SELECT name FROM kernel WHERE dur > $min",
     "SQL: no value for $min; give --param min=VALUE"),
    ("   ", "SQL: empty query"),
])
def test_error_messages(ws_path, query, message):
    proc = sql(ws_path, query)
    assert proc.returncode == 2, proc.stderr
    line = error_of(proc)
    assert line.startswith(f"traceql: error: {message}"), line
    if not message.endswith(", "):
        assert line == f"traceql: error: {message}"


@pytest.mark.parametrize("query, keyword", [
    ("DROP TABLE kernel", "DROP TABLE"),
    ("DROP VIEW gpu_op", "DROP VIEW"),
    ("CREATE TABLE notes AS SELECT 1", "CREATE TABLE"),
    ("CREATE VIEW v AS SELECT 1", "CREATE VIEW"),
    ("INSERT INTO kernel SELECT * FROM kernel", "INSERT"),
    ("UPDATE kernel SET dur = 0", "UPDATE"),
    ("DELETE FROM kernel", "DELETE"),
    ("ALTER TABLE kernel ADD COLUMN x INTEGER", "ALTER"),
    ("TRUNCATE kernel", "TRUNCATE"),
    ("ATTACH 'other.duckdb' AS other", "ATTACH"),
    ("DETACH other", "DETACH"),
    ("COPY kernel TO 'kernel.csv'", "COPY"),
    ("COPY (SELECT 1) TO 'one.csv'", "COPY"),
    ("EXPORT DATABASE 'dump'", "EXPORT"),
    ("PRAGMA enable_profiling", "PRAGMA"),
    ("SET threads = 1", "SET"),
    ("RESET threads", "RESET"),
    ("CALL pragma_version()", "CALL"),
    ("CHECKPOINT", "CHECKPOINT"),
    ("SELECT 1; DROP TABLE kernel", "DROP TABLE"),
    ("WITH x AS (SELECT 1 AS a) INSERT INTO kernel SELECT * FROM kernel", "INSERT"),
])
def test_statements_that_write_are_refused_without_write(ws_path, query, keyword):
    before = ws_path.read_bytes()
    proc = sql(ws_path, query)
    assert proc.returncode == 2, proc.stderr
    assert error_of(proc) == (f"traceql: error: SQL: {keyword} is not a query: it can change the workspace "
                              f"or write files; add --write to run it")
    assert ws_path.read_bytes() == before


@pytest.mark.parametrize("query, keyword", [
    ("INSTALL httpfs", "INSTALL"),
    ("force install httpfs FROM 'http://example.com'", "FORCE INSTALL"),
    ("LOAD httpfs", "LOAD"),
    ("UPDATE EXTENSIONS", "UPDATE EXTENSIONS"),
    ("SET custom_extension_repository = 'http://example.com'", "SET of an extension setting"),
    ('SET GLOBAL "autoinstall_known_extensions" = true', "SET of an extension setting"),
    ("RESET autoload_known_extensions", "RESET of an extension setting"),
    ("PRAGMA extension_directory = '/tmp'", "PRAGMA of an extension setting"),
    ("SELECT 1; LOAD httpfs", "LOAD"),
])
def test_extensions_are_refused_even_with_write_and_files(ws_path, query, keyword):
    """traceql never reaches the network: with --write --allow-files, INSTALL used to download
    httpfs from extensions.duckdb.org. Refused before anything runs, with or without write."""
    before = ws_path.read_bytes()
    message = (f"SQL: {keyword} is refused: traceql works offline, with the extensions of its own package "
               "(none is installed, loaded or configured, even with --write)")
    for options in ({}, {"write": True, "allow_files": True}):
        with traceql.open(ws_path, **options) as ws:
            with pytest.raises(UsageError) as err:
                ws.sql(query)
        assert str(err.value) == message
        if not options:  # (a connection that may write can checkpoint as it closes)
            assert ws_path.read_bytes() == before


def test_install_with_write_and_files_exits_2(ws_path):
    before = ws_path.read_bytes()
    proc = sql(ws_path, "--write", "--allow-files", "INSTALL httpfs")
    assert proc.returncode == 2
    assert error_of(proc) == ("traceql: error: SQL: INSTALL is refused: traceql works offline, with the extensions "
                              "of its own package (none is installed, loaded or configured, even with --write)")
    assert ws_path.read_bytes() == before


def test_duckdb_classifies_what_sqlglot_cannot_read(ws_path):
    """sqlglot cannot parse EXPORT DATABASE; DuckDB's own parser still refuses it."""
    with traceql.open(ws_path) as ws:
        with pytest.raises(UsageError, match=r"^SQL: EXPORT is not a query"):
            ws.sql("EXPORT DATABASE 'dump' (FORMAT parquet)")


def test_read_only_statements_run(ws_path):
    with traceql.open(ws_path) as ws:
        assert ws.sql("DESCRIBE kernel").num_rows == 26
        assert ws.sql("SUMMARIZE SELECT dur FROM kernel").num_rows == 1
        assert ws.sql("SHOW TABLES").num_rows > 10
        assert ws.sql("EXPLAIN SELECT count(*) FROM kernel").num_rows >= 1
        assert ws.sql("FROM kernel SELECT count(*) AS n").to_pylist() == [{"n": 40}]
        assert ws.sql("SELECT name AS n FROM kernel WHERE n LIKE '%gemm%' ORDER BY n LIMIT 1").num_rows == 1
        assert ws.sql("SELECT * FROM range(3) r(i)").column("i").to_pylist() == [0, 1, 2]
        assert ws.sql("SELECT s.a FROM (SELECT {'a': 1} AS s)").to_pylist() == [{"a": 1}]
        # the same names in any case, as DuckDB resolves them
        assert ws.sql("SELECT NAME FROM KERNEL LIMIT 1").num_rows == 1


# ------------------------------------------------------------------ --write

def test_write_creates_a_table_in_the_workspace(scratch):
    proc = sql(scratch, "--write", "CREATE TABLE notes AS SELECT 1 AS x, 'first' AS note")
    assert proc.returncode == 0, proc.stderr
    # read back without --write, by traceql and by DuckDB itself
    proc = sql(scratch, "--format", "csv", "SELECT x, note FROM notes")
    assert proc.stdout == "x,note\n1,first\n"
    con = duckdb.connect(str(scratch), read_only=True)
    assert con.execute("SELECT * FROM notes").fetchall() == [(1, "first")]
    con.close()
    # names of the new table are checked like the contract's
    assert error_of(sql(scratch, "SELECT nte FROM notes")) == \
        "traceql: error: SQL: no column notes.nte; did you mean notes.note?"
    # several statements: each checked, the last one's result printed
    proc = sql(scratch, "--write", "--format", "csv",
               "INSERT INTO notes VALUES (2, 'second'); SELECT count(*) AS n FROM notes")
    assert proc.stdout == "n\n2\n", proc.stderr
    assert sql(scratch, "--write", "DROP TABLE notes").returncode == 0
    assert error_of(sql(scratch, "SELECT * FROM notes")).startswith("traceql: error: SQL: no view notes; ")


def test_write_is_explained_in_the_help():
    out = run("sql", "--help").stdout
    assert "--write" in out and "changes are saved in it" in " ".join(out.split())


# ------------------------------------------------------------------ parameters

def test_params_are_bound_and_typed(ws_path):
    proc = sql(ws_path, "--format", "csv", "--param", "min=100000", "--param", "n=2",
               "SELECT name, dur FROM kernel WHERE dur > $min ORDER BY dur DESC, kernel_id LIMIT $n")
    assert proc.returncode == 0, proc.stderr
    rows = proc.stdout.splitlines()
    assert rows[0] == "name,dur" and len(rows) == 3
    assert all(int(r.rsplit(",", 1)[1]) > 100000 for r in rows[1:])
    proc = sql(ws_path, "--format", "csv", "--param", "i=7", "--param", "f=2.5", "--param", "s=7x",
               "--param", "e=", "SELECT typeof($i) AS i, typeof($f) AS f, typeof($s) AS s, $e AS e")
    assert proc.stdout.splitlines()[1] == "INTEGER,DOUBLE,VARCHAR,", proc.stderr


def test_a_param_value_is_never_sql(ws_path):
    proc = sql(ws_path, "--format", "csv", "--param", "name=x' OR '1'='1",
               "SELECT count(*) AS n FROM kernel WHERE name = $name")
    assert proc.stdout == "n\n0\n", proc.stderr


@pytest.mark.parametrize("args, message", [
    (["--param", "n=1", "SELECT 1"], "--param n: the query has no $n"),
    (["--param", "a=1", "--param", "b=2", "SELECT $a AS a"], "--param b: the query has no $b (its parameters: $a)"),
    (["--param", "novalue", "SELECT 1"], "--param novalue: expected NAME=VALUE, e.g. --param trace_id=1"),
    (["--param", "a=1", "--param", "a=2", "SELECT $a"], "--param a: given twice"),
    (["--param", "a=1", "SELECT ?"], "SQL: positional placeholders (? or $1) take no --param values; "
                                     "name them instead: $name"),
])
def test_param_errors(ws_path, args, message):
    proc = sql(ws_path, *args)
    assert proc.returncode == 2
    assert error_of(proc) == f"traceql: error: {message}"


def test_parse_params_types():
    assert parse_params(["a=1", "b=-2", "c=2.5", "d=1e3", "e=x", "f=1_000", "g=nan", "h= 3", "i=a=b"]) == {
        "a": 1, "b": -2, "c": 2.5, "d": 1000.0, "e": "x", "f": "1_000", "g": "nan", "h": " 3", "i": "a=b"}


# ------------------------------------------------------------------ where the SQL comes from

def test_sql_from_file_and_stdin(ws_path, tmp_path):
    query = "SELECT count(*) AS n\nFROM kernel\nWHERE dur > $min\n"
    f = tmp_path / "q.sql"
    f.write_text(query)
    expected = sql(ws_path, "--format", "csv", "--param", "min=0", query).stdout
    assert expected == "n\n40\n"
    assert sql(ws_path, "--format", "csv", "--param", "min=0", "-f", str(f)).stdout == expected
    assert sql(ws_path, "--format", "csv", "--param", "min=0", "-f", "-", input=query).stdout == expected
    assert sql(ws_path, "--format", "csv", "--param", "min=0", "-", input=query).stdout == expected
    assert sql(ws_path, "--format", "csv", "--param", "min=0", input=query).stdout == expected
    # errors in a file point into the file
    f.write_text("SELECT name\nFROM kernel\nWHERE durr > 0\n")
    assert error_of(sql(ws_path, "-f", str(f))) == \
        "traceql: error: SQL: no column kernel.durr; did you mean kernel.dur?"
    both = sql(ws_path, "-f", str(f), "SELECT 1")
    assert (both.returncode, error_of(both)) == (2, "traceql: error: give the SQL as an argument or with -f FILE, "
                                                    "not both")
    missing = sql(ws_path, "-f", str(tmp_path / "none.sql"))
    assert (missing.returncode, error_of(missing)) == (3, f"traceql: error: {tmp_path / 'none.sql'}: no such file")


def test_output_file_and_parquet(ws_path, tmp_path):
    out = tmp_path / "k.parquet"
    proc = sql(ws_path, "--format", "parquet", "-o", str(out), "SELECT kernel_id, dur FROM kernel ORDER BY 1")
    assert proc.returncode == 0, proc.stderr
    import pyarrow.parquet as pq

    assert pq.read_table(out).num_rows == 40


# ------------------------------------------------------------------ dialects

SQLITE_QUERY = """
SELECT name,
       count(*) AS n,
       sum(dur) / count(*) AS avg_int,
       sum(dur) / 1000 AS total_us,
       7 / 2 AS seven_halves,
       -7 / 2 AS minus_seven_halves,
       sum(dur) * 1.0 / count(*) AS avg_real,
       CAST(avg(dur) AS INTEGER) AS avg_cast,
       max(dur) / 0 AS by_zero,
       ifnull(min(short_name), 'none') || ' #' || count(*) || ' on ' || min(stream_id) AS label,
       strftime('%Y-%m-%d %H:%M:%f', (min(ts) + 1700000000000000000) / 1000000 / 1000.0, 'unixepoch') AS first,
       strftime('%s', (min(ts) + 1700000000000000000) / 1000000000, 'unixepoch') AS first_s,
       date((max(ts) + 1700000000000000000) / 1000000000, 'unixepoch', '+1 day', 'start of month') AS month,
       time((max(ts) + 1700000000000000000) / 1000000000, 'unixepoch', '-90 minutes') AS time_shifted,
       julianday('2024-01-01 12:00:00') AS jd,
       sum(dur > 100000) AS long_ones,
       total(grid_x) AS grid_total,
       name LIKE '%GEMM%' AS is_gemm
FROM kernel
WHERE name LIKE '%KERNEL%' OR ifnull(short_name, '') = ''
GROUP BY name
ORDER BY n DESC, name
"""


def _kernel_rows(ws_path):
    with traceql.open(ws_path) as ws:
        return ws.sql("SELECT kernel_id, name, short_name, stream_id, ts, dur, grid_x FROM kernel ORDER BY 1")


def _as_sqlite(table: pa.Table) -> sqlite3.Connection:
    lite = sqlite3.connect(":memory:")
    lite.execute("CREATE TABLE kernel (kernel_id INTEGER, name TEXT, short_name TEXT, stream_id INTEGER, "
                 "ts INTEGER, dur INTEGER, grid_x INTEGER)")
    lite.executemany("INSERT INTO kernel VALUES (?, ?, ?, ?, ?, ?, ?)",
                     [tuple(r.values()) for r in table.to_pylist()])
    return lite


def _normal(value):
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, bool):
        return int(value)
    return value


def test_sqlite_dialect_gives_sqlite_answers(ws_path):
    """strftime, date, time, julianday, ifnull, integer division, ||, LIKE, CAST, total and
    comparisons as values: the same answer through --dialect sqlite as SQLite gives over the
    same rows."""
    lite = _as_sqlite(_kernel_rows(ws_path))
    cur = lite.execute(SQLITE_QUERY)
    columns = [d[0] for d in cur.description]
    expected = [dict(zip(columns, row)) for row in cur.fetchall()]
    assert len(expected) >= 5
    assert expected[0]["seven_halves"] == 3 and expected[0]["minus_seven_halves"] == -3
    assert expected[0]["by_zero"] is None

    with traceql.open(ws_path) as ws:
        got = ws.sql(SQLITE_QUERY, dialect="sqlite")
    assert got.column_names == columns
    got_rows = [{k: _normal(v) for k, v in r.items()} for r in got.to_pylist()]
    assert got_rows == expected

    # and through the command line
    import json

    proc = sql(ws_path, "--dialect", "sqlite", "--format", "json", SQLITE_QUERY)
    assert proc.returncode == 0, proc.stderr
    cli_rows = json.loads(proc.stdout)
    assert [r["label"] for r in cli_rows] == [r["label"] for r in expected]
    assert [r["first"] for r in cli_rows] == [r["first"] for r in expected]


def test_sqlite_dialect_without_the_fixes_would_differ(ws_path):
    """The fixes matter: DuckDB's own reading of the same text gives other answers."""
    with traceql.open(ws_path) as ws:
        assert ws.sql("SELECT 7 / 2 AS x", dialect="sqlite").to_pylist() == [{"x": 3}]
        assert ws.sql("SELECT 7 / 2 AS x").to_pylist() == [{"x": 3.5}]
        assert ws.sql("SELECT count(*) AS n FROM kernel WHERE name LIKE '%GEMM%'",
                      dialect="sqlite").to_pylist()[0]["n"] > 0
        assert ws.sql("SELECT count(*) AS n FROM kernel WHERE name LIKE '%GEMM%'").to_pylist() == [{"n": 0}]


def test_other_dialects(ws_path):
    with traceql.open(ws_path) as ws:
        assert ws.sql("SELECT 7 / 2 AS x, 'a' || 'b' AS s", dialect="postgres").to_pylist() == [{"x": 3, "s": "ab"}]
        assert ws.sql("SELECT 7 / 2 AS x, IFNULL(NULL, 1) AS y", dialect="mysql").to_pylist() == [{"x": 3.5, "y": 1}]
        assert ws.sql("SELECT count(*) AS n FROM kernel WHERE name RLIKE 'gemm'",
                      dialect="spark").to_pylist()[0]["n"] > 0
        # names are checked whatever the dialect
        with pytest.raises(UsageError, match=r"^SQL: no column kernel.duration; did you mean kernel.dur\?$"):
            ws.sql("SELECT duration FROM kernel", dialect="sqlite")


@pytest.mark.parametrize("args, message", [
    (["--dialect", "nosuch", "SELECT 1"], "--dialect nosuch: unknown SQL dialect; dialects: athena, "),
    (["--dialect", "sqlite", "SELECT strftime('%J', 'now')"],
     "--dialect sqlite: strftime(): the format code %J is not supported; supported: %Y %m %d %H %M %S %f %s"),
    (["--dialect", "sqlite", "SELECT date('now', 'localtime')"],
     "--dialect sqlite: date(): the modifier 'localtime' is not supported; supported: 'unixepoch', "),
    (["--dialect", "sqlite", "SELECT strftime(name, ts) FROM kernel"],
     "--dialect sqlite: strftime(): the format must be a string literal"),
])
def test_dialect_errors(ws_path, args, message):
    proc = sql(ws_path, *args)
    assert proc.returncode == 2
    assert error_of(proc).startswith(f"traceql: error: {message}")


# ------------------------------------------------------------------ the query library

def test_queries_lists_the_library(ws_path):
    proc = run("queries")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.splitlines()
    from traceql.query import library

    for q in library.library().values():
        assert f"{q.name}: {q.description}" in out
        for p, doc in q.params.items():
            assert f"  --param {p}: {doc}" in out
    assert out[-1].startswith(f"{len(library.library())} queries; ")
    # the internal tier (queries/_internal/) is not listed: it is what commands run for themselves
    assert library.internal() and not any(line.startswith(("_internal/", "traces: ", "timeline: ")) for line in out)
    one = run("queries", "jobs").stdout
    assert one.startswith("jobs: ") and "WITH t AS (" in one
    assert error_of(run("queries", "nope")).startswith("traceql: error: no query 'nope'; queries: api, ")


def test_query_runs_a_library_query(ws_path):
    proc = run("--db", str(ws_path), "query", "range", "--param", "group_by=path", "--param", "max_depth=2",
               "--format", "csv")
    assert proc.returncode == 0, proc.stderr
    import csv
    import io

    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    with traceql.open(ws_path) as ws:
        report = ws.report("range", group_by="path", max_depth=2).to_pylist()
    assert [r["name"] for r in rows] == [r["name"] for r in report]
    assert [int(r["gpu_kernel_ns"]) for r in rows] == [r["gpu_kernel_ns"] for r in report]
    assert all(r["name"].count(" > ") <= 1 for r in rows)

    bad = run("--db", str(ws_path), "query", "range", "--param", "nope=1")
    assert error_of(bad) == ("traceql: error: query range has no parameter 'nope'; parameters: trace_id, "
                             "per_trace, group_by, max_depth, match, domain, filtered, skip_first, spread")
    assert error_of(run("--db", str(ws_path), "query", "nope")).startswith("traceql: error: no query 'nope'")


SLOW = """-- slow_kernels: kernels slower than a threshold, longest first.
-- param min_ns: the threshold in ns
SELECT name, dur
FROM kernel
WHERE dur > $min_ns
ORDER BY dur DESC, name
"""


def test_user_query_folder(ws_path, tmp_path):
    folder = tmp_path / "myq"
    folder.mkdir()
    (folder / "slow_kernels.sql").write_text(SLOW)

    listing = run("--queries", str(folder), "queries").stdout.splitlines()
    assert f"slow_kernels: kernels slower than a threshold, longest first. [{folder / 'slow_kernels.sql'}]" \
        in listing
    assert "  --param min_ns: the threshold in ns" in listing

    for args, env in (((("--queries", str(folder)), ()), None), (((), ("--queries", str(folder))), None),
                      (((), ()), {"TRACEQL_QUERIES": str(folder)})):
        before, after = args
        proc = run("--db", str(ws_path), *before, "query", "slow_kernels", *after, "--param", "min_ns=150000",
                   "--format", "csv", env=env)
        assert proc.returncode == 0, proc.stderr
        durs = [int(line.rsplit(",", 1)[1]) for line in proc.stdout.splitlines()[1:]]
        assert durs and all(d > 150000 for d in durs) and durs == sorted(durs, reverse=True)

    with traceql.open(ws_path, queries=[folder]) as ws:
        assert "slow_kernels" in ws.queries()
        assert ws.query("slow_kernels", min_ns=150000).column_names == ["name", "dur"]


@pytest.mark.parametrize("name, text, message", [
    ("kernel.sql", "-- kernel: my kernels\nSELECT 1 ORDER BY 1\n",
     "{path}: a query named 'kernel' exists already (the built-in query kernel); rename the file: "
     "a user query cannot replace another query"),
    ("mine.sql", "SELECT 1\n", "{path}: must start with '-- mine: <description>'"),
    ("undeclared.sql", "-- undeclared: x\nSELECT $n AS n ORDER BY 1\n",
     "{path}: $n is not declared; add '-- param n: <description>'"),
    ("unused.sql", "-- unused: x\n-- param n: a number\nSELECT 1 AS one ORDER BY 1\n",
     "{path}: parameter 'n' is declared but the SQL has no $n"),
    ("drops.sql", "-- drops: x\nDROP TABLE kernel\n",
     "SQL: DROP TABLE is not a query: it can change the workspace or write files; add --write to run it"),
    ("typo.sql", "-- typo: x\nSELECT duration FROM kernel ORDER BY 1\n",
     "SQL: no column kernel.duration; did you mean kernel.dur?"),
])
def test_user_query_errors(ws_path, tmp_path, name, text, message):
    folder = tmp_path / "q"
    folder.mkdir()
    path = folder / name
    path.write_text(text)
    proc = run("--db", str(ws_path), "--queries", str(folder), "query", name[:-4])
    assert proc.returncode == 2
    assert error_of(proc) == "traceql: error: " + message.format(path=path)


def test_user_query_folder_must_exist(tmp_path):
    proc = run("--queries", str(tmp_path / "none"), "queries")
    assert error_of(proc) == (f"traceql: error: {tmp_path / 'none'}: no such folder of queries "
                              "(--queries, $TRACEQL_QUERIES)")


# ------------------------------------------------------------------ Python API

def test_python_api_returns_arrow(ws_path, tmp_path):
    with traceql.open(ws_path) as ws:
        top = ws.sql("SELECT name, sum(dur) AS total_ns FROM kernel GROUP BY 1 ORDER BY 2 DESC LIMIT $n", {"n": 3})
        assert isinstance(top, pa.Table) and top.num_rows == 3
        assert isinstance(ws.query("kernel", trace_id=1), pa.Table)
        assert isinstance(ws.report(by="kernel", limit=2), pa.Table)
        assert ws.sql("SELECT count(*) AS n FROM kernel WHERE dur > ?", [0]).to_pylist() == [{"n": 40}]
        with pytest.raises(UsageError, match="is not a query"):
            ws.sql("CREATE TABLE notes AS SELECT 1")
    db = tmp_path / "w.duckdb"
    db.write_bytes(ws_path.read_bytes())
    with traceql.open(db, write=True) as ws:
        ws.sql("CREATE TABLE notes AS SELECT 1 AS x")
        assert ws.sql("SELECT x FROM notes").to_pylist() == [{"x": 1}]


def test_to_pandas_when_pandas_is_installed(ws_path):
    pd = pytest.importorskip("pandas", reason="pandas is optional: pip install pandas")
    with traceql.open(ws_path) as ws:
        df = ws.sql("SELECT name, dur FROM kernel ORDER BY kernel_id").to_pandas()
        assert isinstance(df, pd.DataFrame) and len(df) == 40
        assert isinstance(ws.report(by="kernel").to_pandas(), pd.DataFrame)


# ------------------------------------------------------------------ suggestions

@pytest.mark.parametrize("name, candidates, best", [
    ("duration", ["ts", "dur", "name"], "dur"),
    ("start", ["ts", "dur"], "ts"),
    ("streamId", ["stream_id", "device_id"], "stream_id"),
    ("kernels", ["kernel", "memcpy"], "kernel"),
    ("api", ["api_call", "kernel"], "api_call"),
    ("xyz", ["kernel", "memcpy"], None),
])
def test_closest(name, candidates, best):
    assert closest(name, candidates) == best


def test_limit_beyond_a_64_bit_row_count_is_a_usage_error(tmp_path):
    # the API's limit= is checked before Arrow's slice sees it (the MCP fuzz found an
    # OverflowError behind 2**63); the CLI refuses it as an option error (exit 2)
    from traceql.core.units import MAX_LIMIT

    db = tmp_path / "ws.duckdb"
    assert run("--db", db, "ingest", nsys_stub(tmp_path / "k.sqlite")).returncode == 0
    with traceql.open(db) as ws:
        assert ws.report("kernel", limit=MAX_LIMIT).num_rows == 1
        for bad in (MAX_LIMIT + 1, -1, True):
            with pytest.raises(UsageError, match=r"limit .*: a number of rows from 0 to 9223372036854775807"):
                ws.report("kernel", limit=bad)
    proc = run("--db", db, "report", "--by", "kernel", "--limit", str(MAX_LIMIT + 1))
    assert proc.returncode == 2 and "9223372036854775807" in proc.stderr and "Traceback" not in proc.stderr
