"""How --engine spark finds its settings (traceql.spark), without starting Spark: --spark-conf
items, and what the usual Spark configuration already says (PYSPARK_SUBMIT_ARGS, environment
variables, spark-defaults.conf), which traceql's own defaults must not override."""

from __future__ import annotations

import json

import pytest

import traceql
from traceql.engines.spark import _configured, parse_conf


def test_spark_conf_items():
    assert parse_conf(["spark.executor.memory=8g", "spark.sql.shuffle.partitions = 64", "a=b=c"]) == {
        "spark.executor.memory": "8g", "spark.sql.shuffle.partitions": "64", "a": "b=c"}
    for bad in ("oops", "=1"):
        with pytest.raises(traceql.UsageError, match=f"--spark-conf {bad}: give KEY=VALUE"):
            parse_conf([bad])


def test_configured_values(tmp_path, monkeypatch):
    for var in ("PYSPARK_SUBMIT_ARGS", "MASTER", "SPARK_DRIVER_MEMORY", "SPARK_CONF_DIR", "SPARK_HOME"):
        monkeypatch.delenv(var, raising=False)
    assert _configured("spark.master", "--master", "MASTER") is None
    (tmp_path / "spark-defaults.conf").write_text(
        "# a comment\nspark.master   spark://head:7077\nspark.driver.memory 16g\n")
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    assert _configured("spark.master", "--master", "MASTER") == "spark://head:7077"
    assert _configured("spark.driver.memory", "--driver-memory", "SPARK_DRIVER_MEMORY") == "16g"
    assert _configured("spark.executor.memory", "--executor-memory") is None
    monkeypatch.setenv("SPARK_DRIVER_MEMORY", "6g")
    assert _configured("spark.driver.memory", "--driver-memory", "SPARK_DRIVER_MEMORY") == "6g"
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "--master local[3] --driver-memory=2g pyspark-shell")
    assert _configured("spark.master", "--master", "MASTER") == "local[3]"
    assert _configured("spark.driver.memory", "--driver-memory", "SPARK_DRIVER_MEMORY") == "2g"


def test_a_workspace_file_is_not_an_export(tmp_path):
    db = tmp_path / "ws.duckdb"
    db.write_bytes(b"")
    with pytest.raises(traceql.UsageError, match="not a traceql Parquet export, no _traceql.json .a workspace file"):
        traceql.open(db, engine="spark")
    with pytest.raises(traceql.UsageError, match="engine 'sqlite': 'duckdb' .a workspace. or 'spark'"):
        traceql.open(db, engine="sqlite")


def test_ingest_on_spark_checks_before_spark(tmp_path):
    """ingest --engine spark (traceql.engines.spark_ingest.plan): what is refused before a session
    starts, and the trace ids given up front (after the export's highest)."""
    from traceql.engines.spark_ingest import plan
    from traceql.outputs import parquet

    a, b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    a.write_bytes(b"x")
    b.write_bytes(b"x")
    out = tmp_path / "job"
    assert plan([a, str(b), "hdfs://nn/r/c.sqlite"], out) == (out, [(1, str(a)), (2, str(b)), (3, "hdfs://nn/r/c.sqlite")])
    for part in ("trace_id=1", "trace_id=7"):
        (out / "trace" / part).mkdir(parents=True)
    (out / "_traceql.json").write_text(json.dumps(parquet.manifest()))
    assert plan([a], out)[1] == [(8, str(a))]
    for files, target, message in [
            ([a], "s3a://bucket/job", "s3a://bucket/job: ingest --engine spark writes a local directory"),
            ([a], a, f"{a}: exists and is not a directory"),
            ([tmp_path / "missing.sqlite"], out, f"{tmp_path / 'missing.sqlite'}: no such file"),
            ([a, f"file://{a}"], out, f"file://{a}: given twice"),
            ([], out, "no input files given")]:
        with pytest.raises(traceql.TraceqlError) as err:
            plan(files, target)
        assert str(err.value).startswith(message), str(err.value)
