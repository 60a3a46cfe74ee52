"""Ad-hoc SQL made safe to run: what `traceql sql` and Workspace.sql() do with a query.

1. Parse it with sqlglot in its dialect (DuckDB unless --dialect). A syntax error is one
   line with its position: `syntax error at or near "AND" (line 1, column 33)`.
2. Refuse, unless write access was asked for (`--write`, `traceql.open(path, write=True)`),
   every statement that is not a query: DDL, DML, ATTACH, COPY, PRAGMA, SET, CALL, EXPORT,
   transactions, ... Read-only are SELECT/WITH/VALUES/FROM queries, DESCRIBE, SHOW, SUMMARIZE,
   PIVOT and EXPLAIN of a query. INSTALL, LOAD, UPDATE EXTENSIONS and extension settings are
   refused even with write access (check_offline): traceql never reaches the network.
3. Look every view and column up in the workspace's catalog (the contract views and any
   table made with --write). An unknown one is reported with the closest names, from the
   contract and difflib: `no column kernel.duration; did you mean kernel.dur?`. Where a
   name cannot be checked for sure (table functions, files, `*` in a subquery, struct
   fields), the check stays silent and DuckDB's binder has the last word.
4. Bind parameters: `$name` placeholders take the values given (`--param name=value`);
   DuckDB binds them, they never become SQL text. A placeholder without a value and a
   value without a placeholder are errors.
5. Translate another dialect to DuckDB with sqlglot plus the fixes of traceql.query.dialects
   (SQLite integer division, LIKE, CAST, date functions, ...). The SQL that runs is then
   the one sqlglot generated from the checked tree.
6. Let DuckDB's own parser split and classify exactly the text that will run
   (`extract_statements`); without write access anything but SELECT, and EXPLAIN of a
   SELECT, is refused again (EXPLAIN ANALYZE runs what it explains: the explained statement
   is classified by DuckDB's parser too, see explained_kind). This check cannot be fooled by
   a difference between the two parsers, since it is DuckDB reading the very statements
   DuckDB then executes. Without write access the workspace connection is also read-only,
   and every workspace connection has DuckDB's external access off (no file of the machine
   read or written, no extension installed or loaded) unless the user allowed files:
   further lines of defence.

In the DuckDB dialect the user's own text runs (as DuckDB split it), so results and
DuckDB's own error positions are exactly DuckDB's. User SQL is never combined with other
SQL text.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

import duckdb
import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.optimizer.scope import Scope, traverse_scope

from traceql.core.errors import UsageError
from traceql.core.names import RAW_TABLES, closest
from traceql.query.library import parse_params, typed_value  # noqa: F401 - where they were first

# sqlglot logs a warning when it falls back to an opaque Command (LOAD, CALL, ...); we
# classify those ourselves, so keep the warning off the user's terminal.
logging.getLogger("sqlglot").addHandler(logging.NullHandler())
logging.getLogger("sqlglot").propagate = False

DEFAULT_DIALECT = "duckdb"
DIALECTS = tuple(d.value for d in sqlglot.dialects.Dialects if d.value)

# Statements that only read (sqlglot classes), and DuckDB's statement types that only read.
_READ_ONLY = (exp.Select, exp.SetOperation, exp.Values, exp.Subquery, exp.Describe, exp.Show,
              exp.Summarize, exp.Pivot)
_WRITE_NODES = (exp.DML, exp.DDL, exp.Command, exp.Copy, exp.Attach, exp.Detach, exp.Pragma, exp.Set,
                exp.Install, exp.Use, exp.Transaction, exp.Commit, exp.Rollback, exp.TruncateTable)
_DUCKDB_READ = ("SELECT", "EXPLAIN")
# What would fetch or load code: INSTALL/FORCE INSTALL/LOAD (DuckDB's LOAD statement),
# UPDATE EXTENSIONS, and a SET/RESET/PRAGMA of an extension setting (a repository URL,
# autoinstall). Refused even with --write --allow-files: traceql works offline.
_EXTENSION_SETTING = re.compile(r"^\s*(?:SET|RESET|PRAGMA)\s+(?:(?:GLOBAL|SESSION|LOCAL)\s+)?"
                                r"\"?\w*(?:extension|repositor)", re.I)
_UPDATE_EXTENSIONS = re.compile(r"^\s*UPDATE\s+EXTENSIONS\b", re.I)


_FILE_LIKE = re.compile(r"[./\\*]")


@dataclass
class Relation:
    name: str
    columns: list[tuple[str, str]] | None  # (name, DuckDB type); None: not known


class Catalog:
    """The relations a query may name: the workspace's tables and views (with columns),
    and the other names DuckDB resolves (its own catalog views, other schemas)."""

    def __init__(self, relations: dict[str, Relation], others: set[str] = frozenset()):
        self.relations = {k.lower(): v for k, v in relations.items()}
        self.others = {o.lower() for o in others}

    @classmethod
    def of(cls, con: duckdb.DuckDBPyConnection) -> "Catalog":
        rels: dict[str, Relation] = {}
        for table, column, kind in con.execute(
                "SELECT table_name, column_name, data_type FROM system.main.duckdb_columns() "  # (see guard)
                "WHERE database_name = system.main.current_database() AND schema_name = 'main' "
                "ORDER BY table_name, column_index").fetchall():
            rels.setdefault(table.lower(), Relation(table, [])).columns.append((column, kind))
        others = {r[0] for r in con.execute(
            "SELECT view_name FROM system.main.duckdb_views() UNION "
            "SELECT table_name FROM system.main.duckdb_tables()").fetchall()}
        return cls(rels, others)

    @classmethod
    def contract(cls) -> "Catalog":
        from traceql.core.resources import contract_types

        return cls({name: Relation(name, cols) for name, cols in contract_types().items()})

    def relation(self, name: str) -> Relation | None:
        return self.relations.get(name.lower())

    def exists(self, name: str) -> bool:
        return name.lower() in self.relations or name.lower() in self.others

    def with_relation(self, name: str) -> "Catalog":
        """This catalog and a relation an earlier statement of the same query creates."""
        out = Catalog({}, self.others)
        out.relations = {**self.relations, name.lower(): Relation(name, None)}
        return out


@dataclass
class Step:
    """One statement to run: DuckDB's parsed statement and the parameters it uses."""
    statement: object  # duckdb.Statement
    params: dict | list | None
    writes: bool


