"""The query library on Apache Spark (traceql.spark) gives the rows DuckDB gives, exactly.

One workspace holds two generated PyTorch-shaped traces (fixtures/gen_torch.py, with op ranges,
layers and their exact facts) and, when ../shared/traces is present, cs336-jsun and the six
ranks of the NCCL set. It is exported as Parquet partitioned by trace and read back on one
Spark session in local mode, shared by the whole module (starting the JVM costs seconds). Every
report of the issue and the summary are compared with DuckDB's, per trace and over all traces:
same columns, same Arrow types, same rows in the same order. The generated traces' kernel
totals are checked against the generator's own bookkeeping as well, and the command line end
to end. Without pyspark or Java the module is skipped, with the reason.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pyarrow.compute as pc
import pytest

import traceql
from traceql.engines import spark as spark_engine
from traceql.cli import main

from ..util import TRACES

REASON = spark_engine.available()
if REASON is not None:
    pytest.skip(f"--engine spark cannot run here: {REASON}", allow_module_level=True)

REAL = ["cs336-jsun-train-fwdbwd-rtx3070ti-nsys2025.1/result.sqlite"] + [
    f"nccl-ring-2nodes-3gpus-nsys2024.5/example_2_nsys_report_ault4{h}.cscs.ch_{pid}.sqlite"
    for h, pid in (("3", 700355), ("3", 700359), ("3", 700360), ("4", 869579), ("4", 869582), ("4", 869585))]
GENERATED = {1: 900, 2: 700}  # gen_torch seed -> kernels


# For these tests only, Spark evaluates expressions interpreted instead of compiling Java for
# them: Janino compiles the code Spark generates for each new query shape (whole stages, and
# projections, predicates, orderings), and on traces this small the compiling is most of what a
# query costs the JVM (test_analyze_equal_duckdb 55 -> 25 JVM CPU s). spark.sql.codegen.factoryMode
# is Spark's own switch for its tests; both paths give the same rows. traceql's sessions keep
# Spark's code generation (it pays on a big export), and test_cli_end_to_end runs with it, so the
# rows of that path are compared with DuckDB's too.
INTERPRETED = {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}
CODEGEN = {"spark.sql.codegen.wholeStage": "true", "spark.sql.codegen.factoryMode": "FALLBACK"}  # Spark's defaults


@pytest.fixture(scope="module")
def session():
    """local[2], as CI has 2 cores, with the settings traceql gives a local session (and
    INTERPRETED)."""
    spark, _ = spark_engine.make_session("local[2]", {"spark.sql.shuffle.partitions": "2"})
    options = spark.sparkContext.getConf().get("spark.driver.extraJavaOptions")
    assert options.endswith(f"log4j2-traceql.properties {spark_engine.LOCAL_JVM_OPTIONS}")
    assert spark.sparkContext.getConf().get("spark.driver.memory") == spark_engine.LOCAL_DRIVER_MEMORY
    assert spark.conf.get("spark.sql.adaptive.enabled") == "false"  # LOCAL_ADAPTIVE
    assert {key: spark.conf.get(key) for key in CODEGEN} == CODEGEN  # what traceql's sessions run with
    for key, value in INTERPRETED.items():
        spark.conf.set(key, value)
    yield spark
    spark.stop()


@pytest.fixture
def codegen(session):
    """The session with Spark's code generation, as traceql's own sessions run, for one test."""
    for key, value in CODEGEN.items():
        session.conf.set(key, value)
    yield session
    for key, value in INTERPRETED.items():
        session.conf.set(key, value)


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    """(workspace path, export path, {trace_id: source}, {trace_id: generator facts})."""
    from fixtures.gen_torch import generate

    tmp = tmp_path_factory.mktemp("spark")
    paths, facts = [], {}
    for seed, kernels in GENERATED.items():
        path = tmp / f"torch{seed}.sqlite"
        facts[str(path)] = generate(path, kernels=kernels, seed=seed)
        paths.append(path)
    real = [TRACES / r for r in REAL if (TRACES / r).exists()]
    db = tmp / "ws.duckdb"
    results = traceql.ingest(paths + real, db=db)
    sources = {r.trace_id: str(r.path) for r in results}
    with traceql.open(db) as ws:
        ws.export(tmp / "export", partition_by="trace")
    return db, tmp / "export", sources, {t: facts[s] for t, s in sources.items() if s in facts}


@pytest.fixture(scope="module")
def both(job, session):
    db, export, _, _ = job
    with traceql.open(db) as duck, traceql.open(export, engine="spark", spark_session=session) as spark:
        yield duck, spark


@pytest.fixture(scope="module")
def spark_reports(both):
    """Spark's per-trace report BY, computed once for the module: a Spark query costs 3-15 JVM CPU
    s however small the traces, and test_generated_kernels_match_the_generator reads the kernel
    report that test_reports_equal_duckdb compares with DuckDB's."""
    _, spark = both
    done = {}

    def report(by):
        if by not in done:
            done[by] = spark.report(by, per_trace=True)
        return done[by]
    return report


