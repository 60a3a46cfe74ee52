"""A layout's adapters: the source tables it reads (raw_ddl), its adapter files in order
(ADAPTER_FILES, adapter_sql), and what its adapter SQL can use beyond the staged source tables.

`prepare(con, layout)` runs after the source tables are staged in `raw` and before the
adapter files of schemas/<format>/ run. It provides two kinds of temporary tables:

- Data shipped with a format: every schemas/<format>/<stem>.csv becomes the temporary
  table src_<stem> (nvprof's CUPTI callback-id tables cbid_runtime.csv and cbid_driver.csv
  become src_cbid_runtime and src_cbid_driver). Lines starting with '#' are comments; the
  first other line names the columns; a column whose values are all integers is BIGINT,
  any other column text.
- Demangled symbols: when schemas/<format>/demangle.sql exists, it is a SELECT of
  (id, symbol) rows (e.g. the distinct kernel names of an nvprof file). Each symbol is
  demangled once in Python (traceql.sources.demangle, the C++ runtime's __cxa_demangle) into the
  temporary table src_demangled(id, symbol, name, short_name). Demangling the distinct
  names only keeps this cheap on million-kernel traces, which have few distinct names.

Calling it again on the same connection (several files in one ingest) replaces the tables.
"""

from __future__ import annotations

import csv
import io
import re
from functools import cache

import duckdb

from traceql.sources import demangle
from traceql.core.resources import read_schema, schema_exists, schema_file


# A temporary table's columns: (name, DuckDB type, values), all of one length. They reach DuckDB
# as list parameters unnested side by side: no Arrow table registered, which would load
# pyarrow.dataset and pyarrow.compute (a third of an ingest's Python start-up on a small export).
Columns = tuple[tuple[str, str, tuple], ...]


@cache
def data_tables(fmt: str) -> tuple[tuple[str, Columns], ...]:
    folder = schema_file(fmt)
    if not folder.is_dir():
        return ()
    out = []
    for node in sorted(folder.iterdir(), key=lambda n: n.name):
        if not (node.is_file() and node.name.endswith(".csv")):
            continue
        lines = [ln for ln in node.read_text(encoding="utf-8").splitlines() if ln and not ln.startswith("#")]
        rows = list(csv.reader(io.StringIO("\n".join(lines))))
        header, body = rows[0], rows[1:]
        columns = []
        for i, name in enumerate(header):
            values = [r[i] if i < len(r) else None for r in body]
            if all(v is not None and v.lstrip("-").isdigit() for v in values):
                columns.append((name, "BIGINT", tuple(int(v) for v in values)))
            else:
                columns.append((name, "VARCHAR", tuple(values)))
        out.append((f"src_{node.name[:-4]}", tuple(columns)))
    return tuple(out)


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def create_temp(con: duckdb.DuckDBPyConnection, table: str, columns: Columns) -> None:
    """The temporary table TABLE holding COLUMNS (see Columns)."""
    select = ", ".join(f"unnest(?::{kind}[]) AS {_quoted(name)}" for name, kind, _ in columns)
    con.execute(f"CREATE OR REPLACE TEMP TABLE {_quoted(table)} AS SELECT {select}",
                [list(values) for _, _, values in columns])


def _demangled(con: duckdb.DuckDBPyConnection, fmt: str) -> Columns:
    ids, symbols, names, shorts = [], [], [], []
    if schema_exists(f"{fmt}/demangle.sql"):
        for ident, symbol in con.execute(read_schema(f"{fmt}/demangle.sql")).fetchall():
            name = None if symbol is None else demangle.demangle(symbol)
            ids.append(ident)
            symbols.append(symbol)
            names.append(name)
            shorts.append(None if name is None else demangle.short_name(name))
    return (("id", "BIGINT", ids), ("symbol", "VARCHAR", symbols), ("name", "VARCHAR", names),
            ("short_name", "VARCHAR", shorts))


def prepare(con: duckdb.DuckDBPyConnection, layout: str) -> None:
    """Create the data and demangled-name tables that `layout`'s adapters read."""
    fmt = layout.split("/")[0]
    for table, data in data_tables(fmt):
        create_temp(con, table, data)
    if schema_exists(f"{fmt}/demangle.sql"):  # (only its format's adapters read src_demangled: not nsys's)
        create_temp(con, "src_demangled", _demangled(con, fmt))


# Adapter views each layout provides, in the order they are created. A layout folder
# (schemas/nsys/<layout>/) may override any file of schemas/nsys/common/.
ADAPTER_FILES = ("labels", "stacks", "mem_kind", "kernel", "api_call", "memcpy", "memset",
                 "nvtx_event", "thread", "device", "graph", "host", "memory", "stats")


def raw_ddl(layout: str) -> str:
    """The source tables a layout reads: <format>/raw.sql plus the layout folder's raw.sql."""
    fmt, _, folder = layout.partition("/")
    ddl = read_schema(f"{fmt}/raw.sql")
    if folder and schema_exists(f"{fmt}/{folder}/raw.sql"):
        ddl += "\n" + read_schema(f"{fmt}/{folder}/raw.sql")
    return ddl


def adapter_sql(layout: str, name: str, rows: dict[str, int] | None = None) -> str:
    """The adapter file NAME of a layout: its folder's, else its format's common one; preceded by
    schemas/default/NAME.sql when that exists (empty views for formats that lack the data).

    rows: the rows staged of each source table (traceql.sources.stage_report.StageReport.rows). A
    file that says `-- needs rows of: raw.TABLE, ...` makes views that are empty without a row in
    one of them: when none holds one, the defaults' empty views stand in for it."""
    fmt, _, folder = layout.partition("/")
    default = read_schema(f"default/{name}.sql") + "\n" if schema_exists(f"default/{name}.sql") else ""
    for rel in (f"{fmt}/{folder}/{name}.sql", f"{fmt}/common/{name}.sql"):
        if folder and schema_exists(rel):
            own = read_schema(rel)
            needs = _NEEDS.search(own)
            if default and rows is not None and needs is not None and not any(
                    rows.get(t.strip().removeprefix("raw.")) for t in needs.group(1).split(",")):
                return default
            return _defaults_not_in(default, own) + own
    if default:
        return default
    raise RuntimeError(f"no adapter file {name}.sql for layout {layout}")


_VIEW = re.compile(r"^CREATE OR REPLACE TEMP VIEW (\w+)", re.M)
_NEEDS = re.compile(r"^-- needs rows of: (.+)$", re.M)


def _defaults_not_in(default: str, own: str) -> str:
    """The statements of a default adapter file (each a CREATE OR REPLACE TEMP VIEW) whose view the
    format's own file OWN does not create: a view made only to be replaced costs a small ingest a
    statement (1-2 ms, a dozen per nsys file)."""
    made = set(_VIEW.findall(own))
    starts = [m.start() for m in _VIEW.finditer(default)]
    if not made or not starts:
        return default
    parts = [default[a:b] for a, b in zip(starts, starts[1:] + [len(default)])]
    return "".join(p for p in parts if _VIEW.match(p).group(1) not in made)
