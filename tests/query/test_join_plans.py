"""Every join that ingest runs is linear or n log n: hash joins on equality keys, ASOF joins,
IEJoins (sort-based inequality joins), never a nested loop, a blockwise nested loop, a
piecewise merge join, a cross product, or a hash join that carries an interval condition as a
residual filter (what made op_range quadratic: every call met every start/end range of its
process). DuckDB picks the operator from its estimates, so a plan that is fine on a small input
can go wrong on a big one; ingest sets the thresholds that turn those choices off
(traceql/core/settings.py configure), and this test checks the plans it gets.

Each statement ingest runs (the derive steps of schemas/derive/, the adapters, the stored
reports), and those that build the families of derived tables on first use, is EXPLAINed right
before it runs, on fixtures with the shapes that matter: several
processes reusing correlation ids, push/pop stacks on several threads, start/end ranges that
end on another thread, PyTorch op ranges with forward/backward pairs, unclosed ranges, and a
PyTorch profiler (Kineto) trace."""

from __future__ import annotations

import json
import re
import sqlite3
from importlib import import_module

import pytest

import traceql
from traceql.derive import derivation
from fixtures.gen_kineto import generate as generate_kineto
from fixtures.gen_nsys import generate

from ..util import REPO

ingest_mod = import_module("traceql.store.transaction")  # the writing copy's connection

FORBIDDEN = {"NESTED_LOOP_JOIN", "BLOCKWISE_NL_JOIN", "PIECEWISE_MERGE_JOIN", "CROSS_PRODUCT"}
# an interval condition (a comparison of order, not '!='; '>>' is a shift)
INEQUALITY = re.compile(r"(?<![<>])(<=|>=|<|>)(?![<>])")

# Joins allowed although they match the checks above, each with the reason it stays linear: a
# regular expression over the operator's condition (DuckDB's EXPLAIN 'Condition').
ALLOWED = {
    # kernel_op.sql (tensor-core patterns), kernel_op_units.sql (dtypes by kernel name): the
    # DISTINCT kernel names of the trace against a fixed table of patterns shipped in
    # schemas/torch/*.csv; device_peak.sql: the trace's GPUs against the GPU peak table. The
    # pattern tables have a few dozen rows: names x patterns grows with the distinct names only.
    r"^regexp_matches\(name, pattern(, 'i')?\)$": "distinct names x a fixed table of regular expressions",
}

EXPLAINABLE = re.compile(r"^\s*(SELECT|WITH|INSERT|CREATE\s+(OR\s+REPLACE\s+)?(TEMP\s+|TEMPORARY\s+)?TABLE)\b", re.I)


def _operators(node):
    info = dict(node.get("extra_info") or {})
    # a cross product of single rows (ungrouped aggregates side by side) is no join to worry about
    info["_children_rows"] = [_rows(c) for c in node.get("children", [])]
    # a cross product with a side that is one row by construction (a scalar subquery) neither
    info["_single_row_child"] = any(_single_row(c) for c in node.get("children", []))
    yield node.get("name"), info
    for child in node.get("children", []):
        yield from _operators(child)


def _single_row(node) -> bool:
    """Whether a plan node gives one row whatever the data: an ungrouped aggregate, seen through
    projections and filters (a scalar subquery: DuckDB's check that it returned one row)."""
    name = node.get("name")
    if name == "UNGROUPED_AGGREGATE":
        return True
    children = node.get("children", [])
    return name in ("PROJECTION", "FILTER") and len(children) == 1 and _single_row(children[0])


def _rows(node) -> float:
    """DuckDB's row estimate of a plan node; an ungrouped aggregate gives one row, a cross
    product the product of its children's."""
    estimate = (node.get("extra_info") or {}).get("Estimated Cardinality")
    if estimate is not None:
        try:
            return float(estimate)
        except ValueError:
            return float("inf")
    if node.get("name") == "UNGROUPED_AGGREGATE":
        return 1.0
    if node.get("name") == "CROSS_PRODUCT":
        rows = 1.0
        for child in node.get("children", []):
            rows *= _rows(child)
        return rows
    return float("inf")


