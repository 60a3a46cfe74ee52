"""The query library's DuckDB SQL as Spark SQL (traceql.transpile), without Spark: which queries
translate, which are refused and why, and the rewrites that make Spark compute what DuckDB does.
(That the translated queries give DuckDB's rows is tests/test_spark.py's part.)"""

from __future__ import annotations

import pytest

from traceql.query import library
from traceql.engines.transpile import UntranslatableError, to_spark

# The documented gaps (docs/spark.md): nothing else may fail to translate.
GAPS = {
    "analyze/exposed_comm": "ASOF JOIN", "analyze/gpu_gaps": "ASOF JOIN", "analyze/low_utilization": "ASOF JOIN",
    "analyze/sync_calls": "ASOF JOIN", "memory": "ASOF JOIN", "_internal/timeline": "to_json()",
}


def test_every_library_query_translates_but_the_documented_gaps():
    refused = {}
    for name, q in {**library.collection(()), **library.internal()}.items():
        try:
            spark_sql, tables = to_spark(q.sql, tables=True)
        except UntranslatableError as exc:
            refused[name] = str(exc)
            continue
        assert "$" not in spark_sql and tables, name
    assert sorted(refused) == sorted(GAPS)
    for name, construct in GAPS.items():
        assert construct in refused[name]


@pytest.mark.parametrize("duckdb_sql, spark_sql", [
    # a quotient is a DOUBLE in DuckDB, a DECIMAL or integer division nowhere
    ("SELECT sum(dur) / count(*) AS a FROM kernel", "SELECT CAST(SUM(kernel.dur) AS DOUBLE) / COUNT(*) AS a FROM kernel AS kernel"),
    # DuckDB's round of a DOUBLE: x * 10^d rounded, divided back, in binary floating point
    ("SELECT round(avg(dur), 2) AS r FROM kernel",
     "SELECT (ROUND(CAST(AVG(kernel.dur) AS DOUBLE) * 1e2, 0) / 1e2) AS r FROM kernel AS kernel"),
    # a DOUBLE cast to an integer rounds in DuckDB, truncates in Spark
    ("SELECT CAST(avg(dur) AS BIGINT) AS c FROM kernel", "SELECT CAST(ROUND(AVG(kernel.dur)) AS BIGINT) AS c FROM kernel AS kernel"),
    # an integer cast of an integer stays as it is
    ("SELECT CAST(dur AS BIGINT) AS c FROM kernel", "SELECT CAST(kernel.dur AS BIGINT) AS c FROM kernel AS kernel"),
    ("SELECT len(list_filter([1, 2], x -> x > 1)) AS n", "SELECT ARRAY_SIZE(FILTER(ARRAY(1, 2), x -> x > 1)) AS n"),
    # a parameter where a BOOLEAN goes: Spark types a NULL parameter as VOID and refuses it there
    ("SELECT name FROM kernel WHERE $flag", "SELECT kernel.name AS name FROM kernel AS kernel WHERE CAST(:flag AS BOOLEAN)"),
    ("SELECT CAST(NULL AS HUGEINT) AS h", "SELECT CAST(NULL AS DECIMAL(38, 0)) AS h"),
    ("WITH k AS MATERIALIZED (SELECT dur FROM kernel) SELECT count(*) AS n FROM k",
     "WITH k AS (SELECT kernel.dur AS dur FROM kernel AS kernel) SELECT COUNT(*) AS n FROM k AS k"),
    # Spark's LISTAGG(DISTINCT) WITHIN GROUP fails beside COUNT(DISTINCT) or under FILTER
    ("SELECT count(DISTINCT dur) AS n, string_agg(DISTINCT name, ', ' ORDER BY name) FILTER (WHERE dur > 1) AS s"
     " FROM kernel",
     "SELECT COUNT(DISTINCT kernel.dur) AS n, CASE WHEN SIZE(COLLECT_SET(kernel.name) FILTER(WHERE kernel.dur > 1))"
     " > 0 THEN ARRAY_JOIN(ARRAY_SORT(COLLECT_SET(kernel.name) FILTER(WHERE kernel.dur > 1)), ', ') END AS s"
     " FROM kernel AS kernel"),
])
def test_rewrites(duckdb_sql, spark_sql):
    assert to_spark(duckdb_sql) == spark_sql


def test_refusals_name_the_construct():
    with pytest.raises(UntranslatableError, match=r"DuckDB function list_reduce\(\) has no Spark SQL translation"):
        to_spark("SELECT list_reduce([1, 2], (a, b) -> a + b) AS s")
    with pytest.raises(UntranslatableError, match="one statement expected, got 2"):
        to_spark("SELECT 1; SELECT 2")
    with pytest.raises(UntranslatableError, match="sqlglot cannot read the query"):
        to_spark("SELECT FROM WHERE (")
