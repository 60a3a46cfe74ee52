"""The query library: one documented SELECT per .sql file in queries/, its file name its
name. The header comment gives a one-line description and the parameters:

    -- NAME: description
    -- param NAME: description
    -- input: VIEW                    (reports: the contract view --where filters)
    -- column NAME: description       (each output column; 'column NAME if PARAM:' when the
                                       column is shown only when PARAM is true, 'if not PARAM:'
                                       only when it is false)
    -- label NAME: header             (the column's header in tables for people)
    -- default NAME: value            (the parameter's value when none is given; else NULL)
    -- shown: COL, COL, ...            (reports: the columns shown when none are asked for, in
                                       order, beside trace_id and range_pct when those apply;
                                       `-c all` shows every column; without it, every column)
    SELECT ... $NAME ...

Queries in a sub-folder are named by their path: queries/analyze/gpu_gaps.sql is the query
'analyze/gpu_gaps' (the rules of `traceql analyze`).

Internal queries, those that commands run for their own output (the summary's header, the
Perfetto timeline, flame graphs, plots, the diff's sides), live in queries/_internal/ and are
named '_internal/<file name>' (Perfetto's _private convention): `traceql queries` and library()
list the reports and the user-facing queries only; get('_internal/NAME') reads one, internal()
lists them. They follow the same conventions and checks as the others, and may change without
notice: they are not part of the contract.

SQL that several queries share is written once, in schemas/include/NAME.sql, and stands in a
query as a comment `/* include: NAME */` or `/* include: NAME(slot = SQL; slot = SQL) */`, which
the library replaces by that file's SQL when it reads the query (traceql.resources.expand): a
Query's sql is plain SQL that DuckDB runs and sqlglot translates to Spark SQL as it is.

Parameters are bound by DuckDB ($name placeholders), never pasted into the SQL. The one
exception is a report's `--where` filter, checked and rebuilt by traceql.query.where before it
replaces the query's `/* where */ TRUE` marker.

A user's own folders of queries (`--queries DIR`, or $TRACEQL_QUERIES with folders
separated by the path separator, ':' on Unix) follow the same conventions and join the
library. A user query cannot take the name of a built-in query or of another user query:
that is an error naming both files, never a silent replacement, so `traceql query kernel`
and the reports always mean the documented built-ins. User queries run through the same
checks as `traceql sql` (traceql.query.sqlcheck): read-only, names checked, parameters bound.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from traceql.core.errors import UsageError
from traceql.core.resources import expand, package_folder

ENV = "TRACEQL_QUERIES"
INTERNAL = "_internal"  # queries/_internal/: the internal tier (see the module's documentation)

_HEAD = re.compile(r"^--\s*([\w/-]+):\s*(.+)$")
_PARAM = re.compile(r"^--\s*param\s+(\w+):\s*(.+)$")
_INPUT = re.compile(r"^--\s*input:\s*(\w+)\s*$")
_COLUMN = re.compile(r"^--\s*column\s+(\w+)(?:\s+if\s+((?:not\s+)?\w+))?:\s*(.+)$")
_LABEL = re.compile(r"^--\s*label\s+(\w+):\s*(.+)$")
_DEFAULT = re.compile(r"^--\s*default\s+(\w+):\s*(.+)$")
_SHOWN = re.compile(r"^--\s*shown:\s*(.+)$")
_INCLUDE = re.compile(r"/\*\s*include:\s*([\w-]+)\s*\*/")


@cache
def _queries():
    """The folder of the built-in queries (looked up here: `traceql sql` and --help read no query
    file)."""
    return package_folder("traceql.queries")


@dataclass
class QueryColumn:
    name: str
    doc: str
    when: str | None = None  # shown only when this parameter is true ('not PARAM': when it is false)

    def shown(self, values: dict) -> bool:
        """Whether the column is in the result for these parameter values."""
        if self.when is None:
            return True
        if self.when.startswith("not "):
            return not values.get(self.when[4:].strip())
        return bool(values.get(self.when))


@dataclass
class Query:
    name: str
    description: str
    sql: str
    params: dict[str, str] = field(default_factory=dict)
    input: str | None = None  # the contract view a --where filter runs over
    columns: dict[str, QueryColumn] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    origin: str | None = None  # None for a built-in query, else the path of the user's file
    defaults: dict = field(default_factory=dict)  # parameter -> value when none is given
    shown: list[str] | None = None  # the columns a report shows when none are asked for (None: all)


def parse(name: str, text: str, origin: str | None = None) -> Query:
    """A query file's text with its header parsed. Raises ValueError when the first line
    is not '-- NAME: description'."""
    lines = text.splitlines()
    head = _HEAD.match(lines[0]) if lines else None
    if not head or head.group(1) != name:
        raise ValueError(f"must start with '-- {name}: <description>'")
    params = {m.group(1): m.group(2).strip() for m in map(_PARAM.match, lines) if m}
    inputs = [m.group(1) for m in map(_INPUT.match, lines) if m]
    columns = {m.group(1): QueryColumn(m.group(1), m.group(3).strip(), m.group(2))
               for m in map(_COLUMN.match, lines) if m}
    labels = {m.group(1): m.group(2).strip() for m in map(_LABEL.match, lines) if m}
    defaults = {m.group(1): _value(m.group(2).strip()) for m in map(_DEFAULT.match, lines) if m}
    shown = [[c.strip() for c in m.group(1).split(",") if c.strip()] for m in map(_SHOWN.match, lines) if m]
    if shown and set(shown[0]) - set(columns):
        raise ValueError(f"'-- shown:' names undocumented columns: {sorted(set(shown[0]) - set(columns))}")
    return Query(name, head.group(2).strip(), expand(text), params, inputs[0] if inputs else None,
                 columns, labels, origin, defaults, shown[0] if shown else None)


def _value(text: str):
    """A '-- default' value: an integer, a decimal number, true/false, else the text."""
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    if re.fullmatch(r"-?\d+\.\d*", text):
        return float(text)
    return {"true": True, "false": False}.get(text.lower(), text)


@cache
def library() -> dict[str, Query]:
    """The built-in queries (queries/*.sql shipped with traceql, and queries/<folder>/*.sql named
    '<folder>/<file name>')."""
    out = {}
    root = _queries()
    entries = [("", e) for e in root.iterdir()]
    entries += [(f"{d.name}/", e) for d in root.iterdir() if d.is_dir() and not d.name.startswith("_")
                for e in d.iterdir()]
    for prefix, entry in sorted(entries, key=lambda pe: (pe[0] != "", pe[0], pe[1].name)):  # folders' last
        if not entry.is_file() or not entry.name.endswith(".sql"):
            continue
        name = prefix + entry.name[:-4]
        try:
            out[name] = parse(name, entry.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise RuntimeError(f"queries/{name}.sql {exc}") from None
    return out


@cache
def internal() -> dict[str, Query]:
    """The internal queries (queries/_internal/NAME.sql, named '_internal/NAME')."""
    root = _queries() / INTERNAL
    return {f"{INTERNAL}/{e.name[:-4]}": builtin(f"{INTERNAL}/{e.name[:-4]}")
            for e in sorted(root.iterdir(), key=lambda e: e.name) if e.is_file() and e.name.endswith(".sql")}


def user_dirs(dirs=()) -> list[Path]:
    """The user's query folders: $TRACEQL_QUERIES, then `dirs`, each once."""
    env = [Path(p) for p in os.environ.get(ENV, "").split(os.pathsep) if p.strip()]
    out: list[Path] = []
    seen = set()
    for d in env + [Path(d) for d in dirs or ()]:
        key = os.path.realpath(d)
        if key not in seen:
            seen.add(key)
            out.append(d)
    return out


def collection(dirs=()) -> dict[str, Query]:
    """The built-in queries and every NAME.sql of the user's folders (see user_dirs).
    A name given twice is an error: user queries never replace other queries."""
    out = dict(library())
    for folder in user_dirs(dirs):
        if not folder.is_dir():
            raise UsageError(f"{folder}: no such folder of queries (--queries, ${ENV})")
        for path in sorted(folder.glob("*.sql")):
            name = path.stem
            if not re.fullmatch(r"[\w-]+", name):
                raise UsageError(f"{path}: a query's file name must be NAME.sql with letters, digits, _ or -")
            try:
                query = parse(name, path.read_text(encoding="utf-8", errors="replace"), str(path))
            except ValueError as exc:
                raise UsageError(f"{path}: {exc}") from None
            if name in out:
                first = out[name].origin or f"the built-in query {name}"
                raise UsageError(f"{path}: a query named {name!r} exists already ({first}); "
                                 "rename the file: a user query cannot replace another query")
            out[name] = query
    return out


@cache
def builtin(name: str) -> Query | None:
    """The built-in query NAME alone, its file read and parsed without the rest of the library
    (a report reads one query: parsing all of them cost a start-up of the CLI 10-20 ms)."""
    parts = name.split("/")
    if not re.fullmatch(r"[\w-]+(/[\w-]+)?", name) or any(part.startswith("_") for part in parts) \
            and not (len(parts) == 2 and parts[0] == INTERNAL and not parts[1].startswith("_")):
        return None
    entry = _queries()
    for part in name.split("/"):
        entry = entry / part
    entry = entry.with_name(entry.name + ".sql") if hasattr(entry, "with_name") else None
    if entry is None:
        return library().get(name)
    if not entry.is_file():
        return None
    try:
        return parse(name, entry.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise RuntimeError(f"queries/{name}.sql {exc}") from None


def get(name: str, dirs=()) -> Query:
    if name.startswith(INTERNAL + "/"):
        found = builtin(name)
        if found is None:
            raise UsageError(f"no internal query {name!r}; internal queries: {', '.join(internal())}")
        return found
    if not (dirs or os.environ.get(ENV)):
        found = builtin(name)
        if found is not None:
            return found
    lib = collection(dirs) if dirs or os.environ.get(ENV) else library()
    if name not in lib:
        raise UsageError(f"no query {name!r}; queries: {', '.join(lib)}")
    return lib[name]


def bind(query: Query, values: dict) -> dict:
    """Every declared parameter bound: the given value, else its '-- default', else NULL."""
    unknown = set(values) - set(query.params)
    if unknown:
        raise UsageError(f"query {query.name} has no parameter {sorted(unknown)[0]!r}; "
                         f"parameters: {', '.join(query.params) or 'none'}")
    return {p: values[p] if values.get(p) is not None else query.defaults.get(p) for p in query.params}


def placeholders(sql: str) -> set[str]:
    """The $name placeholders of a query's SQL (sqlglot, DuckDB dialect; DuckDB's own parser
    for SQL that sqlglot cannot read, such as x'..' literals). Raises UsageError when neither
    can read it."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import ParseError, TokenError

    try:
        return {ph.name for tree in sqlglot.parse(sql, read="duckdb") if tree is not None
                for ph in tree.find_all(exp.Placeholder) if ph.name}
    except (ParseError, TokenError):
        import duckdb

        from traceql.core.text import one_line_error

        con = duckdb.connect()
        try:
            return {name for st in con.extract_statements(sql) for name in st.named_parameters
                    if not name.isdigit()}
        except duckdb.Error as exc:
            raise UsageError(f"SQL: {one_line_error(str(exc))}") from None
        finally:
            con.close()


def check_placeholders(query: Query) -> None:
    """A query's declared parameters must be exactly its $placeholders."""
    where = query.origin or f"queries/{query.name}.sql"
    try:
        used = placeholders(query.sql)
    except UsageError as exc:
        raise UsageError(f"{where}: {exc}") from None
    undeclared = sorted(used - set(query.params))
    if undeclared:
        raise UsageError(f"{where}: ${undeclared[0]} is not declared; add '-- param {undeclared[0]}: <description>'")
    unused = sorted(set(query.params) - used)
    if unused:
        raise UsageError(f"{where}: parameter {unused[0]!r} is declared but the SQL has no ${unused[0]}")


# --param NAME=VALUE options (traceql sql, query, analyze): here rather than in traceql.query.sqlcheck,
# which loads sqlglot, so that a command given parameters starts as fast as one without.
_PARAM_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_INT = re.compile(r"^[+-]?\d+$")
_FLOAT = re.compile(r"^[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?$")


def parse_params(items) -> dict:
    """`--param NAME=VALUE` options as a dict. A value that reads as an integer is an int,
    one that reads as a decimal number a float, anything else a string (write
    CAST($name AS VARCHAR) in the SQL for a number that must stay text)."""
    out: dict = {}
    for item in items or ():
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not _PARAM_NAME.match(name):
            raise UsageError(f"--param {item}: expected NAME=VALUE, e.g. --param trace_id=1")
        if name in out:
            raise UsageError(f"--param {name}: given twice")
        out[name] = typed_value(value, name)
    return out


def typed_value(value: str, name: str = ""):
    """An integer, a decimal number (ASCII digits only: '١٢٣' stays text) or the text itself; a
    whole number of more digits than DuckDB's widest integer is refused."""
    if not value.isascii():
        return value
    if _INT.match(value):
        digits = value.strip().lstrip("+-")
        if len(digits) > 38:
            raise UsageError(f"--param {name}: a whole number of {len(digits):,} digits; at most 38 (DuckDB's widest "
                             "integer); quote it as text in the query if it is an identifier")
        return int(value)
    if _FLOAT.match(value):
        return float(value)
    return value