@pytest.mark.parametrize("by", ["kernel", "api", "memcpy", "range", "op"])
def test_reports_equal_duckdb(both, job, spark_reports, by):
    duck, _ = both
    expected = duck.report(by, per_trace=True)  # all traces together: test_summary_equal_duckdb
    got = spark_reports(by)
    assert got.schema == expected.schema
    assert got.to_pylist() == expected.to_pylist()
    assert got.num_rows > 0
    if by in ("kernel", "api", "range"):  # rows of every trace
        assert set(got.column("trace_id").to_pylist()) == set(job[2])


def test_range_filter_equal_duckdb(both):
    """--range and --range-match (schemas/filters/: ASOF joins, written as equi-joins for Spark)."""
    duck, spark = both
    names = [r["name"] for r in duck.report("range", per_trace=True).to_pylist()][:2]
    assert len(names) == 2
    cases = [("kernel", dict(range_match=["forward", "backward", "step"])), ("gpu", dict(range=names))]
    for by, case in cases:
        expected = duck.report(by, per_trace=True, **case)
        got = spark.report(by, per_trace=True, **case)
        assert got.schema == expected.schema, (by, case)
        assert got.to_pylist() == expected.to_pylist(), (by, case)
        assert expected.num_rows > 0, (by, case)


# Rules whose queries have dozens of stages on Spark (several ASOF joins, each a window over both
# sides and two more joins) cost it 11-17 JVM CPU s each even on small traces (cs336-jsun, two
# NCCL ranks, a generated trace; iterations 8 since shared CTEs are computed once, 68 before):
# with TRACEQL_SPARK_FULL=1 only, so that the suite stays fast.
HEAVY_RULES = ("exposed_comm", "exposed_memcpy", "gpu_gaps", "low_utilization", "sync_calls")
FULL = os.environ.get("TRACEQL_SPARK_FULL") == "1"


def test_analyze_equal_duckdb(both):
    """Every analyze rule (the heavy ones with TRACEQL_SPARK_FULL=1): the findings and each rule's
    evidence rows."""
    from traceql.analysis.analyze import rules

    duck, spark = both
    names = [n for n in rules() if FULL or n not in HEAVY_RULES]
    expected, got = duck.analyze(names), spark.analyze(names)
    assert got.findings.to_pylist() == expected.findings.to_pylist()
    assert sorted(got.evidence) == sorted(expected.evidence) == sorted(names)
    for name, table in expected.evidence.items():
        assert got.evidence[name].schema == table.schema, name
        assert got.evidence[name].to_pylist() == table.to_pylist(), name
    found = {name for name, table in expected.evidence.items() if table.num_rows}
    assert {"small_kernels", "pageable_memcpy", "tensor_cores"} <= found, found
    assert "iterations" in found, found
    if FULL:
        assert set(HEAVY_RULES) <= found, found


AD_HOC = [  # the user's SQL: (text, params, dialect)
    ("SELECT name, count(*) AS n, sum(dur) AS total FROM kernel GROUP BY 1 ORDER BY 3 DESC, 1 LIMIT 7", None, None),
    ("WITH t AS (SELECT trace_id, max(ts + dur) - min(ts) AS span FROM gpu_op GROUP BY 1) "
     "SELECT t.trace_id, t.span, r.path FROM t JOIN trace r USING (trace_id) ORDER BY 1", None, None),
    ("SELECT api_kind, count(*) AS n FROM api_call WHERE dur > $min GROUP BY 1 ORDER BY 1", {"min": 1000}, None),
    ("SELECT name, dur / 1000 AS us FROM kernel WHERE trace_id = 1 ORDER BY dur DESC, name LIMIT 3", None, "sqlite"),
    # UNION BY NAME: Spark SQL has none (the memory rules use it)
    ("SELECT trace_id, count(*) AS n FROM kernel GROUP BY 1 UNION ALL BY NAME "
     "SELECT sum(bytes) AS bytes, trace_id FROM memcpy GROUP BY trace_id ORDER BY trace_id, n, bytes", None, None),
]