class PlanRecorder:
    """A connection that EXPLAINs each statement before running it (installed in place of
    ingest's timing wrapper) and records the joins it would use."""

    seen: list = []
    trees: list = []  # (statement, its plan trees as DuckDB's EXPLAIN gives them)

    def __init__(self, con):
        self._con = con

    def execute(self, sql, *args):
        statements = self._con.extract_statements(sql) if not args else []
        if len(statements) > 1:
            for statement in statements:
                result = self.execute(statement.query)
            return result
        text = "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--"))
        if EXPLAINABLE.match(text):
            rows = self._con.execute("EXPLAIN (FORMAT json) " + sql, *args).fetchall()
            trees = [tree for _, plan in rows for tree in json.loads(plan)]
            PlanRecorder.seen.append((" ".join(text.split()), [op for tree in trees for op in _operators(tree)]))
            PlanRecorder.trees.append((" ".join(text.split()), trees))
        return self._con.execute(sql, *args)

    def __getattr__(self, name):
        return getattr(self._con, name)


def _bad_joins(ops):
    bad = []
    for name, info in ops:
        conditions = info.get("Conditions") or info.get("Condition") or []
        if isinstance(conditions, str):
            conditions = [conditions]
        if conditions and all(any(re.search(p, c) for p in ALLOWED) for c in conditions):
            continue
        if name == "CROSS_PRODUCT" and (info["_single_row_child"] or
                                        (info["_children_rows"] and max(info["_children_rows"]) <= 1)):
            continue
        if name in FORBIDDEN:
            bad.append(f"{name} {conditions}")
        elif name == "HASH_JOIN" and any(INEQUALITY.search(c) for c in conditions):
            bad.append(f"HASH_JOIN with an inequality {conditions}")
    return bad


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The plans of every statement of ingest and of the family builds, and the workspace they
    built (every family)."""
    tmp = tmp_path_factory.mktemp("plans")
    sources = []
    generate(tmp / "gen.sqlite", layout="3", kernels=3000, seed=3, nvtx_per_kernel=2.0)
    sources.append(tmp / "gen.sqlite")
    for name in ("nsys_attribution.sql", "nsys_torch.sql"):
        src = tmp / name.replace(".sql", ".sqlite")
        con = sqlite3.connect(src)
        con.executescript((REPO / "fixtures" / name).read_text())
        con.close()
        sources.append(src)
    generate_kineto(tmp / "kineto.json.gz", kernels=2000, seed=3, memory=True)  # the Kineto adapters (schemas/kineto/)
    sources.append(tmp / "kineto.json.gz")
    mp = pytest.MonkeyPatch()
    mp.setenv("TRACEQL_TIMING", "1")
    mp.setattr(ingest_mod, "_TimedConnection", PlanRecorder)
    PlanRecorder.seen, PlanRecorder.trees = [], []
    try:
        traceql.ingest(sources, db=tmp / "ws.duckdb")
        # the families of derived tables built on first use (traceql.derivation), as a query builds them
        with traceql.open(tmp / "ws.duckdb") as ws:
            ws.ensure()
            assert ws.con.execute("SELECT count(*) FROM derived_family").fetchone()[0] == \
                len(derivation.families()) * len(sources) == 6 * len(sources)
    finally:
        mp.undo()
    return list(PlanRecorder.seen), tmp / "ws.duckdb"


@pytest.fixture(scope="module")
def plans(built):
    return built[0]


def test_every_join_of_ingest_is_linear(plans):
    assert len(plans) > 50  # the derive steps were seen
    problems = []
    for text, ops in plans:
        bad = _bad_joins(ops)
        if bad:
            problems.append(f"{text[:160]} ... : {'; '.join(bad)}")
    assert not problems, "\n".join(problems)


def test_the_attribution_steps_use_asof_and_iejoin(plans):
    """The two joins op_range is built on are there (the test above would pass vacuously if the
    statements were not seen)."""
    op_range = [[name for name, _ in ops] for text, ops in plans if text.startswith("INSERT INTO op_range")]
    se_pairs = [[name for name, _ in ops] for text, ops in plans if "TABLE raw.op_se_pairs" in text]
    assert op_range and se_pairs
    assert all(names.count("ASOF_JOIN") == 1 for names in op_range)
    assert all("IE_JOIN" in names for names in se_pairs)


def _nodes(node):
    yield node
    for child in node.get("children", []):
        yield from _nodes(child)


def _scans(node) -> set[str]:
    return {(n.get("extra_info") or {}).get("Table", "") for n in _nodes(node) if n.get("name") == "SEQ_SCAN"}


def test_no_hash_table_of_every_op_or_path_for_a_few_rows(tmp_path, monkeypatch):
    """Three hash tables that held a whole table for rows that are few or none: the paths of
    every range, built a second time for the ranges deeper than the depth cap (now their own
    small table, raw.nvtx_deep_path: schemas/derive/nvtx_range.sql); every torch op joined with
    its NVTX name, to look up the PyProf calls that kernels are named by (now the list of those
    calls, raw.kop_calls, drives: schemas/derive/kernel_op.sql); every torch op, to read the
    names of the outermost PyProf markers (now the markers alone:
    schemas/derive/kernel_op_units.sql). An eager ingest of a generated trace and of the PyTorch
    fixture; a hash join's second child is its build side."""
    sources = [tmp_path / "gen.sqlite", tmp_path / "torch.sqlite"]
    generate(sources[0], layout="3", kernels=3000, seed=3, nvtx_per_kernel=2.0)
    con = sqlite3.connect(sources[1])
    con.executescript((REPO / "fixtures" / "nsys_torch.sql").read_text())
    con.close()
    monkeypatch.setenv("TRACEQL_TIMING", "1")
    monkeypatch.setenv("TRACEQL_DERIVE", "eager")
    monkeypatch.setattr(ingest_mod, "_TimedConnection", PlanRecorder)
    PlanRecorder.seen, PlanRecorder.trees = [], []
    traceql.ingest(sources, db=tmp_path / "ws.duckdb")

    def statements(head):
        return [trees for text, trees in PlanRecorder.trees if text.startswith(head)]

    def hash_joins(trees):
        return [n for tree in trees for n in _nodes(tree) if n.get("name") == "HASH_JOIN"]

    nesting, kernel_op = statements("INSERT INTO nvtx_range "), statements("INSERT INTO kernel_op ")
    units = statements("INSERT INTO raw.kop_units ")
    assert len(nesting) == 2 and len(kernel_op) == 2 and len(units) == 2
    for trees in nesting:
        scans = [n for tree in trees for n in _nodes(tree) if n.get("name") == "SEQ_SCAN"
                 and "nvtx_path" in (n.get("extra_info") or {}).get("Table", "")]
        assert len(scans) == 1
    for trees in kernel_op:
        built_from = [_scans(j["children"][1]) for j in hash_joins(trees)]
        ops = [b for b in built_from if any(t.endswith(".torch_op") for t in b)]
        assert ops and all(any("kop_calls" in t for t in b) for b in ops), built_from
    for trees in units:
        outer = [j for j in hash_joins(trees) if "outer_id = range_id" in str(j["extra_info"].get("Conditions"))]
        scans = [(n.get("extra_info") or {}) for j in outer for n in _nodes(j["children"][1]) if n.get("name") == "SEQ_SCAN"]
        assert outer and all("'pyprof'" in str(e.get("Filters")) for e in scans), scans


