"""SQL written for another engine, run on DuckDB: `traceql sql --dialect sqlite|postgres|...`.

sqlglot translates the syntax. Where a function or operator means something else in
DuckDB than in the source engine, sqlglot often keeps the spelling and leaves the meaning
to the target; these are the fixes traceql adds, so that the answer is the source
engine's answer:

Every dialect whose `/` is typed (SQLite, Postgres, Trino, T-SQL, ...):
- `a / b` becomes DuckDB's `a // b`. In DuckDB `//` divides integers as integers
  (truncating toward zero, NULL for a zero divisor) and anything else as floats, which is
  exactly SQLite's `/` at run time, whatever the operands' types: `7 / 2` is 3, `7.0 / 2`
  is 3.5, `ts / 1000` stays exact for ns timestamps beyond 2^53. sqlglot's own rewrite
  needs the operand types and falls back to a DOUBLE division for columns.

SQLite:
- LIKE ignores case in SQLite (ASCII): it becomes ILIKE. GLOB stays GLOB.
- CAST(x AS INTEGER) truncates a REAL toward zero in SQLite but rounds in DuckDB: for an
  operand that is a floating-point or decimal number (literal, column, avg(), ...) it
  becomes CAST(TRUNC(x) AS BIGINT).
- total(x): the sum as a REAL, 0.0 for no rows (DuckDB has no total()).
- A comparison used as a value (`SELECT dur > 1000`, `sum(x = 1)`, `'n=' || (a = b)`) is
  0 or 1 in SQLite: it is cast to INTEGER instead of printing true/false.
- Date and time functions take SQLite's (time value, modifier...) arguments, which DuckDB
  does not know: strftime(format, value, modifiers...), date(), time(), datetime(),
  julianday() and unixepoch() are rebuilt from DuckDB functions. The time value is a
  'YYYY-MM-DD[ HH:MM[:SS[.SSS]]]' text, 'now', or a number: a Julian day number, or Unix
  seconds with the 'unixepoch' modifier. Modifiers: 'unixepoch', 'julianday', 'subsec',
  '+N days|hours|minutes|seconds' (N may be fractional or negative), 'start of
  day|month|year'. Format codes: %Y %m %d %H %M %S %f (SS.SSS) %s (Unix seconds) %j %w
  %W %u %I %p %F %T %R %%. Times are UTC as in SQLite; 'localtime', 'utc', months, years,
  'weekday N' and %J are refused with a message rather than answered differently.
- ifnull(), iif(), instr(), substr(), group_concat(), max(a, b), `||`, `==`, IS / IS NOT:
  sqlglot's translation is right as it is.

Known remaining differences: a REAL turned into text (`x || ''`, CAST(x AS TEXT)) shows
DuckDB's shortest round-trip digits (0.30000000000000004) where SQLite rounds to 15
significant digits (0.3); typeof() names DuckDB's types; SQLite's flexible typing (text
in an integer column, '12abc' cast to 12) is not imitated.

The input is a tree sqlglot parsed; every fix builds DuckDB nodes from fixed templates and
the user's own subtrees, never from the user's text.
"""

from __future__ import annotations

import re

import sqlglot
from sqlglot import exp
from sqlglot.errors import ErrorLevel, UnsupportedError

from traceql.core.errors import UsageError

_FLOAT_TYPES = {exp.DType.DOUBLE, exp.DType.FLOAT, exp.DType.DECIMAL, getattr(exp.DType, "BIGDECIMAL", None)}
_INT_TYPES = exp.DataType.INTEGER_TYPES


def to_duckdb(tree: exp.Expression, dialect: str) -> str:
    """DuckDB SQL for one statement parsed in `dialect`."""
    tree = tree.copy()
    if sqlglot.Dialect.get_or_raise(dialect).TYPED_DIVISION:
        _typed_division(tree)
    if dialect == "sqlite":
        _sqlite(tree)
    try:
        return tree.sql(dialect="duckdb", unsupported_level=ErrorLevel.RAISE)
    except UnsupportedError as exc:
        raise UsageError(f"--dialect {dialect}: cannot translate to DuckDB: {str(exc).splitlines()[0]}") from None