def test_sql_equal_duckdb(both):
    duck, spark = both
    for text, params, dialect in AD_HOC:
        expected = duck.sql(text, params, dialect=dialect)
        got = spark.sql(text, params, dialect=dialect)
        assert got.schema == expected.schema, text
        assert got.to_pylist() == expected.to_pylist(), text
        assert expected.num_rows > 0, text


def test_summary_equal_duckdb(both):
    duck, spark = both
    for per_trace in (False, True):
        expected, got = duck.summary(per_trace=per_trace), spark.summary(per_trace=per_trace)
        for part in ("rows", "traces", "gpus"):
            assert getattr(got, part).schema == getattr(expected, part).schema
            assert getattr(got, part).to_pylist() == getattr(expected, part).to_pylist(), (part, per_trace)


def test_generated_kernels_match_the_generator(spark_reports, job):
    """Independent of DuckDB: the generator's own kernel counts and durations."""
    table = spark_reports("kernel")
    for trace_id, facts in job[3].items():
        rows = table.filter(pc.equal(table.column("trace_id"), trace_id)).to_pylist()
        assert Counter({r["name"]: r["calls"] for r in rows}) == Counter(facts["kernel_count_by_name"])
        assert sum(r["total_ns"] for r in rows) == facts["kernel_dur_sum"]
        assert sum(r["calls"] for r in rows) == facts["kernels"]


def test_real_traces_are_in(job):
    sources = job[2].values()
    present = [r for r in REAL if (TRACES / r).exists()]
    if not present:
        pytest.skip("../shared/traces not present (third-party traces are not part of the repository)")
    assert sorted(os.path.basename(s) for s in sources if "torch" not in os.path.basename(s)) == \
        sorted(os.path.basename(r) for r in present)


def test_query_and_where_and_one_trace(both):
    duck, spark = both
    expected = duck.query("range", group_by="path", max_depth=2)
    assert spark.query("range", group_by="path", max_depth=2).to_pylist() == expected.to_pylist()
    options = dict(trace_id=2, where="dur > 5000 AND name LIKE '%gemm%'", sort="avg_ns", limit=5)
    assert spark.report("kernel", **options).to_pylist() == duck.report("kernel", **options).to_pylist()


@pytest.fixture
def run(capsys, monkeypatch):
    """traceql's main() in this process (so that it finds the module's session): (exit code, stdout,
    stderr)."""
    monkeypatch.setenv("COLUMNS", "80")

    def invoke(*args):
        try:
            main([str(a) for a in args])
            code = 0
        except SystemExit as exc:
            code = exc.code
        out = capsys.readouterr()
        return code, out.out, out.err
    return invoke


def test_cli_end_to_end(job, codegen, run):
    """export --partition-by trace, then report --engine spark with --db a file:// URL, as a user
    types them (the summary's text: test_summary_equal_duckdb has its rows); the running session
    of this process is used and left running. Spark compiles the query's code here, as in
    traceql's own sessions (the other tests: INTERPRETED)."""
    session = codegen
    db, _, _, _ = job
    out = job[1].parent / "cli-export"
    code, text, _ = run("--db", db, "export", "--format", "parquet", "--partition-by", "trace", "-o", out)
    assert code == 0 and "wrote" in text
    args = ["report", "--by", "kernel", "--format", "csv"]
    duck = run("--db", db, *args)
    spark = run("--db", f"file://{out}", *args, "--engine", "spark", "--spark-master", "local[2]")
    assert spark == duck
    assert duck[0] == 0 and len(duck[1].splitlines()) > 5
    assert not session.sparkContext._jsc.sc().isStopped()