def test_ranges_numbered_at_ingest_hash_their_ids_not_their_names(tmp_path, monkeypatch):
    """An ingest of a big export numbers the ranges by sorting their narrow keys into raw.nvtx_ids,
    then joins the ranges as read to them (traceql/store/load.py). DuckDB expects 1/25 of the
    events after the adapter view's filters, so it hashed the ranges with their names and probed
    them with the ids; the INSERT runs with the right sides hashed as written
    (traceql.core.settings.hash_right_side). The export is made to count as big."""
    from traceql.store import load

    source = tmp_path / "gen.sqlite"
    generate(source, layout="3", kernels=3000, seed=3, nvtx_per_kernel=2.0)
    monkeypatch.setattr(load, "small_input_threads", lambda paths: None)
    monkeypatch.setenv("TRACEQL_TIMING", "1")
    monkeypatch.setenv("TRACEQL_DERIVE", "eager")  # (numbered at ingest when nested there)
    monkeypatch.setattr(ingest_mod, "_TimedConnection", PlanRecorder)
    PlanRecorder.seen, PlanRecorder.trees = [], []
    traceql.ingest([source], db=tmp_path / "ws.duckdb")
    staged = [trees for text, trees in PlanRecorder.trees if text.startswith("INSERT INTO temp.main.nvtx_range_source ")]
    assert len(staged) == 1
    joins = [n for tree in staged[0] for n in _nodes(tree) if n.get("name") == "HASH_JOIN"
             and "src_row = src_row" in str((n.get("extra_info") or {}).get("Conditions"))]
    assert len(joins) == 1
    built, probed = _scans(joins[0]["children"][1]), _scans(joins[0]["children"][0])
    assert built == {"raw.main.nvtx_ids"} and "raw.main.NVTX_EVENTS" in probed, (built, probed)


