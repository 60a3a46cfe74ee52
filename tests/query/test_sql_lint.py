"""Lint of the documented SQL (sqlglot): the contract's descriptions and the query library's
conventions. A new view, column or query that breaks a rule fails here with its name."""

import pytest
import sqlglot
from sqlglot import exp

from traceql.query import library
from traceql.core.resources import CONTRACT_TABLES, CONTRACT_VIEWS, contract_docs, contract_types
from traceql.query.sqlcheck import Catalog, check_names

CONTRACT = CONTRACT_TABLES + CONTRACT_VIEWS
BUILTIN = {**library.library(), **library.internal()}  # the internal tier is checked alike
QUERIES = sorted(BUILTIN)


@pytest.mark.parametrize("view", CONTRACT)
def test_every_contract_column_has_a_type_and_description(view):
    doc = contract_docs()[view]
    assert doc.doc.strip(), f"schemas/contract/{view}.sql: no description on its first line"
    described = [(c.name, c.type) for c in doc.columns]
    # every column DuckDB sees, in order, with a '-- description' the parser found
    assert described == contract_types()[view], f"schemas/contract/{view}.sql: undocumented or misparsed columns"
    for c in doc.columns:
        assert c.doc.strip() and c.type, f"{view}.{c.name}: needs a type and a description"


def test_schema_prints_every_view_and_column():
    from ..util import cli as traceql

    out = traceql("schema").stdout.splitlines()
    for view in CONTRACT:
        doc = contract_docs()[view]
        assert f"{view}: {doc.doc}" in out
        for c in doc.columns:
            # a type may hold spaces (ENUM('push/pop', 'start/end')): name, then type, then description
            assert any(line.split(None, 1)[0] == c.name and line.split(None, 1)[1].startswith(c.type + "  ")
                       and line.endswith(c.doc) for line in out if line.strip()), (view, c.name)


def _tree(name):
    q = BUILTIN[name]
    try:
        trees = [t for t in sqlglot.parse(q.sql, read="duckdb") if t is not None]
    except sqlglot.errors.ParseError as exc:
        pytest.fail(f"queries/{name}.sql: sqlglot cannot read it ({str(exc).splitlines()[0]}); "
                    "write it so that sqlglot parses it (e.g. parenthesize the expression)")
    assert len(trees) == 1, f"queries/{name}.sql: one statement per query file"
    return q, trees[0]


@pytest.mark.parametrize("name", QUERIES)
def test_query_has_a_description(name):
    q = BUILTIN[name]
    assert len(q.description) >= 10, f"queries/{name}.sql: the description on its first line is too short"
    for param, doc in q.params.items():
        assert doc.strip(), f"queries/{name}.sql: parameter {param} needs a description"


@pytest.mark.parametrize("name", QUERIES)
def test_query_parameters_match_placeholders(name):
    q, tree = _tree(name)
    used = {p.name for p in tree.find_all(exp.Placeholder)}
    assert used == set(q.params), (f"queries/{name}.sql: declared {sorted(q.params)}, "
                                   f"placeholders {sorted(used)}")
    library.check_placeholders(q)  # the check user queries get, agrees


@pytest.mark.parametrize("name", QUERIES)
def test_query_reads_only_contract_views(name):
    _, tree = _tree(name)
    ctes = {cte.alias_or_name for cte in tree.find_all(exp.CTE)}
    read = {t.name for t in tree.find_all(exp.Table)}
    assert read - ctes <= set(CONTRACT), f"queries/{name}.sql reads {sorted(read - ctes - set(CONTRACT))}"
    assert not any(t.args.get("db") or t.args.get("catalog") for t in tree.find_all(exp.Table))
    assert not list(tree.find_all(exp.Anonymous)) or all(
        a.name.lower() not in ("read_csv", "read_parquet", "read_json", "sqlite_scan", "query")
        for a in tree.find_all(exp.Anonymous))
    # and every column it names exists, by the same check `traceql sql` makes
    check_names(tree, Catalog.contract())


@pytest.mark.parametrize("name", QUERIES)
def test_query_ends_with_a_deterministic_order_by(name):
    _, tree = _tree(name)
    assert isinstance(tree, exp.Query), f"queries/{name}.sql is not a query"
    order = tree.args.get("order")
    assert order is not None and order.expressions, f"queries/{name}.sql: no top-level ORDER BY"