def test_cli_db_url_of_another_hadoop_file_system(job, session, run):
    """--db a URL of a Hadoop file system other than the local one, as hdfs:// and s3a:// are:
    viewfs:// (Hadoop's mount-table file system, in the JVM, no cluster), whose /job is mounted on
    the export's directory by --spark-conf. The report equals DuckDB's only if the URL reaches
    Hadoop as written: `Path(url)` makes it viewfs:/tq/job (no mount table), and /job is no
    local directory. An s3a:// URL reaches Hadoop too: this pyspark has no S3A connector
    (hadoop-aws), and the one line says so."""
    db, export, _, _ = job
    args = ["report", "--by", "kernel", "--format", "csv"]
    duck = run("--db", db, *args)
    # a Hadoop setting by its own name: the running session's queries read it (spark.hadoop.KEY
    # is for a new session: its prefix is stripped when a SparkContext starts)
    mount = f"fs.viewfs.mounttable.tq.link./job={export.as_uri()}"
    assert run("--db", "viewfs://tq/job", *args, "--engine", "spark", "--spark-conf", mount) == duck
    assert duck[0] == 0 and len(duck[1].splitlines()) > 5
    code, out, err = run("--db", "s3a://bucket/job", *args, "--engine", "spark")
    assert (code, out, len(err.splitlines())) == (2, "", 1)
    assert err.startswith("traceql: error: s3a://bucket/job: the export has no readable folder kernel/ ("), err
    assert "org.apache.hadoop.fs.s3a.S3AFileSystem not found" in err, err


def test_ingest_on_spark_equals_ingest_and_export(job, session, run):
    """`ingest --engine spark`: the files on Spark tasks, each trace's partitions equal, file for
    file, to those `ingest` + `export --partition-by trace` wrote (ingested_at aside: the time of
    the ingest), with --db and one input given as file:// URLs. A failed task leaves the export
    as it was."""
    import pyarrow.parquet as pq

    from traceql.outputs import parquet

    _, export, sources, _ = job
    out = export.parent / "spark-ingested"
    ids = sorted(sources)[:3]  # the two generated traces and cs336-jsun (when present), in trace id order
    files = [sources[t] for t in ids]
    files[0] = Path(files[0]).resolve().as_uri()  # an input given as a URL (file://: no cluster here) is read as one
    code, text, err = run("--db", f"file://{out}", "ingest", "--engine", "spark", *files)
    assert (code, err) == (0, ""), err
    assert [line.split(":")[0] for line in text.splitlines() if line.startswith("added")] == \
        [f"added trace {t}" for t in ids]
    assert parquet.read_manifest(out) == parquet.read_manifest(export)
    for view in parquet.VIEWS:
        assert sorted(p.name for p in (out / view).iterdir()) == [f"trace_id={t}" for t in ids], view
        for t in ids:
            got, expected = (pq.read_table(parquet.partition_dir(root, view, t) / parquet.PART_FILE)
                             for root in (out, export))
            if view == "trace":
                got, expected = (x.drop_columns(["ingested_at"]) for x in (got, expected))
            assert got.schema.equals(expected.schema, check_metadata=True), (view, t)
            assert got.equals(expected), (view, t)
    before = sorted((p.relative_to(out), p.stat().st_mtime_ns) for p in out.rglob("*"))
    bad = export.parent / "not-a-trace.sqlite"
    bad.write_bytes(b"SQLite format 3\0" + b"\0" * 200)
    code, text, err = run("--db", out, "ingest", "--engine", "spark", bad, sources[ids[0]])
    assert (code, text) == (3, "") and len(err.splitlines()) == 1 and str(bad) in err
    assert err.startswith("traceql: error: ingest --engine spark: a task failed, the export is unchanged: "), err
    assert sorted((p.relative_to(out), p.stat().st_mtime_ns) for p in out.rglob("*")) == before


@pytest.fixture(scope="module")
def sides(job):
    """The two generated traces, each exported alone: the two sides of `diff --engine spark A/ B/`."""
    db, export, _, _ = job
    out = []
    with traceql.open(db) as ws:
        for t in (1, 2):
            out.append(export.parent / f"side{t}")
            ws.export(out[-1], trace_id=t, partition_by="trace")
    return out


def test_diff_of_two_exports_is_read_on_spark(sides, run):
    """`diff A/ B/` of two Parquet exports needs --engine spark, said before anything starts."""
    assert run("diff", *sides) == (2, "", f"traceql: error: {sides[0]}: a Parquet export is compared on Spark: "
                                          "add --engine spark\n")


@pytest.mark.skipif(not FULL, reason="diff's queries of both sides cost Spark about 80 JVM CPU s "
                                     "(TRACEQL_SPARK_FULL=1 runs it)")
