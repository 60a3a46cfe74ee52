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


@pytest.fixture(scope="module")
def session():
    """local[2], as CI has 2 cores, with the settings traceql gives a local session."""
    spark, _ = spark_engine.make_session("local[2]", {"spark.sql.shuffle.partitions": "2"})
    options = spark.sparkContext.getConf().get("spark.driver.extraJavaOptions")
    assert options.endswith(f"log4j2-traceql.properties {spark_engine.LOCAL_JVM_OPTIONS}")
    assert spark.sparkContext.getConf().get("spark.driver.memory") == spark_engine.LOCAL_DRIVER_MEMORY
    yield spark
    spark.stop()


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


@pytest.mark.parametrize("by", ["kernel", "api", "memcpy", "range", "op"])
def test_reports_equal_duckdb(both, job, by):
    duck, spark = both
    expected = duck.report(by, per_trace=True)  # all traces together: test_summary_equal_duckdb
    got = spark.report(by, per_trace=True)
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


def test_summary_equal_duckdb(both):
    duck, spark = both
    for per_trace in (False, True):
        expected, got = duck.summary(per_trace=per_trace), spark.summary(per_trace=per_trace)
        for part in ("rows", "traces", "gpus"):
            assert getattr(got, part).schema == getattr(expected, part).schema
            assert getattr(got, part).to_pylist() == getattr(expected, part).to_pylist(), (part, per_trace)


def test_generated_kernels_match_the_generator(both, job):
    """Independent of DuckDB: the generator's own kernel counts and durations."""
    _, spark = both
    table = spark.report("kernel", per_trace=True)
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


def test_cli_end_to_end(job, session, run):
    """export --partition-by trace, then report and query --engine spark, as a user types them; the
    running session of this process is used and left running."""
    db, _, _, _ = job
    out = job[1].parent / "cli-export"
    code, text, _ = run("--db", db, "export", "--format", "parquet", "--partition-by", "trace", "-o", out)
    assert code == 0 and "wrote" in text
    for args in (["report", "--by", "kernel", "--format", "csv"], ["summary", "--per-trace", "--limit", "3"]):
        duck = run("--db", db, *args)
        spark = run("--db", out, *args, "--engine", "spark", "--spark-master", "local[2]")
        assert spark == duck, args
        assert duck[0] == 0 and len(duck[1].splitlines()) > 5
    assert not session.sparkContext._jsc.sc().isStopped()


def test_cli_errors_read_cold(job, run):
    db, export, _, _ = job
    spark = ("--engine", "spark")
    assert run("--db", db, "report", "--by", "kernel", *spark) == (2, "", (
        f"traceql: error: {db}: not a traceql Parquet export, no _traceql.json (a workspace file? --engine spark "
        "reads its export: traceql export --format parquet --partition-by trace -o DIR)\n"))
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
