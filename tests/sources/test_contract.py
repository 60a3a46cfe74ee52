"""The contract: every layout's adapters produce exactly the contract columns, and the
contract tables look the same whichever layout filled them."""

import duckdb
import pytest

import traceql
from traceql.sources.adapters import prepare
from traceql.sources.detect import detect
from traceql.sources.adapters import ADAPTER_FILES, adapter_sql, raw_ddl
from traceql.store.load import ID_TABLES
from traceql.core import resources
from traceql.core.resources import CONTRACT_TABLES, CONTRACT_VIEWS, contract_docs, read_schema

from ..util import ingested, nsys_stub, trace_file

LAYOUTS = ("nsys/legacy", "nsys/v2", "nsys/v3", "nvprof/v12", "rocpd/v3", "rocprof/v1", "rpd/v2")
ID_COLUMNS = dict(ID_TABLES)
# adapter view -> contract table it fills
FILLS = {"src_kernel": "kernel", "src_api_call": "api_call", "src_memcpy": "memcpy",
         "src_memset": "memset", "src_thread": "thread", "src_device": "device"}


def adapter_views(layout: str, rows: dict | None = None, upto: str | None = None) -> duckdb.DuckDBPyConnection:
    """A connection holding LAYOUT's empty source tables and its adapter views (those of the files
    before UPTO only, when given), made with the staged row counts ROWS (adapter_sql)."""
    con = duckdb.connect()
    con.execute("ATTACH ':memory:' AS raw")
    con.execute("USE raw")
    con.execute(raw_ddl(layout))
    con.execute("USE memory")
    prepare(con, layout)
    for name in ADAPTER_FILES[:ADAPTER_FILES.index(upto) if upto else None]:
        con.execute(adapter_sql(layout, name, rows))
    return con


def adapter_columns(layout: str) -> dict[str, list[str]]:
    con = adapter_views(layout)
    out = {}
    for view in list(FILLS) + ["src_nvtx_event"]:
        out[view] = [r[0] for r in con.execute(f"DESCRIBE {view}").fetchall()]
    return out


@pytest.mark.parametrize("layout", LAYOUTS + ("kineto/v1",))
def test_the_staged_tables_read_from_raw_sql_are_those_duckdb_creates(layout):
    """The reader takes each layout's source tables and columns from the text of its raw.sql
    (traceql.sources.reader.declared_tables) instead of the catalog: the same tables, columns,
    types and order as duckdb_columns() lists once the DDL ran. Anything of another shape is
    left to the catalog (None)."""
    from traceql.sources.reader import declared_tables
    from traceql.sources.stage_report import create_raw_tables

    con = duckdb.connect()
    con.execute("ATTACH ':memory:' AS raw")
    create_raw_tables(con, raw_ddl(layout))
    catalog = {}
    for table, column, kind in con.execute(
            "SELECT table_name, column_name, data_type FROM duckdb_columns() WHERE database_name = 'raw' "
            "ORDER BY table_name, column_index").fetchall():
        catalog.setdefault(table, []).append((column, kind))
    parsed = declared_tables(raw_ddl(layout))
    assert parsed == catalog and list(parsed) == list(catalog) and len(catalog) >= 3
    assert declared_tables("CREATE TABLE t (a INTEGER[]);") is None
    assert declared_tables("CREATE TABLE t (a BIGINT); CREATE VIEW v AS SELECT 1;") is None
    assert declared_tables('-- x\nCREATE TABLE t ("end" BIGINT, b blob);') == {"t": [("end", "BIGINT"), ("b", "BLOB")]}


def contract_columns(table: str) -> list[str]:
    return [c.name for c in contract_docs()[table].columns]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_adapters_produce_exactly_the_contract_columns(layout):
    cols = adapter_columns(layout)
    for view, table in FILLS.items():
        expected = [c for c in contract_columns(table) if c not in ("trace_id", ID_COLUMNS.get(table))]
        got = [c for c in cols[view] if c != "src_row"]
        assert sorted(got) == sorted(expected), f"{layout} {view}"
    nvtx = set(cols["src_nvtx_event"]) - {"src_row", "kind", "end_ts"}
    assert nvtx <= set(contract_columns("nvtx_range")), nvtx - set(contract_columns("nvtx_range"))


def test_every_contract_column_is_documented_and_matches_the_table():
    con = duckdb.connect()
    for name in CONTRACT_TABLES + CONTRACT_VIEWS:
        con.execute(read_schema(f"contract/{name}.sql"))
    for name, doc in contract_docs().items():
        assert doc.doc and len(doc.doc) > 20, name
        described = [r[0] for r in con.execute(f"DESCRIBE {name}").fetchall()]
        assert [c.name for c in doc.columns] == described, name
        assert resources.contract_columns()[name] == tuple(described), name  # what an ingest checks tables against
        for c in doc.columns:
            assert len(c.doc) > 8, f"{name}.{c.name} has no real description"


