"""Access to the SQL files shipped with the package (schemas/ and queries/), and the
documentation parsed from their comments."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache

CONTRACT_TABLES = (
    "trace", "device", "thread", "api_call", "kernel", "memcpy", "memset", "graph_exec", "graph_event",
    "sync_event", "osrt_call", "profiler_overhead", "gpu_metric", "memory_event",
    "nvtx_range", "nvtx_mark", "launch", "op_range", "range_gpu", "torch_op", "kernel_op", "device_peak",
    "device_busy", "unattributed_gpu", "call_stack", "op_stack", "ingest_stats",
)
CONTRACT_VIEWS = ("gpu_op",)
# The NVTX ranges as read, until the family 'nesting' nests them into nvtx_range (not a contract
# table: schemas/nvtx_range_source.sql), and every table that holds rows of a trace.
RANGE_SOURCE = "nvtx_range_source"
TRACE_TABLES = CONTRACT_TABLES + (RANGE_SOURCE,)

# A deterministic row order for every contract table and view (export, golden files).
ROW_ORDER = {
    "trace": "trace_id", "device": "trace_id, device_id", "thread": "trace_id, pid, tid",
    "api_call": "trace_id, api_id", "kernel": "trace_id, kernel_id", "memcpy": "trace_id, memcpy_id",
    "memset": "trace_id, memset_id", "graph_exec": "trace_id, exec_row_id",
    "graph_event": "trace_id, graph_event_id", "sync_event": "trace_id, sync_id", "osrt_call": "trace_id, osrt_id",
    "profiler_overhead": "trace_id, ts, pid, tid, dur, name", "gpu_metric": "trace_id, device_id, ts, metric",
    "memory_event": "trace_id, memory_event_id",
    "nvtx_range": "trace_id, range_id", "nvtx_mark": "trace_id, mark_id",
    "launch": "trace_id, op_id", "op_range": "trace_id, op_id, depth, range_id",
    "range_gpu": "trace_id, range_id", "torch_op": "trace_id, range_id", "kernel_op": "trace_id, kernel_id",
    "device_peak": "trace_id, device_id", "device_busy": "trace_id, device_id", "unattributed_gpu": "trace_id",
    "ingest_stats": "trace_id, key", "gpu_op": "trace_id, op_id",
    "call_stack": "trace_id, stack_id, level", "op_stack": "trace_id, op_id",
}


def package_folder(package: str):
    """The folder of one of traceql's data packages (traceql.schemas, traceql.queries) as a
    pathlib.Path: where its __init__.py is, in a wheel's install and in an editable one alike.
    Not importlib.resources.files: importing importlib.resources (with tempfile, shutil and
    zipfile behind it) was about 3 ms of every command that reads a query or schema file, for a
    zip import that traceql cannot run from anyway (DuckDB loads its sqlite extension from a file)."""
    from importlib import import_module
    from pathlib import Path

    return Path(import_module(package).__file__).parent


@cache
def _schemas():
    """The folder of schemas/ (looked up once; --help and --version read no schema file)."""
    return package_folder("traceql.schemas")


def schema_file(relpath: str):
    """A Traversable for schemas/<relpath>."""
    node = _schemas()
    for part in relpath.split("/"):
        node = node.joinpath(part)
    return node


@cache
def read_schema(relpath: str) -> str:
    """The SQL of schemas/<relpath>, its includes expanded (see expand). Read once per process: an
    ingest reads some 800 files, the same 30 contract files many times over."""
    return expand(schema_file(relpath).read_text(encoding="utf-8"))


_INCLUDE = re.compile(r"/\*\s*include:\s*([\w-]+)\s*(?:\(([^*]*)\))?\s*\*/")
_SLOT = re.compile(r"\{(\w+)\}")


def expand(text: str, _seen: tuple = ()) -> str:
    """text (SQL of schemas/ or queries/) with each comment `/* include: NAME */` replaced by the SQL
    of schemas/include/NAME.sql: what several files share, written once. The included file's
    leading comment lines (its documentation) are dropped and its lines indented as the comment
    is; `/* include: NAME(slot = SQL; slot = SQL) */` also replaces each {slot} of the file by its
    SQL (every slot given, none left over). An included file may include others. The result is
    plain SQL, the same for DuckDB and for the Spark translation. Raises ValueError for an
    unknown, circular or misfilled include."""
    if "include:" not in text:
        return text

    def one(match: re.Match) -> str:
        name, args = match.group(1), match.group(2)
        if name in _seen:
            raise ValueError(f"schemas/include/{name}.sql includes itself through {' -> '.join(_seen + (name,))}")
        entry = schema_file(f"include/{name}.sql")
        if not entry.is_file():
            raise ValueError(f"/* include: {name} */: no file schemas/include/{name}.sql")
        lines = entry.read_text(encoding="utf-8").rstrip().splitlines()
        while lines and (not lines[0].strip() or lines[0].lstrip().startswith("--")):
            lines.pop(0)
        body = "\n".join(lines)
        given = {}
        for part in (args or "").split(";"):
            if part.strip():
                slot, eq, value = part.partition("=")
                if not eq or not re.fullmatch(r"\s*\w+\s*", slot):
                    raise ValueError(f"/* include: {name}(...) */: expected slot = SQL, got {part.strip()!r}")
                given[slot.strip()] = " ".join(value.split())
        wanted = set(_SLOT.findall(body))
        if wanted != set(given):
            raise ValueError(f"/* include: {name} */: slots {sorted(wanted)} wanted, {sorted(given)} given")
        body = _SLOT.sub(lambda m: given[m.group(1)], body)
        line_start = text.rfind("\n", 0, match.start()) + 1
        indent = re.match(r"[ \t]*", text[line_start:match.start()]).group(0)
        return expand(body, _seen + (name,)).replace("\n", "\n" + indent)

    return _INCLUDE.sub(one, text)


def schema_exists(relpath: str) -> bool:
    return schema_file(relpath).is_file()


@dataclass
class ViewColumn:
    name: str
    type: str
    doc: str


@dataclass
class ViewDoc:
    name: str
    doc: str
    kind: str  # 'table' or 'view'
    columns: list[ViewColumn] = field(default_factory=list)


_HEAD = re.compile(r"^--\s*(\w+):\s*(.+)$")
_TABLE = re.compile(r"^CREATE\s+TABLE\s+(\w+)\s*\(", re.I)
_VIEW = re.compile(r"^CREATE\s+VIEW\s+(\w+)\s+AS", re.I)
_COL = re.compile(r"^\s*(\w+)\s+([A-Z]+(?:\([^)]*\))?)(?:\s+NOT NULL)?\s*,?\s*--\s*(.+)$")
_VIEWCOL = re.compile(r"^\s*(?:.*\bAS\s+)?(\w+)\s*,?\s*--\s*(.+)$")


@cache
def contract_types() -> dict[str, list[tuple[str, str]]]:
    """Every contract table and view with its columns and their DuckDB types, as DuckDB
    describes them after creating the contract in an in-memory database (the types of a
    view's columns are not written in its SQL)."""
    import duckdb

    con = duckdb.connect()
    try:
        for name in CONTRACT_TABLES + CONTRACT_VIEWS:
            con.execute(read_schema(f"contract/{name}.sql"))
        return {name: [(r[0], r[1]) for r in con.execute(f"DESCRIBE {name}").fetchall()]
                for name in CONTRACT_TABLES + CONTRACT_VIEWS}
    finally:
        con.close()


@cache
def view_docs(view: str | None = None) -> dict[str, ViewDoc]:
    """contract_docs(), or only VIEW's (`traceql schema VIEW`); an unknown view is a UsageError
    naming the closest one."""
    docs = contract_docs()
    if view is None:
        return docs
    if view not in docs:
        from traceql.core.errors import UsageError
        from traceql.core.names import closest

        best = closest(view, list(docs))
        hint = f"did you mean {best}? " if best else ""
        raise UsageError(f"no view {view!r}; {hint}views: {', '.join(docs)}")
    return {view: docs[view]}


def _text_doc(name: str) -> ViewDoc:
    """Contract table or view NAME as the doc comments of schemas/contract/NAME.sql give it: the
    column types as written (none for a view's columns)."""
    text = read_schema(f"contract/{name}.sql")
    lines = text.splitlines()
    head = _HEAD.match(lines[0])
    if not head or head.group(1) != name:
        raise RuntimeError(f"schemas/contract/{name}.sql must start with '-- {name}: <description>'")
    kind = "table" if _TABLE.search(text.split("\n", 1)[1].lstrip()) else "view"
    doc = ViewDoc(name, head.group(2).strip(), kind)
    for line in lines[1:]:
        m = _COL.match(line) if kind == "table" else _VIEWCOL.match(line)
        if m and kind == "table":
            doc.columns.append(ViewColumn(m.group(1), m.group(2), m.group(3).strip()))
        elif m:
            doc.columns.append(ViewColumn(m.group(1), "", m.group(2).strip()))
    return doc


@cache
def contract_columns() -> dict[str, tuple[str, ...]]:
    """The documented column names of every contract table and view, from the SQL text alone
    (contract_docs without the DuckDB types: what an ingest checks a workspace's tables against)."""
    return {name: tuple(c.name for c in _text_doc(name).columns) for name in CONTRACT_TABLES + CONTRACT_VIEWS}


@cache
def contract_docs() -> dict[str, ViewDoc]:
    """Every contract table and view with its description and documented columns,
    read from the doc comments of schemas/contract/*.sql; column types as DuckDB
    describes them (contract_types()). Parsed once per process (shared: callers only read it)."""
    docs: dict[str, ViewDoc] = {}
    for name in CONTRACT_TABLES + CONTRACT_VIEWS:
        doc = _text_doc(name)
        types = dict(contract_types()[name])
        for col in doc.columns:
            col.type = types.get(col.name, col.type)
        docs[name] = doc
    return docs