# ---------------------------------------------------------------------------- entry point

def prepare(text: str, con: duckdb.DuckDBPyConnection, catalog: Catalog, *, dialect: str | None = None,
            params=None, write: bool = False) -> list[Step]:
    """Check `text` and return the statements to run (see the module documentation).

    params: a dict for $name placeholders, or a list for positional ones (? or $1).
    Raises UsageError with a one-line reason."""
    try:
        return _prepare(text, con, catalog, dialect=dialect, params=params, write=write)
    except RecursionError:  # sqlglot parses and walks the tree recursively
        raise UsageError(TOO_DEEP) from None


TOO_DEEP = "SQL: nested too deeply to check (parentheses, subqueries or CASE more than about 50 levels deep)"


def _prepare(text: str, con: duckdb.DuckDBPyConnection, catalog: Catalog, *, dialect: str | None = None,
             params=None, write: bool = False) -> list[Step]:
    dialect = check_dialect(dialect)
    if text is None or not text.strip():
        raise UsageError("SQL: empty query")
    if params is not None and not isinstance(params, (dict, list, tuple)):
        raise UsageError("SQL: parameters are a dict ($name placeholders) or a list (? placeholders)")
    try:  # refused with or without --write: said before "add --write" could be
        for st in con.extract_statements(text):
            check_offline(st.type.name, st.query)
    except duckdb.Error:
        pass  # not DuckDB's SQL (another dialect, a syntax error): checked below as it runs
    trees = _parse(text, dialect, con)
    if trees is not None:
        for tree in trees:
            if not write and not is_read_only(tree) and not _is_explain(tree):
                raise UsageError(refusal(statement_keyword(tree, dialect)))
        for tree in trees:
            try:
                check_names(tree, catalog)
            except UsageError:
                raise
            except Exception:  # noqa: BLE001 - sqlglot cannot analyse it: DuckDB's binder checks the names
                pass
            created = _created_relation(tree)
            if created:
                catalog = catalog.with_relation(created)
        named, positional = tree_placeholders(trees)
        check_params(named, positional, params)
        if dialect != DEFAULT_DIALECT:
            from traceql.query.dialects import to_duckdb

            texts = [to_duckdb(tree, dialect) for tree in trees]
        else:
            texts = [text]
    else:
        texts = [text]

    steps: list[Step] = []
    for sql in texts:
        try:
            statements = con.extract_statements(sql)
        except duckdb.Error as exc:
            from traceql.core.text import one_line_error

            raise UsageError(f"SQL: {one_line_error(str(exc))}") from None
        for st in statements:
            kind = st.type.name
            if kind == "EXPLAIN":  # EXPLAIN ANALYZE runs the statement it explains: classify that one
                kind = explained_kind(con, st.query)
            check_offline(kind, st.query)
            if kind not in _DUCKDB_READ and not write:
                if trees is not None and any(isinstance(t, exp.Pivot) for t in trees):
                    raise UsageError("SQL: a PIVOT without an IN list makes DuckDB create a type first; "
                                     "list the values (PIVOT ... ON column IN (...)) or add --write")
                raise UsageError(refusal(kind))
            steps.append(Step(st, None, kind not in _DUCKDB_READ))
    if not steps:
        raise UsageError("SQL: empty query")
    _distribute_params(steps, params)
    return steps


