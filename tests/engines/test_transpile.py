"""The query library's DuckDB SQL as Spark SQL (traceql.transpile), without Spark: which queries
translate, which are refused and why, and the rewrites that make Spark compute what DuckDB does.
(That the translated queries give DuckDB's rows is tests/engines/test_spark.py's part.)"""

from __future__ import annotations

import pytest

from traceql.query import library
from traceql.engines.transpile import UntranslatableError, to_spark

# The documented gaps (docs/spark.md): nothing else may fail to translate.
GAPS = {"_internal/timeline": "to_json()"}


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
    # a DOUBLE cast to an integer rounds half to even in DuckDB (BROUND), truncates in Spark
    ("SELECT CAST(avg(dur) AS BIGINT) AS c FROM kernel", "SELECT CAST(BROUND(AVG(kernel.dur)) AS BIGINT) AS c FROM kernel AS kernel"),
    # an integer cast of an integer stays as it is
    ("SELECT CAST(dur AS BIGINT) AS c FROM kernel", "SELECT CAST(kernel.dur AS BIGINT) AS c FROM kernel AS kernel"),
    ("SELECT len(list_filter([1, 2], x -> x > 1)) AS n", "SELECT ARRAY_SIZE(FILTER(ARRAY(1, 2), x -> x > 1)) AS n"),
    # a parameter where a BOOLEAN goes: Spark types a NULL parameter as VOID and refuses it there
    ("SELECT name FROM kernel WHERE $flag", "SELECT kernel.name AS name FROM kernel AS kernel WHERE CAST(:flag AS BOOLEAN)"),
    ("SELECT CAST(NULL AS HUGEINT) AS h", "SELECT CAST(NULL AS DECIMAL(38, 0)) AS h"),
    # UNION BY NAME (Spark SQL has none): both sides select A's columns, then B's others, NULL where missing
    ("SELECT trace_id, name FROM kernel UNION ALL BY NAME SELECT dur, trace_id FROM kernel",
     "SELECT `_byname0_0`.`trace_id`, `_byname0_0`.`name`, NULL AS `dur` FROM (SELECT kernel.trace_id AS trace_id, "
     "kernel.name AS name FROM kernel AS kernel) AS _byname0_0 UNION ALL SELECT `_byname0_1`.`trace_id`, NULL AS "
     "`name`, `_byname0_1`.`dur` FROM (SELECT kernel.dur AS dur, kernel.trace_id AS trace_id FROM kernel AS kernel) "
     "AS _byname0_1"),
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


def test_asof_join_becomes_equi_joins():
    """The latest row at or before: a lookup of the matched time by one window over the union of
    both sides' times (the joined side first at equal times), then equi-joins; one row of the
    joined side per key and time."""
    got = to_spark("SELECT p.ts, s.name FROM kernel p ASOF LEFT JOIN nvtx_range s "
                   "ON s.trace_id = p.trace_id AND s.ts <= p.ts")
    assert got == (
        "SELECT p.ts AS ts, s.name AS name FROM kernel AS p LEFT JOIN (SELECT DISTINCT _asof0_k0, t, m FROM "
        "(SELECT _asof0_k0, t, side, MAX(CASE WHEN side = 0 THEN t END) OVER (PARTITION BY _asof0_k0 ORDER BY t, "
        "side ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS m FROM (SELECT p.trace_id AS _asof0_k0, p.ts "
        "AS t, 1 AS side FROM kernel AS p UNION ALL SELECT s.trace_id AS _asof0_k0, s.ts AS t, 0 AS side FROM "
        "nvtx_range AS s) AS _asof0_u) AS _asof0_s WHERE side = 1) AS _asof0 ON _asof0._asof0_k0 = p.trace_id "
        "AND _asof0.t = p.ts LEFT JOIN (SELECT * FROM (SELECT s.*, ROW_NUMBER() OVER (PARTITION BY s.trace_id, "
        "s.ts ORDER BY s.ts NULLS LAST) AS _asof0_rn FROM nvtx_range AS s) AS _asof0_n WHERE _asof0_rn = 1) AS s "
        "ON s.trace_id = _asof0._asof0_k0 AND s.ts = _asof0.m")
    # strictly before (<), written either way round: the left side's times sort first; an inner
    # ASOF join stays inner on the joined side
    strict = to_spark("SELECT p.ts FROM kernel p ASOF JOIN nvtx_range s ON p.trace_id = s.trace_id AND p.ts > s.ts")
    assert "MAX(CASE WHEN side = 1 THEN t END)" in strict and "0 AS side FROM kernel" in strict
    assert ") AS _asof0 ON" in strict and " JOIN (SELECT * FROM" in strict and "LEFT JOIN (SELECT * FROM" not in strict


def test_asof_join_refusals():
    with pytest.raises(UntranslatableError, match=r"only the latest row at or before"):
        to_spark("SELECT p.ts FROM kernel p ASOF JOIN nvtx_range s ON s.trace_id = p.trace_id AND s.ts >= p.ts")
    with pytest.raises(UntranslatableError, match=r"one inequality on the time expected"):
        to_spark("SELECT p.ts FROM kernel p ASOF JOIN nvtx_range s ON s.trace_id = p.trace_id")


def test_shared_ctes_are_computed_once():
    """A CTE read twice or more is a step of its own (Spark would inline and run it at each
    read), with the once-read CTEs it needs; the rest reads it as a view."""
    from traceql.engines.transpile import SHARED_VIEW_PREFIX as P, shared_ctes

    assert shared_ctes("WITH a AS (SELECT 1 AS x), b AS (SELECT x FROM a), c AS (SELECT x FROM b) "
                       "SELECT * FROM c JOIN c AS d USING (x) UNION ALL SELECT x FROM a") == (
        ((f"{P}a", "SELECT 1 AS x"), (f"{P}c", f"WITH b AS (SELECT x FROM {P}a AS a) SELECT x FROM b")),
        f"SELECT * FROM {P}c AS c JOIN {P}c AS d USING (x) UNION ALL SELECT x FROM {P}a AS a")
    for unchanged in ["WITH a AS (SELECT 1 AS x) SELECT * FROM a",  # read once
                      "WITH a(y) AS (SELECT 1 AS x) SELECT * FROM a, a AS b",  # column names of its own
                      "WITH a AS (SELECT ? AS x) SELECT * FROM a, a AS b",  # ? parameters count by place
                      "WITH a AS (SELECT 1 AS x) SELECT * FROM a, (WITH a AS (SELECT 2 AS x) SELECT * FROM a) AS b"]:
        assert shared_ctes(unchanged) == ((), unchanged)
    q = library.collection(())["analyze/iterations"]
    steps, final = shared_ctes(to_spark(q.sql))
    assert [v.removeprefix(P) for v, _ in steps] == ["with_gpu", "qualified", "chosen", "kstarts", "iters", "found"]
    assert final.count(f"{P}found AS found") == 2 and "WITH abstained AS" in final