def test_diff_of_two_exports_equals_duckdb(job, sides, session):
    """On Spark (traceql.diff with open_export, what `diff --engine spark A/ B/` runs) the diff of
    the two exports gives the rows of `diff 1 2` on the workspace. Integers, text and verdicts are
    compared exactly; floats to a relative 1e-12: Spark's stddev_samp and avg add the instances up
    in another order than DuckDB's, so standard deviations (and with them t, df, p and q) may
    differ in their last bits (seen: q 0.9138795124809668 against ...664), where a wrong row,
    filter or join moves them far more."""
    from traceql.engines.spark import ExportOpener

    expected = traceql.diff(1, 2, job[0])
    got = traceql.diff(*sides, open_export=ExportOpener(session=session))
    assert got.rows.schema == expected.rows.schema
    assert (got.verdict, got.notes, got.warnings) == (expected.verdict, expected.notes, expected.warnings)
    got_rows, expected_rows = got.rows.to_pylist(), expected.rows.to_pylist()
    assert [(r["section"], r["key"]) for r in got_rows] == [(r["section"], r["key"]) for r in expected_rows]
    assert len(expected_rows) > 20 and any(r["section"] == "kernel" for r in expected_rows)
    for g, e in zip(got_rows, expected_rows):
        for column, value in e.items():
            if isinstance(value, float):
                assert g[column] == pytest.approx(value, rel=1e-12, nan_ok=True), (e["section"], e["key"], column)
            else:
                assert g[column] == value, (e["section"], e["key"], column)
    assert not session.sparkContext._jsc.sc().isStopped()  # the opener neither started nor stopped a session


def test_cli_errors_read_cold(job, run):
    db, export, _, _ = job
    spark = ("--engine", "spark")
    assert run("--db", db, "report", "--by", "kernel", *spark) == (2, "", (
        f"traceql: error: {db}: not a traceql Parquet export, no _traceql.json (a workspace file? --engine spark "
        "reads its export: traceql export --format parquet --partition-by trace -o DIR)\n"))
    assert run("--db", db, "ingest", "--engine", "spark", export / "_traceql.json") == (2, "", (
        f"traceql: error: --db {db}: ingest --engine spark writes a Parquet export, a directory: give --db DIR "
        "(a new one, or an export to add the files to)\n"))
    assert run("--db", "s3a://bucket/job", "report", "--by", "kernel") == (2, "", (
        "traceql: error: --db s3a://bucket/job: a URL is read with --engine spark (a Parquet export); a DuckDB "
        "workspace is a local file\n"))
    assert run("--db", export, "sql", "SELECT to_json(name) AS j FROM kernel", *spark) == (2, "", (
        "traceql: error: DuckDB function to_json() has no Spark SQL translation\n"))
    assert run("--db", export, "report", "--by", "kernel", *spark, "--spark-conf", "oops") == (2, "", (
        "traceql: error: --spark-conf oops: give KEY=VALUE, e.g. spark.executor.memory=8g\n"))
    # the user's SQL: refused before a JVM starts (a workspace opened here has no session yet)
    for sql, message in [
            ("DROP VIEW kernel", "SQL: DROP VIEW is not a query: --engine spark only reads its export (SELECT or WITH)"),
            ("SELECT * FROM read_csv('/etc/passwd')", "SQL: READ_CSV('/etc/passwd'): --engine spark reads the "
             "export's views only (traceql schema lists them), no file, path or table function"),
            ("SELECT * FROM '/etc/passwd'", 'SQL: "/etc/passwd": --engine spark reads the export\'s views only'),
            ("SELECT durr FROM kernel", "SQL: no column kernel.durr; did you mean kernel.dur?"),
            ("SELECT 1; SELECT 2", "SQL: --engine spark runs one query at a time, got 2 statements")]:
        with traceql.open(export, engine="spark") as cold:
            with pytest.raises(traceql.UsageError, match=None) as err:
                cold.sql(sql)
            assert str(err.value).startswith(message), (sql, str(err.value))
            assert cold._session is None
    assert run("--db", export, "sql", "--write", "SELECT 1", *spark) == (2, "", (
        "traceql: error: --write and --allow-files are for a DuckDB workspace: --engine spark reads its Parquet "
        "export and nothing else\n"))
    code, out, err = run("--db", export, "report", "--by", "kernel", "--trace", "99", *spark)
    assert (code, out) == (2, "") and err.startswith(f"traceql: error: --trace 99: no such trace in {export} (traces: 1, 2")