# What may stand between EXPLAIN and the statement it explains: blanks and comments, ANALYZE
# (or ANALYSE), and a parenthesized option list such as (FORMAT json) or (ANALYZE, FORMAT json).
_BLANK = re.compile(r"(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/)*", re.S)
_EXPLAIN = re.compile(r"EXPLAIN\b", re.I)
_ANALYZE = re.compile(r"ANALY[SZ]E\b", re.I)


def explained_kind(con, text: str) -> str:
    """DuckDB's statement type of what an EXPLAIN statement explains: 'SELECT' for a query,
    'COPY', 'INSERT', ... for a statement that EXPLAIN ANALYZE would run, so that it is
    refused like the statement itself. Decided by DuckDB's parser reading the text after
    EXPLAIN [ANALYZE]; when an option list may or may not be there, every reading DuckDB
    accepts must be a query. Anything that cannot be read that way is 'EXPLAIN ...' (refused
    without write access): unclassified text never passes."""
    pos = _BLANK.match(text).end()
    m = _EXPLAIN.match(text, pos)
    if not m:
        return "EXPLAIN of a statement traceql cannot classify"
    pos = _BLANK.match(text, m.end()).end()
    analyze = _ANALYZE.match(text, pos)
    if analyze:
        pos = _BLANK.match(text, analyze.end()).end()
    rests = [text[pos:]]
    if text.startswith("(", pos):  # an option list, or a parenthesized query: try both
        end = _closing_paren(text, pos)
        if end is not None:
            rests.append(text[end + 1:])
    kinds = []
    for rest in rests:
        try:
            statements = con.extract_statements(rest)
        except duckdb.Error:
            continue
        if not statements:  # '(FORMAT json)' read as the statement: nothing after it
            continue
        if len(statements) > 1:
            return "EXPLAIN of a statement traceql cannot classify"
        inner = statements[0].type.name
        kinds.append(explained_kind(con, statements[0].query) if inner == "EXPLAIN" else inner)
    if not kinds:
        return "EXPLAIN of a statement traceql cannot classify"
    writes = [k for k in kinds if k not in _DUCKDB_READ]
    if writes:
        return f"EXPLAIN {'ANALYZE ' if analyze else ''}{writes[0]}"
    return "SELECT"