def test_contract_tables_are_identical_across_layouts(tmp_path_factory):
    """One real trace of each NVIDIA layout (ingested once for the suite: tests/util.py ingested):
    every contract table and view has the same columns and types, in the same order. (One query
    of the catalog per workspace: one per table cost 0.65 CPU s a workspace, 28 statements.)"""
    files = {
        "nsys/legacy": "kmeans-rtx3080-old-nsys/report2.sqlite",
        "nsys/v2": "pipit-saxpy-mpi-cuda-nsys2022.2/saxpy-mpi-cuda_nsys_perlmutter0.sqlite",
        "nsys/v3": "nsysai-h100-2gpu-pytorch-nsys2026.2/h100_2gpu_1s.sqlite",
        "nvprof/v12": "nvprof-pytorch-emit-nvtx-lm-v100-a/net.sql",
    }
    shapes = {}
    for layout, rel in files.items():
        assert detect(trace_file(rel)).layout == layout
        with traceql.open(ingested(tmp_path_factory, rel)) as ws:
            shapes[layout] = {t: [] for t in CONTRACT_TABLES + CONTRACT_VIEWS}
            for r in ws.sql("SELECT table_name, column_name, data_type FROM information_schema.columns "
                            "WHERE list_contains($names, table_name) ORDER BY table_name, ordinal_position",
                            {"names": list(shapes[layout])}).to_pylist():
                shapes[layout][r.pop("table_name")].append(r)
            assert all(shapes[layout].values()), layout
            assert ws.sql("SELECT count(*) AS n FROM kernel").to_pylist()[0]["n"] > 0
    first = shapes["nsys/legacy"]
    for layout, shape in shapes.items():
        assert shape == first, layout


def test_lazy_export_missing_tables_gives_empty_views(tmp_path):
    # a stub with nothing but one kernel: every other view is empty, not an error
    db = tmp_path / "ws.duckdb"
    traceql.ingest([nsys_stub(tmp_path / "k.sqlite")], db=db)
    with traceql.open(db) as ws:
        counts = {t: ws.sql(f"SELECT count(*) AS n FROM {t}").to_pylist()[0]["n"]
                  for t in ("kernel", "api_call", "memcpy", "memset", "nvtx_range", "nvtx_mark", "gpu_op")}
        assert counts == {"kernel": 1, "api_call": 0, "memcpy": 0, "memset": 0, "nvtx_range": 0,
                          "nvtx_mark": 0, "gpu_op": 1}
        assert ws.sql("SELECT device_id, name FROM device").to_pylist() == [{"device_id": 0, "name": None}]


@pytest.mark.parametrize("layout", LAYOUTS + ("kineto/v1",))
def test_each_adapter_view_is_made_once_and_without_callchains_the_defaults_stand_in(layout):
    """A default adapter view that the format's own file creates again is left out (a statement
    a small ingest spent for nothing): each view is created once per file, and the views are those
    of the default and the own file together. An nsys export without CUDA_CALLCHAINS rows gets the
    defaults' empty stack views, with the columns and types the nsys file's views have."""
    import re

    from traceql.core.resources import schema_exists

    views = re.compile(r"^CREATE OR REPLACE TEMP VIEW (\w+)", re.M)
    fmt, _, folder = layout.partition("/")
    for name in ADAPTER_FILES:
        made = views.findall(adapter_sql(layout, name))
        assert len(made) == len(set(made)), (layout, name, made)
        own = next((read_schema(r) for r in (f"{fmt}/{folder}/{name}.sql", f"{fmt}/common/{name}.sql")
                    if schema_exists(r)), "")
        default = read_schema(f"default/{name}.sql") if schema_exists(f"default/{name}.sql") else ""
        assert set(made) == set(views.findall(default)) | set(views.findall(own))
    if fmt != "nsys":
        return
    for name, table, made in (("stacks", "CUDA_CALLCHAINS", ("src_call_stack", "src_api_stack")),
                              ("graph", "CUDA_GRAPH_NODE_EVENTS", ("src_graph_exec", "src_graph_event")),
                              ("memory", "CUDA_GPU_MEMORY_USAGE_EVENTS", ("src_memory_event",))):
        assert adapter_sql(layout, name, {table: 0}).strip() == read_schema(f"default/{name}.sql").strip()
        assert adapter_sql(layout, name, {}) == adapter_sql(layout, name, {table: 0})
        assert adapter_sql(layout, name, {table: 3}) == adapter_sql(layout, name) != adapter_sql(layout, name, {})
        described = []
        for rows in ({table: 0}, {table: 3}):
            con = adapter_views(layout, upto=name)  # (the views it reads: src_mem_kind)
            con.execute(adapter_sql(layout, name, rows))
            described.append([con.execute(f"DESCRIBE {v}").fetchall() for v in made])
            assert all(con.execute(f"SELECT count(*) FROM {v}").fetchone()[0] == 0 for v in made)
        assert described[0] == described[1], name
