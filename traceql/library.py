"""The query library: one documented SELECT per .sql file in queries/, its file name its
name. The header comment gives a one-line description and the parameters:

    -- NAME: description
    -- param NAME: description
    -- input: VIEW                    (reports: the contract view --where filters)
    -- column NAME: description       (each output column; 'column NAME if PARAM:' when the
                                       column is shown only when PARAM is true)
    -- label NAME: header             (the column's header in tables for people)
    SELECT ... $NAME ...

Parameters are bound by DuckDB ($name placeholders), never pasted into the SQL. The one
exception is a report's `--where` filter, checked and rebuilt by traceql.where before it
replaces the query's `/* where */ TRUE` marker."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

from .errors import UsageError

_HEAD = re.compile(r"^--\s*([\w-]+):\s*(.+)$")
_PARAM = re.compile(r"^--\s*param\s+(\w+):\s*(.+)$")
_INPUT = re.compile(r"^--\s*input:\s*(\w+)\s*$")
_COLUMN = re.compile(r"^--\s*column\s+(\w+)(?:\s+if\s+(\w+))?:\s*(.+)$")
_LABEL = re.compile(r"^--\s*label\s+(\w+):\s*(.+)$")


@dataclass
class Column:
    name: str
    doc: str
    when: str | None = None  # shown only when this parameter is true


@dataclass
class Query:
    name: str
    description: str
    sql: str
    params: dict[str, str] = field(default_factory=dict)
    input: str | None = None  # the contract view a --where filter runs over
    columns: dict[str, Column] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)


@cache
def library() -> dict[str, Query]:
    out = {}
    for entry in sorted(resources.files("traceql.queries").iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".sql"):
            continue
        text = entry.read_text(encoding="utf-8")
        lines = text.splitlines()
        head = _HEAD.match(lines[0]) if lines else None
        name = entry.name[:-4]
        if not head or head.group(1) != name:
            raise RuntimeError(f"queries/{entry.name} must start with '-- {name}: <description>'")
        params = {m.group(1): m.group(2).strip() for m in map(_PARAM.match, lines) if m}
        inputs = [m.group(1) for m in map(_INPUT.match, lines) if m]
        columns = {m.group(1): Column(m.group(1), m.group(3).strip(), m.group(2))
                   for m in map(_COLUMN.match, lines) if m}
        labels = {m.group(1): m.group(2).strip() for m in map(_LABEL.match, lines) if m}
        out[name] = Query(name, head.group(2).strip(), text, params, inputs[0] if inputs else None,
                          columns, labels)
    return out


def get(name: str) -> Query:
    lib = library()
    if name not in lib:
        raise UsageError(f"no query {name!r}; queries: {', '.join(lib)}")
    return lib[name]


def bind(query: Query, values: dict) -> dict:
    """Every declared parameter bound: the given value or NULL."""
    unknown = set(values) - set(query.params)
    if unknown:
        raise UsageError(f"query {query.name} has no parameter {sorted(unknown)[0]!r}; "
                         f"parameters: {', '.join(query.params) or 'none'}")
    return {p: values.get(p) for p in query.params}