def _closing_paren(text: str, start: int) -> int | None:
    """The index of the parenthesis closing the one at text[start], skipping quoted text;
    None when it is not closed."""
    depth, i, n = 0, start, len(text)
    while i < n:
        ch = text[i]
        if ch in "'\"":
            j = text.find(ch, i + 1)
            while j != -1 and text.startswith(ch * 2, j):  # a doubled quote inside the quotes
                j = text.find(ch, j + 2)
            if j == -1:
                return None
            i = j
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return None


def check_dialect(dialect: str | None) -> str:
    d = (dialect or DEFAULT_DIALECT).lower()
    if d not in DIALECTS:
        raise UsageError(f"--dialect {dialect}: unknown SQL dialect; dialects: {', '.join(sorted(DIALECTS))}")
    return d


def check_offline(kind: str, text: str) -> None:
    """UsageError for a statement that would install, load or update a DuckDB extension, or
    change where or whether DuckDB fetches one: traceql never reaches the network."""
    words = text.split()
    if kind == "LOAD":
        what = " ".join(w.upper() for w in words[:2] if w.upper() in ("FORCE", "INSTALL", "LOAD"))
    elif _UPDATE_EXTENSIONS.match(text):
        what = "UPDATE EXTENSIONS"
    elif kind == "SET" and _EXTENSION_SETTING.match(text):
        what = f"{words[0].upper()} of an extension setting"
    else:
        return
    raise UsageError(f"SQL: {what} is refused: traceql works offline, with the extensions of its own "
                     "package (none is installed, loaded or configured, even with --write)")


def refusal(keyword: str) -> str:
    return (f"SQL: {keyword} is not a query: it can change the workspace or write files; "
            f"add --write to run it")


# ---------------------------------------------------------------------------- parsing

def _parse(text: str, dialect: str, con) -> list[exp.Expression] | None:
    """The statements as sqlglot trees, or None when sqlglot cannot read DuckDB SQL that
    DuckDB's parser accepts (then DuckDB's classification alone decides)."""
    try:
        trees = [t for t in sqlglot.parse(text, read=dialect) if t is not None]
    except ParseError as exc:
        if dialect == DEFAULT_DIALECT and _duckdb_parses(con, text):
            return None
        raise UsageError(syntax_message(exc)) from None
    except TokenError as exc:
        if dialect == DEFAULT_DIALECT:
            try:
                con.extract_statements(text)
                return None
            except duckdb.Error as err:
                from traceql.core.text import one_line_error

                raise UsageError(f"SQL: {one_line_error(str(err))}") from None
        raise UsageError(f"SQL: syntax error: {_first_line(exc)}") from None
    if not trees:
        raise UsageError("SQL: empty query")
    return trees


def _duckdb_parses(con, text: str) -> bool:
    try:
        con.extract_statements(text)
        return True
    except duckdb.Error:
        return False


def syntax_message(exc: ParseError) -> str:
    """sqlglot's parse error as one line with the position where the offending token starts."""
    err = exc.errors[0] if exc.errors else {}
    line, col, token = err.get("line"), err.get("col"), (err.get("highlight") or "")
    if line is None:
        return f"SQL: syntax error: {_first_line(exc)}"
    start = col - len(token) + 1 if token and "\n" not in token else col
    near = f' at or near "{token}"' if token else " at the end of the query"
    out = f"SQL: syntax error{near} (line {line}, column {max(start, 1)})"
    desc = (err.get("description") or "").strip()
    if desc.startswith("Expecting") or desc.startswith("Expected"):
        out += ": " + desc[0].lower() + desc[1:]
    elif desc.startswith("Required keyword"):
        out += ": incomplete expression"
    return out