def test_the_nesting_of_a_lazy_workspace_hashes_the_ids_not_the_ranges(tmp_path, monkeypatch):
    """A workspace ingested without the nesting numbers its ranges when the nesting is first
    built: the ranges as read joined to their sorted ids (nvtx_stage, schemas/derive/nvtx_range.sql).
    Every such join hashes the ids, not the ranges with their names (a filter true of every id
    gives DuckDB the estimate that makes it so)."""
    source = tmp_path / "gen.sqlite"
    generate(source, layout="3", kernels=3000, seed=3, nvtx_per_kernel=2.0)
    monkeypatch.setenv("TRACEQL_TIMING", "1")
    monkeypatch.setattr(ingest_mod, "_TimedConnection", PlanRecorder)
    traceql.ingest([source], db=tmp_path / "ws.duckdb")
    PlanRecorder.seen, PlanRecorder.trees = [], []
    with traceql.open(tmp_path / "ws.duckdb") as ws:
        ws.ensure()
    joins = [(text[:40], n) for text, trees in PlanRecorder.trees for tree in trees for n in _nodes(tree)
             if n.get("name") == "HASH_JOIN" and "src_key" in str((n.get("extra_info") or {}).get("Conditions"))]
    assert {t for t, _ in joins} >= {"CREATE OR REPLACE TABLE raw.nvtx_depth A", "CREATE OR REPLACE TABLE raw.nvtx_path AS",
                                     "INSERT INTO nvtx_range BY NAME SELECT * "}
    for text, join in joins:
        assert _scans(join["children"][1]) == {"raw.main.nvtx_ids"}, (text, _scans(join["children"][1]))


def test_hash_right_side_turns_the_swap_off_and_back_on():
    """Within hash_right_side a join hashes its right side even when DuckDB expects it to be the
    bigger one, and the setting is back afterwards, also when the statement fails."""
    import duckdb

    from traceql.core.settings import hash_right_side

    con = duckdb.connect()
    con.execute("CREATE TABLE big AS SELECT i AS k, repeat('x', 40) AS name FROM range(100000) t(i)")
    con.execute("CREATE TABLE ids AS SELECT i AS k, i AS n FROM range(50000) t(i)")
    # every row of big passes the filter, which DuckDB expects to keep a fifth
    sql = "EXPLAIN (FORMAT json) SELECT * FROM big b JOIN ids i ON i.k = b.k WHERE b.name <> ''"

    def built():
        tree = json.loads(con.execute(sql).fetchall()[0][1])[0]
        join = next(n for n in _nodes(tree) if n.get("name") == "HASH_JOIN")
        return _scans(join["children"][1])

    assert built() == {"memory.main.big"}  # DuckDB's estimate: 20 k rows, fewer than the 50 k ids
    with hash_right_side(con):
        assert built() == {"memory.main.ids"}
    assert built() == {"memory.main.big"}
    with pytest.raises(duckdb.Error):
        with hash_right_side(con):
            con.execute("SELECT * FROM no_such_table")
    assert con.execute("SELECT current_setting('disabled_optimizers')").fetchone()[0] == ""
    con.execute("SET disabled_optimizers = 'late_materialization'")  # set before: kept
    with hash_right_side(con):
        assert built() == {"memory.main.ids"}
    assert con.execute("SELECT current_setting('disabled_optimizers')").fetchone()[0] == "late_materialization"


def test_the_checker_catches_what_it_should():
    """A hash join on a process key with an interval as residual filter, and a nested loop,
    are reported."""
    import duckdb

    con = duckdb.connect()
    con.execute("CREATE TABLE c AS SELECT i % 2 AS pid, i AS ts FROM range(1000) t(i)")
    con.execute("CREATE TABLE r AS SELECT i % 2 AS pid, i AS ts, i + 10 AS e FROM range(100) t(i)")
    plan = con.execute("EXPLAIN (FORMAT json) SELECT * FROM c JOIN r ON c.pid = r.pid AND r.ts <= c.ts AND r.e >= c.ts").fetchall()
    assert _bad_joins([op for _, p in plan for tree in json.loads(p) for op in _operators(tree)])
    plan = con.execute("EXPLAIN (FORMAT json) SELECT * FROM c JOIN r ON c.pid = r.pid OR r.ts <= c.ts").fetchall()
    assert _bad_joins([op for _, p in plan for tree in json.loads(p) for op in _operators(tree)])
    plan = con.execute("EXPLAIN (FORMAT json) SELECT * FROM c, r").fetchall()
    assert _bad_joins([op for _, p in plan for tree in json.loads(p) for op in _operators(tree)])
    # beside a scalar subquery (one row by construction) a cross product is no join to worry about
    plan = con.execute("EXPLAIN (FORMAT json) SELECT * FROM c WHERE c.ts = (SELECT max(ts) FROM r)").fetchall()
    ops = [op for _, p in plan for tree in json.loads(p) for op in _operators(tree)]
    assert not _bad_joins(ops)