def _typed_division(tree: exp.Expression) -> None:
    for div in list(tree.find_all(exp.Div)):
        if div.args.get("typed"):
            div.replace(exp.IntDiv(this=div.this, expression=div.expression))


# ---------------------------------------------------------------------------- SQLite

def _sqlite(tree: exp.Expression) -> None:
    from sqlglot.optimizer.annotate_types import annotate_types

    try:
        _set_column_types(tree)
        annotate_types(tree, dialect="sqlite", overwrite_types=False)
    except Exception:  # noqa: BLE001 - types only sharpen the CAST fix; unknown is fine
        pass

    for like in list(tree.find_all(exp.Like)):
        like.replace(exp.ILike(this=like.this, expression=like.expression))
    for cast in list(tree.find_all(exp.Cast)):
        if cast.to.this in _INT_TYPES and cast.this.type is None:
            try:  # the annotator does not look inside a CAST, whose own type is known
                annotate_types(cast.this, dialect="sqlite", overwrite_types=False)
            except Exception:  # noqa: BLE001
                pass
        if cast.to.this in _INT_TYPES and _is_float(cast.this):
            cast.replace(exp.cast(exp.func("trunc", cast.this.copy()), exp.DType.BIGINT))
    for call in list(tree.find_all(exp.Anonymous)):
        if call.name.lower() == "total" and len(call.expressions) == 1:
            call.replace(_tpl("CAST(coalesce(sum(__x), 0) AS DOUBLE)", x=call.expressions[0]))
    _time_functions(tree)
    _booleans_as_integers(tree)


def _set_column_types(tree: exp.Expression) -> None:
    """Columns of the contract views get their DuckDB types, so that CAST knows a REAL."""
    from sqlglot.optimizer.scope import traverse_scope

    from traceql.core.resources import contract_types

    types = {name: {c.lower(): t for c, t in cols} for name, cols in contract_types().items()}
    for root in [tree] if isinstance(tree, exp.Query) else list(tree.find_all(exp.Query))[:1]:
        for scope in traverse_scope(root):
            tables = {alias: types.get(src.name.lower()) for alias, src in scope.sources.items()
                      if isinstance(src, exp.Table) and isinstance(src.this, exp.Identifier)}
            for col in scope.columns:
                owners = [tables.get(col.table)] if col.table else list(tables.values())
                hits = [o[col.name.lower()] for o in owners if o and col.name.lower() in o]
                if len(hits) == 1:
                    col.type = exp.DataType.build(hits[0], dialect="duckdb")


def _is_float(node: exp.Expression) -> bool:
    t = node.type
    return t is not None and t.this in _FLOAT_TYPES


def _booleans_as_integers(tree: exp.Expression) -> None:
    """A comparison whose value is used (projected, computed with, aggregated) is 0/1."""
    value_contexts = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.IntDiv, exp.Mod, exp.DPipe, exp.Neg,
                      exp.AggFunc, exp.Greatest, exp.Least, exp.Coalesce, exp.Nullif, exp.Abs)
    for node in list(tree.find_all(exp.Predicate, exp.Connector, exp.Not, exp.Boolean)):
        if isinstance(node, (exp.Placeholder, exp.Parameter)):
            continue
        holder = node.parent
        child = node
        while isinstance(holder, exp.Paren):
            child, holder = holder, holder.parent
        if isinstance(holder, (exp.Predicate, exp.Connector, exp.Not)):
            continue  # part of a larger condition: the outermost one decides
        projected = (isinstance(holder, exp.Select) and child in holder.expressions) or \
            (isinstance(holder, exp.Alias) and isinstance(holder.parent, exp.Select))
        if projected or isinstance(holder, value_contexts):
            node.replace(exp.cast(exp.paren(node.copy(), copy=False), exp.DType.INT))