# ---------------------------------------------------------------------------- read or write

def is_read_only(tree: exp.Expression) -> bool:
    """True when the statement only reads: a query (without INTO and without data-changing
    parts), DESCRIBE, SHOW, SUMMARIZE, PIVOT, or EXPLAIN of one of those."""
    if isinstance(tree, exp.Command) and tree.name.upper() == "EXPLAIN":
        rest = tree.expression.name if isinstance(tree.expression, exp.Literal) else str(tree.expression or "")
        rest = re.sub(r"^\s*ANALY[SZ]E\b", "", rest, flags=re.I)
        try:
            inner = [t for t in sqlglot.parse(rest, read=DEFAULT_DIALECT) if t is not None]
        except (ParseError, TokenError):
            return False
        return len(inner) == 1 and is_read_only(inner[0])
    if not isinstance(tree, _READ_ONLY):
        return False
    if any(isinstance(node, _WRITE_NODES) for node in tree.walk()):
        return False
    return not any(node.args.get("into") for node in tree.find_all(exp.Select))


def _is_explain(tree: exp.Expression) -> bool:
    """An EXPLAIN that sqlglot keeps as an opaque command: DuckDB's parser classifies what it
    explains (explained_kind), which reads every form DuckDB accepts."""
    return isinstance(tree, exp.Command) and tree.name.upper() == "EXPLAIN"


def statement_keyword(tree: exp.Expression, dialect: str) -> str:
    """The statement's first keyword(s) as the user would name it: DROP, COPY, ATTACH, ..."""
    if isinstance(tree, _READ_ONLY):  # a query with a part that writes: name that part
        part = next((n for n in tree.walk() if isinstance(n, _WRITE_NODES)), None)
        if part is None:
            return "SELECT INTO"
        tree = part
    if isinstance(tree, exp.Command):
        return str(tree.this).upper()
    if isinstance(tree, (exp.Insert, exp.Update, exp.Delete, exp.Merge)):
        return tree.key.upper()
    try:
        words = tree.sql(dialect=dialect, comments=False).split()
    except Exception:  # noqa: BLE001 - only for the message
        words = []
    if not words:
        return tree.key.upper()
    if words[0].upper() in ("CREATE", "DROP") and len(words) > 1:
        kinds = ("TABLE", "VIEW", "SCHEMA", "MACRO", "FUNCTION", "INDEX", "SEQUENCE", "TYPE", "SECRET")
        rest = [w.upper() for w in words[1:5]]
        kind = next((w for w in rest if w in kinds), None)
        return f"{words[0].upper()} {kind}" if kind else words[0].upper()
    return words[0].upper()


# ---------------------------------------------------------------------------- names

def check_names(tree: exp.Expression, catalog: Catalog) -> None:
    """Raise UsageError for a view or column that does not exist (see the module doc)."""
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    if isinstance(tree, (exp.Describe, exp.Summarize)) and isinstance(tree.this, exp.Table):
        _check_table(tree.this, catalog, ctes)
    for root in _query_roots(tree):
        for scope in traverse_scope(root):
            sources = {}
            for alias, source in scope.sources.items():
                if isinstance(source, exp.Table):
                    _check_table(source, catalog, ctes)
                sources[alias] = _source_columns(source, catalog)
            _check_columns(scope, sources, catalog)


def _query_roots(tree: exp.Expression) -> list[exp.Expression]:
    if isinstance(tree, (exp.Query, exp.Subquery)):
        return [tree]
    if isinstance(tree, exp.Describe) and isinstance(tree.this, exp.Query):
        return [tree.this]
    # a write statement (CREATE TABLE ... AS SELECT, INSERT ... SELECT): its queries
    return [q for q in tree.find_all(exp.Query)
            if not isinstance(q.parent, (exp.Query, exp.Subquery)) and q.find_ancestor(exp.Query) is None]