# Joins of the library's queries that the checks above flag but that stay linear, by query, each
# with the reason: a regular expression over the operator and its conditions as _bad_joins names them.
QUERY_ALLOWED = {
    # counts: one row per kernel name (the fewest calls any trace made): every call meets one row
    "clock": {r"^HASH_JOIN with an inequality \['name = name', 'n >= i'\]$": "one row per kernel name"},
    "straggler": {r"^HASH_JOIN with an inequality \['name = name', 'iteration <= iterations'\]$":
                  "one row per range name"},
    # DuckDB runs an ASOF join whose left side it expects to hold at most 64 rows
    # (asof_loop_join_threshold; reports keep DuckDB's default) as a loop over those rows:
    # one scan of the right side per row. memory: one row per GPU (and iteration); low_utilization:
    # the chunks of each GPU's span (30 unless asked).
    "memory": {r"^NESTED_LOOP_JOIN \['trace_id = trace_id', 'device_id = device_id', 'memory_event_id < first_id'\]$":
               "an ASOF join of one row per GPU"},
    "analyze/low_utilization": {r"^NESTED_LOOP_JOIN \['trace_id = trace_id', 'device_id = device_id', 'ts <= (end_)?ts'\]$":
                                "ASOF joins of the chunks of each GPU's span"},
}


def test_every_query_of_the_library_joins_linearly(built):
    """Every report, analyze rule and internal query on a workspace with every family: no join
    that grows as the product of two big tables (a condition on the left table in a LEFT JOIN's
    ON clause made DuckDB plan blockwise nested loops: gpu_trace took 107 s at 250 k kernels)."""
    import duckdb

    from traceql.query import library

    queries = {**library.library(), **library.internal()}
    assert {"kernel_op", "clock", "gpu_trace", "analyze/gpu_gaps", "_internal/timeline"} <= set(queries)
    con = duckdb.connect(str(built[1]), read_only=True)
    problems, allowed_seen = [], set()
    try:
        for name, q in sorted(queries.items()):
            params = {k: v for k, v in library.bind(q, {}).items() if f"${k}" in q.sql}
            rows = con.execute("EXPLAIN (FORMAT json) " + q.sql, params).fetchall()
            ops = [op for _, plan in rows for tree in json.loads(plan) for op in _operators(tree)]
            for bad in _bad_joins(ops):
                allowed = [p for p in QUERY_ALLOWED.get(name, {}) if re.search(p, bad)]
                allowed_seen.update((name, p) for p in allowed)
                if not allowed:
                    problems.append(f"{name}: {bad}")
    finally:
        con.close()
    assert not problems, "\n".join(problems)
    # an allowance no plan needs any more is taken out, not kept
    assert allowed_seen == {(n, p) for n, ps in QUERY_ALLOWED.items() for p in ps}


def test_the_gpu_trace_report_joins_each_operation_by_its_keys(tmp_path):
    # gpu_trace.sql joined kernel, memcpy and memset with `g.op_kind = '...'` in the ON clause:
    # DuckDB planned blockwise nested loops (107 s for 250 k kernels); by keys alone, hash joins.
    import duckdb

    from traceql.query import library

    generate(tmp_path / "gen.sqlite", layout="3", kernels=300, seed=3)
    traceql.ingest([tmp_path / "gen.sqlite"], db=tmp_path / "ws.duckdb")
    q = library.get("gpu_trace")
    con = duckdb.connect(str(tmp_path / "ws.duckdb"), read_only=True)
    plan = con.execute("EXPLAIN " + q.sql, library.bind(q, {"trace_id": None, "per_trace": False})).fetchall()[0][1]
    con.close()
    assert "HASH_JOIN" in plan
    assert not [op for op in FORBIDDEN if op in plan], plan