# ---------------------------------------------------------------------------- date and time

_SAME = set("YmdHMSjwWuIp%")
_EXPAND = {"F": "%Y-%m-%d", "T": "%H:%M:%S", "R": "%H:%M", "f": "%S.%g"}
_UNITS_US = {"day": 86_400_000_000, "hour": 3_600_000_000, "minute": 60_000_000, "second": 1_000_000}
_SHIFT = re.compile(r"^\s*([+-]?(?:\d+\.?\d*|\.\d+))\s+(day|hour|minute|second)s?\s*$", re.I)
_START = re.compile(r"^\s*start\s+of\s+(day|month|year)\s*$", re.I)
_FIXED = {"date": "%Y-%m-%d", "time": "%H:%M:%S", "datetime": "%Y-%m-%d %H:%M:%S"}


def _time_functions(tree: exp.Expression) -> None:
    for node in list(tree.find_all(exp.TimeToStr, exp.Date, exp.Anonymous)):
        if isinstance(node, exp.TimeToStr):
            value = node.this.this if isinstance(node.this, exp.TsOrDsToTimestamp) else node.this
            if isinstance(value, exp.CurrentTimestamp):
                value = None
            node.replace(_strftime(node.args["format"], value, []))
        elif isinstance(node, exp.Date):
            node.replace(_strftime(exp.Literal.string("%Y-%m-%d"), node.this, [], "date"))
        else:
            name = node.name.lower()
            args = list(node.expressions)
            if name == "strftime" and args:
                node.replace(_strftime(args[0], args[1] if len(args) > 1 else None, args[2:]))
            elif name in _FIXED:
                node.replace(_strftime(exp.Literal.string(_FIXED[name]), args[0] if args else None, args[1:],
                                       name))
            elif name in ("julianday", "unixepoch"):
                ts, subsec = _timestamp(args[0] if args else None, args[1:], name)
                if name == "julianday":
                    node.replace(_tpl("epoch_ms(__t) / 86400000.0 + 2440587.5", t=ts))
                elif subsec:
                    node.replace(_tpl("epoch_ms(__t) / 1000.0", t=ts))
                else:
                    node.replace(_tpl("epoch_ms(__t) // 1000", t=ts))


def _strftime(fmt: exp.Expression, value, modifiers, function: str = "strftime") -> exp.Expression:
    if not (isinstance(fmt, exp.Literal) and fmt.is_string):
        raise UsageError(f"--dialect sqlite: {function}(): the format must be a string literal")
    ts, subsec = _timestamp(value, modifiers, function)
    text = fmt.this
    if subsec and function in ("time", "datetime"):
        text = text.replace("%S", "%f")  # SS.SSS
    parts: list = []  # DuckDB format strings and expressions, in order
    i = 0
    while i < len(text):
        if text[i] != "%":
            fragment = text[i]
            i += 1
        else:
            code = text[i + 1] if i + 1 < len(text) else ""
            i += 2
            if code in _SAME:
                fragment = "%" + code
            elif code in _EXPAND:
                fragment = _EXPAND[code]
            elif code == "s":
                parts.append(_tpl("CAST(epoch_ms(__t) // 1000 AS VARCHAR)", t=ts))
                continue
            else:
                raise UsageError(f"--dialect sqlite: {function}(): the format code %{code} is not supported; "
                                 f"supported: %Y %m %d %H %M %S %f %s %j %w %W %u %I %p %F %T %R %%")
        if parts and isinstance(parts[-1], str):
            parts[-1] += fragment
        else:
            parts.append(fragment)
    if not parts:
        return exp.Literal.string("")
    pieces = [p if isinstance(p, exp.Expression) else _tpl("strftime(__t, __f)", t=ts, f=exp.Literal.string(p))
              for p in parts]
    out = pieces[0]
    for piece in pieces[1:]:
        out = exp.DPipe(this=out, expression=piece)
    return out