def _check_table(table: exp.Table, catalog: Catalog, ctes: set[str]) -> None:
    if not isinstance(table.this, exp.Identifier) or table.args.get("db") or table.args.get("catalog"):
        return  # a table function, or a name in another schema: DuckDB resolves it
    name = table.name
    if name.lower() in ctes or catalog.exists(name) or _FILE_LIKE.search(name):
        return
    raise UsageError(f"SQL: {unknown_view_message(name, catalog)}")


def unknown_view_message(name: str, catalog: Catalog) -> str:
    from traceql.core.resources import contract_docs

    contract = list(contract_docs())
    user = [r.name for k, r in catalog.relations.items() if k not in contract]
    raw = RAW_TABLES.get(name.lower())
    if raw:
        return (f"no view {name}; did you mean {raw}? (traceql's view of that profiler table; "
                f"see traceql schema {raw})")
    best = closest(name, contract + user)
    if best:
        return f"no view {name}; did you mean {best}?"
    return f"no view {name}; views: {', '.join(contract + user)}"


def _source_columns(source, catalog: Catalog) -> list[tuple[str, str]] | None:
    """The columns a FROM source offers (name, type), or None when they are not known."""
    if isinstance(source, exp.Table):
        alias = source.args.get("alias")
        if alias is not None and alias.columns:
            return None  # columns renamed by the alias
        if not isinstance(source.this, exp.Identifier) or source.args.get("db") or source.args.get("catalog"):
            return None
        rel = catalog.relation(source.name)
        return rel.columns if rel is not None else None
    if isinstance(source, Scope):
        expression = source.expression
        holder = expression.parent
        alias = holder.args.get("alias") if holder is not None else None
        if isinstance(alias, exp.TableAlias) and alias.columns:
            return [(c.name, "") for c in alias.columns]
        if not isinstance(expression, exp.Query):
            return None
        selects = expression.selects
        if any(s.is_star or isinstance(s, exp.Star) or s.find(exp.Star, exp.Columns) or not s.alias_or_name
               for s in selects):
            return None
        if any(isinstance(s, exp.Column) and s.is_star for s in selects):
            return None
        return [(s.alias_or_name, "") for s in selects]
    return None


def _check_columns(scope: Scope, sources: dict, catalog: Catalog) -> None:
    aliases = {s.alias.lower() for s in getattr(scope.expression, "selects", []) if isinstance(s, exp.Alias)}
    for col in scope.columns:
        if col.is_star or col.args.get("db") or col.args.get("catalog") or not col.name:
            continue
        name = col.name
        if col.table:
            found, columns = _lookup_source(scope, sources, col.table, catalog)
            if not found or columns is None:
                continue  # a struct field (s.a where s is a column), or columns not known
            if name.lower() in {c.lower() for c, _ in columns}:
                continue
            raise UsageError(f"SQL: {unknown_column_message(col.table, name, [c for c, _ in columns])}")
        else:
            if isinstance(scope.expression, exp.Select) and col.find_ancestor(exp.Select) is not scope.expression:
                continue  # a column of a correlated subquery (its own scope checks it)
            visible = list(_visible_sources(scope, sources, catalog))
            if not visible:
                continue  # no FROM: DuckDB says what it is
            if any(cols is None for _, cols in visible):
                continue  # a source whose columns we do not know may have it
            if any(name.lower() in {c.lower() for c, _ in cols} for _, cols in visible):
                continue
            if name.lower() in aliases or name.lower() in {a.lower() for a, _ in visible} or name.lower() == "rowid":
                continue  # a select alias, a whole row as a struct, the row id
            own = [(a, cols) for a, cols in visible[:len(sources)]]
            raise UsageError(f"SQL: {unqualified_column_message(name, own or visible)}")


