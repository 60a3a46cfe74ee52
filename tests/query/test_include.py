"""SQL written once: schemas/include/NAME.sql, placed in queries and schemas by a comment
`/* include: NAME(slot = SQL; ...) */` that traceql.resources.expand replaces (the query library
and read_schema both expand). And the query library's internal tier (queries/_internal/)."""

from __future__ import annotations

import re

import pytest

from traceql.query import library
from traceql.core.errors import UsageError
from traceql.core.resources import expand, read_schema

from ..util import REPO

INCLUDES = sorted(p.stem for p in (REPO / "schemas" / "include").glob("*.sql"))
SQL_FILES = sorted(p for root in ("queries", "schemas") for p in (REPO / root).rglob("*.sql")
                   if p.parent.name != "include")


def test_every_include_is_used_where_its_file_says():
    used = {}
    for path in SQL_FILES + sorted((REPO / "schemas" / "include").glob("*.sql")):
        for name in re.findall(r"/\*\s*include:\s*([\w-]+)", path.read_text(encoding="utf-8")):
            used.setdefault(name, set()).add(path.relative_to(REPO).as_posix())
    assert sorted(used) == INCLUDES, "an include no file uses, or a file including what does not exist"
    # the blocks the issue names stand once and serve every file that repeated them
    assert used["dur_stats"] == {"queries/kernel.sql", "queries/api.sql", "queries/gpu.sql",
                                 "schemas/include/transfer_report.sql"}
    assert used["transfer_report"] == {"queries/memcpy.sql", "queries/memset.sql"}
    assert used["innermost_range"] == {f"queries/analyze/{r}.sql" for r in ("gpu_gaps", "sync_calls", "low_utilization")}
    assert used["pyprof_bias"] == {"queries/kernel_op.sql", "schemas/derive/kernel_op.sql"}
    rules = {f"queries/analyze/{r}.sql" for r in ("exposed_memcpy", "gpu_gaps", "low_utilization", "small_kernels",
                                                  "sync_calls")}
    assert used["gpu_work"] == {"queries/gpu.sql", "queries/device.sql", "queries/stream.sql"} | rules
    assert used["busy_sweep"] == {"queries/device.sql", "queries/stream.sql", "queries/analyze/small_kernels.sql",
                                  "queries/analyze/sync_calls.sql", "schemas/derive/device_busy.sql"}
    assert used["busy_islands"] == {"queries/analyze/exposed_comm.sql", "queries/analyze/exposed_memcpy.sql",
                                    "queries/analyze/low_utilization.sql", "schemas/filters/range_time.sql"}
    assert used["busy_overlap"] == {"queries/analyze/exposed_comm.sql", "queries/analyze/exposed_memcpy.sql"}


@pytest.mark.parametrize("name", sorted({**library.library(), **library.internal()}))
def test_library_queries_are_expanded(name):
    sql = {**library.library(), **library.internal()}[name].sql
    assert "include:" not in sql
    assert not re.search(r"\{\w+\}", sql), "a slot left unfilled"


def test_schemas_are_expanded():
    for path in SQL_FILES:
        if path.relative_to(REPO).parts[0] == "schemas":
            rel = path.relative_to(REPO / "schemas").as_posix()
            assert "include:" not in read_schema(rel), rel


def test_expand_fills_the_slots_and_keeps_the_indentation():
    text = "WITH swept AS (\n    /* include: busy_sweep(rows = ops; partition = trace_id, device_id; order = ts, dur) */\n)"
    assert expand(text) == (
        "WITH swept AS (\n"
        "    SELECT *,\n"
        "           max(ts + dur) OVER (PARTITION BY trace_id, device_id ORDER BY ts, dur\n"
        "                               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS covered_until\n"
        "    FROM ops\n"
        ")")
    # an include inside an include (transfer_report holds dur_stats), indented at each level
    memcpy = library.get("memcpy").sql
    assert "        kind,\n        count(*) AS calls,\n        sum(dur) AS total_ns,\n" in memcpy
    assert "        round(coalesce(stddev_samp(dur), 0), 1) AS stddev_ns,\n        sum(bytes) AS total_bytes," in memcpy


@pytest.mark.parametrize("comment, message", [
    ("/* include: nope */", "/* include: nope */: no file schemas/include/nope.sql"),
    ("/* include: busy_sweep(rows = x) */", "/* include: busy_sweep */: slots ['order', 'partition', 'rows'] wanted, ['rows'] given"),
    ("/* include: dur_stats(x = 1) */", "/* include: dur_stats */: slots [] wanted, ['x'] given"),
    ("/* include: busy_sweep(rows) */", "/* include: busy_sweep(...) */: expected slot = SQL, got 'rows'"),
])
def test_a_bad_include_in_a_user_query_is_a_usage_error_naming_the_file(tmp_path, comment, message):
    (tmp_path / "mine.sql").write_text(f"-- mine: a query of mine\nSELECT 1 AS one, {comment} ORDER BY 1\n")
    with pytest.raises(UsageError) as err:
        library.collection([tmp_path])
    assert str(err.value) == f"{tmp_path / 'mine.sql'}: {message}"


def test_internal_queries_are_a_tier_of_their_own():
    internal = library.internal()
    assert sorted(internal) == ["_internal/diff_per_iteration", "_internal/diff_side", "_internal/folded",
                                "_internal/gpu_busy", "_internal/memory_levels", "_internal/timeline", "_internal/timeline_memory",
                                "_internal/timeline_names", "_internal/traces"]
    public = library.library()
    assert not set(internal) & set(public) and not any(n.startswith("_") or n.startswith("diff/") for n in public)
    assert "kernel" in public and "jobs" in public  # reports and the documented user queries stay listed
    for name, q in internal.items():
        assert library.get(name) is q and q.name == name and q.origin is None
    with pytest.raises(UsageError, match="no internal query '_internal/nope'"):
        library.get("_internal/nope")
    # the include folder and other private folders are no queries
    assert library.builtin("_include/dur_stats") is None and library.builtin("_internal/_x") is None