def _timestamp(value, modifiers, function: str) -> tuple[exp.Expression, bool]:
    """A DuckDB TIMESTAMP (UTC) for SQLite's time value and modifiers, and whether the
    'subsec' modifier was given."""
    mods = []
    for m in modifiers:
        if not (isinstance(m, exp.Literal) and m.is_string):
            raise UsageError(f"--dialect sqlite: {function}(): modifiers must be string literals")
        mods.append(m.this.strip())
    numeric_as = "julian"
    if mods and mods[0].lower() in ("unixepoch", "julianday"):
        numeric_as = "unix" if mods.pop(0).lower() == "unixepoch" else "julian"
    subsec = False

    if value is None or (isinstance(value, exp.Literal) and value.is_string and value.this.lower() == "now"):
        ts = _tpl("make_timestamp(epoch_us(get_current_timestamp()))")
    elif isinstance(value, exp.Literal) and value.is_string and numeric_as == "julian":
        if not re.match(r"^\s*\d{4}-\d\d-\d\d", value.this) and _number(value.this) is not None:
            ts = _from_number(exp.Literal.number(value.this.strip()), numeric_as)  # a Julian day as text
        else:
            ts = _tpl("try_cast(__v AS TIMESTAMP)", v=value)
    elif isinstance(value, exp.Literal) and not value.is_string:
        ts = _from_number(value, numeric_as)
    elif value.type is not None and (value.type.this in _INT_TYPES or value.type.this in _FLOAT_TYPES):
        ts = _from_number(value, numeric_as)
    elif numeric_as == "unix":
        ts = _from_number(_tpl("try_cast(CAST(__v AS VARCHAR) AS DOUBLE)", v=value), numeric_as)
    else:
        # text or a number, known only at run time: a date text first, else a number
        ts = exp.func("coalesce", _tpl("try_cast(CAST(__v AS VARCHAR) AS TIMESTAMP)", v=value),
                      _from_number(_tpl("try_cast(CAST(__v AS VARCHAR) AS DOUBLE)", v=value), numeric_as))

    for m in mods:
        low = m.lower()
        shift = _SHIFT.match(m)
        start = _START.match(m)
        if low in ("subsec", "subsecond"):
            subsec = True
        elif shift:
            micros = round(float(shift.group(1)) * _UNITS_US[shift.group(2).lower()])
            ts = _tpl("__t + to_microseconds(__n)", t=ts, n=exp.Literal.number(micros))
        elif start:
            ts = exp.Anonymous(this="date_trunc", expressions=[exp.Literal.string(start.group(1).lower()), ts])
        else:
            raise UsageError(f"--dialect sqlite: {function}(): the modifier {m!r} is not supported; supported: "
                             "'unixepoch', 'julianday', 'subsec', '+N days|hours|minutes|seconds', "
                             "'start of day|month|year' (times are UTC)")
    return ts, subsec


def _from_number(value: exp.Expression, numeric_as: str) -> exp.Expression:
    if numeric_as == "unix":  # SQLite keeps milliseconds
        return _tpl("make_timestamp(CAST(round(CAST(__v AS DOUBLE) * 1000) AS BIGINT) * 1000)", v=value)
    return _tpl("make_timestamp(CAST(round((__v - 2440587.5) * 86400000) AS BIGINT) * 1000)", v=value)


def _number(text: str):
    try:
        return float(text)
    except ValueError:
        return None


def _tpl(sql: str, **nodes: exp.Expression) -> exp.Expression:
    """A DuckDB expression from a fixed template; `__name` columns are replaced by nodes."""
    tree = sqlglot.parse_one(sql, read="duckdb")
    for col in list(tree.find_all(exp.Column)):
        if col.name.startswith("__") and col.name[2:] in nodes:
            col.replace(nodes[col.name[2:]].copy())
    return tree