def _lookup_source(scope: Scope, sources: dict, qualifier: str, catalog: Catalog):
    current, current_sources = scope, sources
    while current is not None:
        for alias, cols in current_sources.items():
            if alias.lower() == qualifier.lower():
                return True, cols
        current = current.parent
        current_sources = ({a: _source_columns(s, catalog) for a, s in current.sources.items()}
                           if current is not None else {})
    return False, None


def _visible_sources(scope: Scope, sources: dict, catalog: Catalog):
    """(alias, columns) of this scope's sources, then of the enclosing scopes' (correlated
    subqueries may name those)."""
    yield from sources.items()
    parent = scope.parent
    while parent is not None:
        for alias, source in parent.sources.items():
            yield alias, _source_columns(source, catalog)
        parent = parent.parent


def unknown_column_message(qualifier: str, name: str, columns: list[str]) -> str:
    best = closest(name, columns)
    if best:
        return f"no column {qualifier}.{name}; did you mean {qualifier}.{best}?"
    return f"no column {qualifier}.{name}; columns of {qualifier}: {', '.join(columns)}"


def unqualified_column_message(name: str, visible: list) -> str:
    if len(visible) == 1:
        alias, cols = visible[0]
        return unknown_column_message(alias, name, [c for c, _ in cols])
    candidates = {f"{alias}.{c}": c for alias, cols in visible for c, _ in cols}
    best = closest(name, list(candidates.values()))
    where = ", ".join(alias for alias, _ in visible)
    if best:
        qualified = next(k for k, v in candidates.items() if v == best)
        return f"no column {name} in {where}; did you mean {qualified}?"
    return f"no column {name} in {where}"


def _created_relation(tree: exp.Expression) -> str | None:
    if isinstance(tree, exp.Create) and str(tree.args.get("kind") or "").upper() in ("TABLE", "VIEW"):
        target = tree.this.this if isinstance(tree.this, exp.Schema) else tree.this
        if isinstance(target, exp.Table):
            return target.name
    return None


# ---------------------------------------------------------------------------- parameters

def tree_placeholders(trees) -> tuple[list[str], int]:
    """Named placeholders ($name, :name) in order of first use, and the number of
    positional ones (?, $1)."""
    named: list[str] = []
    positional = 0
    for tree in trees:
        for ph in tree.find_all(exp.Placeholder, exp.Parameter):
            this = ph.args.get("this")
            key = this.name if isinstance(this, exp.Expression) else str(this or "")
            if not key or key == "?" or key.isdigit():
                positional += 1
            elif key not in named:
                named.append(key)
    return named, positional


def check_params(named: list[str], positional: int, params) -> None:
    if isinstance(params, dict):
        if positional:
            raise UsageError("SQL: positional placeholders (? or $1) take no --param values; "
                             "name them instead: $name")
        missing = [n for n in named if n not in params]
        if missing:
            raise UsageError(f"SQL: no value for ${missing[0]}; give --param {missing[0]}=VALUE")
        extra = [n for n in params if n not in named]
        if extra:
            raise UsageError(f"--param {extra[0]}: the query has no ${extra[0]}"
                             + (f" (its parameters: {', '.join('$' + n for n in named)})" if named else ""))
    elif params is None or len(params) == 0:
        if named:
            raise UsageError(f"SQL: no value for ${named[0]}; give --param {named[0]}=VALUE")
        if positional:
            raise UsageError("SQL: the query has positional placeholders (?) but no values")
    elif named:
        raise UsageError(f"SQL: ${named[0]} is a named placeholder: give the values by name")


def _distribute_params(steps: list[Step], params) -> None:
    if not params:
        return
    if isinstance(params, dict):
        for step in steps:
            used = set(step.statement.named_parameters)
            step.params = {k: v for k, v in params.items() if k in used} or None
        return
    with_params = [s for s in steps if s.statement.named_parameters]
    if len(with_params) > 1:
        raise UsageError("SQL: positional parameter values apply to one statement; "
                         "use named ($name) placeholders with several statements")
    for step in with_params:
        step.params = list(params)


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
