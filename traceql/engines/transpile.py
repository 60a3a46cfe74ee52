"""The query library's DuckDB SQL as Spark SQL: one source, translated by sqlglot.

The library (queries/*.sql) is written for DuckDB and stays the only copy of each query.
to_spark() parses it with sqlglot's DuckDB dialect and writes it with its Spark dialect; sqlglot
handles the syntax (`$name` placeholders become Spark's `:name` markers, `string_agg(DISTINCT x,
', ' ORDER BY x)` LISTAGG ... WITHIN GROUP, `list_filter` FILTER, `IS NOT DISTINCT FROM` `<=>`,
DuckDB's NULLS LAST default made explicit where Spark's differs, ...). Where the two engines give
the same syntax different meanings, the tree is rewritten first so that Spark computes what
DuckDB computes (each rule below says which difference it removes):

- `string_agg(DISTINCT x, sep ORDER BY x)` becomes `array_join(array_sort(collect_set(x)), sep)`
  (NULL when there is no value): Spark 4.0's LISTAGG(DISTINCT) WITHIN GROUP fails beside another
  DISTINCT aggregate or under FILTER.
- `a / b` is a DOUBLE in DuckDB whatever the operands (a DECIMAL in Spark when one is a decimal,
  as `100.0 * total_ns` is): the dividend is cast to DOUBLE.
- `round(x, d)` of a DOUBLE is DuckDB's `round(x * 10^d) / 10^d` in binary floating point, where
  Spark rounds the shortest decimal text of x: written out as DuckDB computes it.
- A DOUBLE cast to an integer type rounds in DuckDB, half to even (15228.5 -> 15228, a median
  of two integers), and truncates in Spark: rounded first by BROUND (half to even).
- `len()` of a list is `array_size()` (Spark's `length()` is for strings).
- HUGEINT (`CAST(NULL AS HUGEINT)`) is DECIMAL(38, 0), the type Spark has for 128-bit integers.
- A placeholder in a place that needs a BOOLEAN (a CASE WHEN condition, WHERE, a FILTER clause)
  or a list (the first argument of a list function) is cast to that type, since Spark types a
  NULL parameter as VOID and refuses it there.
- `WITH x AS [NOT] MATERIALIZED` loses DuckDB's planning hint.
- `A UNION [ALL] BY NAME B` (Spark SQL has no BY NAME) is a union by position of two sides that
  select A's columns and then B's others, NULL where a side lacks one (_unions_by_name).
- `L ASOF [LEFT] JOIN R` (Spark has no ASOF join) becomes equi-joins (_asof_joins).

What does not translate is refused with UntranslatableError naming the construct: ASOF joins
of other shapes than _asof_joins rewrites, and DuckDB functions sqlglot leaves as unknown calls
that Spark lacks. Whether an expression is a DOUBLE is decided from the query itself:
the contract's column types (traceql.core.resources.contract_types), the types of functions and
literals, and columns followed through the query's CTEs and sub-queries (sqlglot's qualify
names every column's source first).
"""

from __future__ import annotations

from functools import lru_cache

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from traceql.core.errors import UsageError


class UntranslatableError(UsageError):
    """A query uses DuckDB SQL that has no Spark SQL equivalent here."""


# Integer types a DOUBLE may be cast to (DuckDB rounds, Spark truncates).
_INTEGER_TYPES = {exp.DataType.Type.TINYINT, exp.DataType.Type.SMALLINT, exp.DataType.Type.INT,
                  exp.DataType.Type.BIGINT, exp.DataType.Type.INT128, exp.DataType.Type.UTINYINT,
                  exp.DataType.Type.USMALLINT, exp.DataType.Type.UINT, exp.DataType.Type.UBIGINT,
                  exp.DataType.Type.UINT128}
_FLOAT_TYPES = {exp.DataType.Type.DOUBLE, exp.DataType.Type.FLOAT}
# Expressions whose value is a DOUBLE in DuckDB whatever their arguments.
_FLOAT_NODES = (exp.Div, exp.Avg, exp.Median, exp.Quantile, exp.PercentileCont, exp.Stddev, exp.StddevSamp,
                exp.StddevPop, exp.Variance, exp.VariancePop, exp.Sqrt, exp.Ln, exp.Log, exp.Exp, exp.Pow,
                exp.Corr, exp.CovarSamp, exp.CovarPop)
# Expressions whose type is that of their arguments (a DOUBLE if one is).
_PASSING_NODES = (exp.Coalesce, exp.Nullif, exp.Greatest, exp.Least, exp.Abs, exp.Neg, exp.Paren, exp.Round,
                  exp.Floor, exp.Ceil, exp.Add, exp.Sub, exp.Mul, exp.Mod, exp.Sum, exp.Min, exp.Max,
                  exp.AnyValue, exp.First, exp.Last, exp.Case, exp.If, exp.ArgMax, exp.ArgMin)
# List-valued expressions (DuckDB len() of these is a list's length).
_LIST_NODES = (exp.ArrayFilter, exp.Array, exp.Split, exp.ArrayConcat, exp.ArrayDistinct, exp.ArraySort,
               exp.ArrayAgg, exp.StringToArray, exp.Transform, exp.ArraySlice)
# Functions whose first argument is a list.
_LIST_FUNCTIONS = (exp.ArrayFilter, exp.ArraySize, exp.Explode, exp.Unnest, exp.ArrayContains, exp.Transform,
                   exp.ArrayToString, exp.ArraySort, exp.ArrayDistinct)


def to_spark(sql: str, tables: bool = False):
    """The DuckDB SQL of one query as Spark SQL (see the module's documentation); with tables,
    (the Spark SQL, the names of the tables and views it reads). Raises UntranslatableError for
    what Spark cannot run."""
    spark_sql, names = _to_spark(sql)
    return (spark_sql, set(names)) if tables else spark_sql


@lru_cache(maxsize=256)
def _to_spark(sql: str) -> tuple[str, frozenset[str]]:
    try:
        trees = [t for t in sqlglot.parse(sql, read="duckdb") if t is not None]
    except (ParseError, TokenError) as exc:
        raise UntranslatableError(f"sqlglot cannot read the query: {str(exc).splitlines()[0]}") from None
    if len(trees) != 1:
        raise UntranslatableError(f"one statement expected, got {len(trees)}")
    tree = trees[0]
    _refuse(tree)
    tree = _qualified(tree)
    _unions_by_name(tree)
    _asof_joins(tree)
    floats = _FloatTyper(tree)
    for node in list(tree.walk()):
        if isinstance(node, exp.CTE) and node.args.get("materialized") is not None:
            node.set("materialized", None)
        elif isinstance(node, exp.DataType) and node.this in (exp.DataType.Type.INT128, exp.DataType.Type.UINT128):
            node.replace(exp.DataType.build("DECIMAL(38, 0)"))
    for agg in list(tree.find_all(exp.GroupConcat)):
        _distinct_string_agg(agg)
    # innermost first: a rewritten node's parents are rewritten after it
    for node in reversed(list(tree.walk())):
        if isinstance(node, exp.Div) and not node.args.get("typed"):
            left = node.this
            if not (isinstance(left, exp.Cast) and left.to.this in _FLOAT_TYPES):
                node.set("this", exp.cast(left.copy(), "DOUBLE"))
        elif isinstance(node, exp.Round) and floats.is_float(node.this):
            _round_as_duckdb(node)
        elif isinstance(node, (exp.Cast, exp.TryCast)) and node.to.this in _INTEGER_TYPES \
                and floats.is_float(node.this):
            node.set("this", exp.Anonymous(this="BROUND", expressions=[node.this.copy()]))
        elif isinstance(node, exp.Length) and _is_list(node.this):
            node.replace(exp.Anonymous(this="array_size", expressions=[node.this.copy()]))
        elif isinstance(node, exp.Placeholder):
            _type_placeholder(node)
    names = frozenset(t.name for t in tree.find_all(exp.Table) if not t.db)  # CTEs' names too: a superset
    return tree.sql(dialect="spark", comments=False), names


def _refuse(tree: exp.Expression) -> None:
    known_to_spark = _spark_functions()
    for call in tree.find_all(exp.Anonymous):
        name = call.name.lower()
        if name not in known_to_spark:
            raise UntranslatableError(f"DuckDB function {name}() has no Spark SQL translation")


@lru_cache(maxsize=1)
def _spark_functions() -> frozenset[str]:
    """DuckDB function names sqlglot leaves as plain calls that Spark has under the same name
    and meaning."""
    return frozenset({"array_size", "contains", "concat_ws", "printf", "format_string", "regexp_replace"})


def _qualified(tree: exp.Expression) -> exp.Expression:
    """The tree with every column qualified by its source (sqlglot's qualify, over the contract's
    schema), so that _FloatTyper can follow a column to the expression that makes it."""
    from sqlglot.optimizer.qualify import qualify

    try:
        return qualify(tree, schema=_schema(), dialect="duckdb", validate_qualify_columns=False,
                       quote_identifiers=True, identify=False)
    except sqlglot.errors.OptimizeError as exc:
        raise UntranslatableError(f"sqlglot cannot resolve the query's columns: {exc}") from None


@lru_cache(maxsize=1)
def _schema() -> dict:
    from traceql.core.resources import contract_types

    return {view: {name: ("VARCHAR" if kind.startswith("ENUM") else kind) for name, kind in cols}
            for view, cols in contract_types().items()}


class _FloatTyper:
    """Whether an expression of a qualified tree is a DOUBLE in DuckDB."""

    def __init__(self, tree: exp.Expression):
        self.tree = tree
        self._memo: dict[int, bool] = {}

    def is_float(self, node: exp.Expression) -> bool:
        key = id(node)
        if key not in self._memo:
            self._memo[key] = False  # a cycle (a recursive CTE) is not a DOUBLE
            self._memo[key] = self._is_float(node)
        return self._memo[key]

    def _is_float(self, node: exp.Expression) -> bool:
        if isinstance(node, _FLOAT_NODES):
            return True
        if isinstance(node, (exp.Cast, exp.TryCast)):
            return node.to.this in _FLOAT_TYPES
        if isinstance(node, exp.Literal):
            return not node.is_string and ("e" in node.this.lower())
        if isinstance(node, exp.Alias):
            return self.is_float(node.this)
        if isinstance(node, exp.Column):
            return self._column_is_float(node)
        if isinstance(node, _PASSING_NODES):
            parts = [v for k, v in node.args.items() if k not in ("decimals", "to")]
            return any(self.is_float(p) for v in parts for p in (v if isinstance(v, list) else [v])
                       if isinstance(p, exp.Expression) and not isinstance(p, exp.DataType))
        return False

    def _column_is_float(self, column: exp.Column) -> bool:
        select = column.find_ancestor(exp.Select)
        while select is not None:
            source = self._source(select, column.table)
            if source is not None:
                return self._source_column_is_float(source, column.name)
            select = select.find_ancestor(exp.Select)
        return False

    def _source(self, select: exp.Select, alias: str):
        """What the alias names in the FROM/JOIN of select: a contract table's name (str) or a
        query (exp.Query) whose output columns it reads."""
        for rel in [select.args.get("from_") or select.args.get("from")] + list(select.args.get("joins") or []):
            if rel is None:
                continue
            item = rel.this
            name = item.alias_or_name
            if name != alias:
                continue
            if isinstance(item, exp.Subquery):
                return item.this
            if isinstance(item, exp.Table):
                cte = self._cte(select, item.name)
                return cte if cte is not None else item.name
        return None

    def _cte(self, node: exp.Expression, name: str):
        scope = node
        while scope is not None:
            with_ = scope.args.get("with_") or scope.args.get("with") if isinstance(scope, exp.Expression) else None
            if with_ is not None:
                for cte in with_.expressions:
                    if cte.alias == name:
                        return cte.this
            scope = scope.parent
        return None

    def _source_column_is_float(self, source, name: str) -> bool:
        if isinstance(source, str):
            return dict(_schema().get(source, {})).get(name, "") in ("DOUBLE", "FLOAT", "REAL")
        if isinstance(source, exp.SetOperation):
            return self._source_column_is_float(source.left, name) or \
                self._source_column_is_float(source.right, name)
        if isinstance(source, exp.Subquery):
            return self._source_column_is_float(source.this, name)
        if isinstance(source, exp.Select):
            for projection in source.expressions:
                if projection.alias_or_name == name:
                    return self.is_float(projection)
        return False


def _distinct_string_agg(agg: exp.GroupConcat) -> None:
    """string_agg(DISTINCT x, sep ORDER BY x) [FILTER (WHERE c)] as
    CASE WHEN size(s) > 0 THEN array_join(array_sort(s), sep) END with s = collect_set(x) [FILTER ...]:
    Spark 4.0's LISTAGG(DISTINCT ...) WITHIN GROUP fails with a ClassCastException beside another
    DISTINCT aggregate or under FILTER. Other string_agg forms stay LISTAGG."""
    order = agg.this if isinstance(agg.this, exp.Order) else None
    values = order.this if order is not None else agg.this
    if not isinstance(values, exp.Distinct) or len(values.expressions) != 1:
        return
    value = values.expressions[0]
    if order is not None and (len(order.expressions) != 1 or order.expressions[0].this != value
                              or order.expressions[0].args.get("desc")):
        return
    target = agg.parent if isinstance(agg.parent, exp.Filter) else agg
    items = exp.Anonymous(this="collect_set", expressions=[value.copy()])
    if target is not agg:
        items = exp.Filter(this=items, expression=target.expression.copy())
    sep = agg.args.get("separator") or exp.Literal.string(",")
    joined = exp.Anonymous(this="array_join", expressions=[
        exp.Anonymous(this="array_sort", expressions=[items.copy()]), sep.copy()])
    nonempty = exp.GT(this=exp.Anonymous(this="size", expressions=[items]), expression=exp.Literal.number(0))
    target.replace(exp.Case(ifs=[exp.If(this=nonempty, true=joined)]))


def _round_as_duckdb(node: exp.Round) -> None:
    """round(x, d) of a DOUBLE as DuckDB computes it: round(x * 10^d) / 10^d in binary floating
    point (Spark's round(y, 0) of a DOUBLE agrees with C's round(): half away from zero)."""
    decimals = node.args.get("decimals")
    if decimals is None:
        return  # round(x): to an integer value, the same in both
    if not (isinstance(decimals, exp.Literal) and not decimals.is_string and decimals.this.lstrip("-").isdigit()):
        raise UntranslatableError(f"round() with non-constant decimals: {node.sql('duckdb')}")
    scale = exp.Literal.number(f"1e{int(decimals.this)}")
    x = node.this.copy()
    scaled = exp.Round(this=exp.Mul(this=exp.cast(x, "DOUBLE"), expression=scale), decimals=exp.Literal.number(0))
    node.replace(exp.Paren(this=exp.Div(this=scaled, expression=scale.copy(), typed=True)))


def _is_list(node: exp.Expression) -> bool:
    return isinstance(node, _LIST_NODES)


def _type_placeholder(node: exp.Placeholder) -> None:
    parent, key = node.parent, node.arg_key
    wanted = None
    if isinstance(parent, exp.If) and key == "this":
        wanted = "BOOLEAN"  # CASE WHEN :p THEN ...
    elif isinstance(parent, (exp.Where, exp.Having, exp.Filter, exp.Qualify)) and key == "this":
        wanted = "BOOLEAN"
    elif isinstance(parent, _LIST_FUNCTIONS) and key == "this":
        wanted = "ARRAY<STRING>"
    if wanted is not None:
        node.replace(exp.cast(node.copy(), exp.DataType.build(wanted, dialect="spark")))


# -- ASOF joins ----------------------------------------------------------------------------------

def _asof_joins(tree: exp.Expression) -> None:
    """Every `L ASOF [LEFT] JOIN R ON R.k = L.k AND ... AND R.t <= L.t` (or `<`) of a qualified tree
    rewritten as equi-joins that Spark plans with a sort, never an interval join:

        L LEFT JOIN lookup ON lookup.k = L.k AND ... AND lookup.t = L.t
          [LEFT] JOIN R' ON R.k = lookup.k AND ... AND R.t = lookup.m

    lookup holds, for every distinct (k..., t) of L, m: the latest R.t of the same keys at or
    before t (before t for `<`): the union of L's and R's (k..., t) in time order, R's first at
    equal times (L's first for `<`), with the running maximum of R's times (one window, n log n).
    R' keeps one row per (k..., t) of R, as the ASOF join matches one row (which one among rows
    tied on their time is not defined in DuckDB either). A NULL key or time matches nothing, as
    in DuckDB. The lookup reads the relation of L that the join's L side names (one table, CTE or
    sub-query), so the L side may follow other joins."""
    for number, join in enumerate(j for j in list(tree.find_all(exp.Join))
                                  if (j.args.get("method") or "").upper() == "ASOF"):
        _asof_join(join, f"_asof{number}")


def _unions_by_name(tree: exp.Expression) -> None:
    """Every `A UNION [ALL] BY NAME B` of a qualified tree (Spark SQL has no BY NAME) as a union by
    position of two sides that select the same columns in the same order: A's columns, then B's
    that A lacks, NULL where a side lacks a column, as DuckDB matches them."""
    unions = [u for u in tree.find_all(exp.Union) if u.args.get("by_name")]
    for number, union in enumerate(reversed(unions)):  # innermost first
        sides = [union.left, union.right]
        names = [s.named_selects for s in sides]
        if any("*" in n or not n for n in names):
            raise UntranslatableError("UNION BY NAME: each side must name its columns")
        order = list(dict.fromkeys(names[0] + names[1]))
        for i, (side, have) in enumerate(zip(sides, names)):
            alias = f"_byname{number}_{i}"
            cols = [exp.column(n, table=alias, quoted=True) if n in have else exp.alias_(exp.Null(), n, quoted=True)
                    for n in order]
            side.replace(exp.select(*cols).from_(side.copy().subquery(alias)))
        union.set("by_name", None)


def _conjuncts(node: exp.Expression) -> list[exp.Expression]:
    node = node.unnest()
    if isinstance(node, exp.And):
        return _conjuncts(node.this) + _conjuncts(node.expression)
    return [node]


def _tables(node: exp.Expression) -> set[str]:
    return {c.table for c in node.find_all(exp.Column)}


def _asof_join(join: exp.Join, name: str) -> None:
    select = join.parent
    right = join.this
    r = right.alias_or_name
    refuse = lambda why: UntranslatableError(f"ASOF JOIN {right.sql('duckdb')}: {why}")  # noqa: E731
    if not isinstance(select, exp.Select) or not isinstance(right, (exp.Table, exp.Subquery)) or not r:
        raise refuse("only a named table or sub-query joined in a SELECT translates")
    keys, times = [], []
    for cond in _conjuncts(join.args.get("on") or exp.true()):
        if not isinstance(cond, (exp.EQ, exp.LTE, exp.LT, exp.GTE, exp.GT)):
            raise refuse(f"condition {cond.sql('duckdb')} is neither an equality nor the time's inequality")
        a, b = cond.this, cond.expression
        if _tables(a) == {r} and r not in _tables(b):
            pair, flipped = (a, b), False
        elif _tables(b) == {r} and r not in _tables(a):
            pair, flipped = (b, a), True
        else:
            raise refuse(f"condition {cond.sql('duckdb')} does not compare the joined table with the others")
        if isinstance(cond, exp.EQ):
            keys.append(pair)
            continue
        # the operator read as `R.t op L.t`
        op = type(cond) if not flipped else {exp.LTE: exp.GTE, exp.LT: exp.GT, exp.GTE: exp.LTE, exp.GT: exp.LT}[type(cond)]
        if op not in (exp.LTE, exp.LT):
            raise refuse("only the latest row at or before (R.t <= L.t, R.t < L.t) translates")
        times.append((pair, op is exp.LT))
    if len(times) != 1:
        raise refuse("one inequality on the time expected")
    (r_time, l_time), strict = times[0]
    left_aliases = set().union(*(_tables(lx) for _, lx in keys), _tables(l_time))
    if len(left_aliases) != 1:
        raise refuse("the left side's keys and time must come from one table")
    left = _relation(select, left_aliases.pop(), join)
    if left is None:
        raise refuse("the left side's table is not joined before it")
    k = [f"{name}_k{i}" for i in range(len(keys))]
    r_side, l_side = (1, 0) if strict else (0, 1)

    def part(source, exprs, time, side):
        cols = [exp.alias_(e.copy(), n) for e, n in zip(exprs, k)]
        return exp.select(*cols, exp.alias_(time.copy(), "t"), exp.alias_(exp.Literal.number(side), "side")) \
            .from_(source.copy())

    union = exp.union(part(left, [lx for _, lx in keys], l_time, l_side),
                      part(right, [rx for rx, _ in keys], r_time, r_side), distinct=False)
    running = exp.Window(
        this=exp.Max(this=exp.Case(ifs=[exp.If(this=exp.column("side").eq(r_side), true=exp.column("t"))])),
        partition_by=[exp.column(c) for c in k],
        order=exp.Order(expressions=[exp.Ordered(this=exp.column("t"), nulls_first=True),
                                     exp.Ordered(this=exp.column("side"), nulls_first=True)]),
        spec=exp.WindowSpec(kind="ROWS", start="UNBOUNDED", start_side="PRECEDING", end="CURRENT ROW"))
    swept = exp.select(*k, "t", "side", exp.alias_(running, "m")).from_(union.subquery(f"{name}_u"))
    lookup = exp.select(*k, "t", "m").distinct().from_(swept.subquery(f"{name}_s")).where(exp.column("side").eq(l_side))
    rn = f"{name}_rn"
    numbered = exp.select(exp.Star(), exp.alias_(exp.Window(
        this=exp.RowNumber(), partition_by=[rx.copy() for rx, _ in keys] + [r_time.copy()],
        order=exp.Order(expressions=[exp.Ordered(this=r_time.copy())])), rn)) \
        .from_(right.copy())
    numbered.expressions[0] = exp.Column(this=exp.Star(), table=exp.to_identifier(r))
    deduped = exp.select("*").from_(numbered.subquery(f"{name}_n")).where(exp.column(rn).eq(1))
    on_lookup = exp.and_(*[exp.column(c, table=name).eq(lx.copy()) for c, (_, lx) in zip(k, keys)],
                         exp.column("t", table=name).eq(l_time.copy()))
    on_right = exp.and_(*[rx.copy().eq(exp.column(c, table=name)) for c, (rx, _) in zip(k, keys)],
                        r_time.copy().eq(exp.column("m", table=name)))
    first = exp.Join(this=lookup.subquery(name), side="LEFT", on=on_lookup)
    second = exp.Join(this=deduped.subquery(r), on=on_right,
                      **({"side": "LEFT"} if (join.args.get("side") or "").upper() == "LEFT" else {}))
    joins = select.args["joins"]
    at = joins.index(join)
    select.set("joins", joins[:at] + [first, second] + joins[at + 1:])


def _relation(select: exp.Select, alias: str, before: exp.Join):
    """The table or sub-query that alias names in select's FROM or in a join before `before`."""
    rels = [select.args.get("from_") or select.args.get("from")]
    for j in select.args.get("joins") or []:
        if j is before:
            break
        rels.append(j)
    for rel in rels:
        if rel is not None and isinstance(rel.this, (exp.Table, exp.Subquery)) and rel.this.alias_or_name == alias:
            return rel.this
    return None


# -- the user's SQL --------------------------------------------------------------------------

def check_user_sql(text: str, *, dialect: str | None = None, params=None, views=()) -> str:
    """The user's SQL (`traceql sql --engine spark`) checked as traceql.sqlcheck checks it for
    DuckDB, and returned as the DuckDB SQL to translate: a syntax error, an unknown view or
    column, a missing or extra parameter are UsageErrors; so is anything but one query (the
    export is only read) and any table that is neither one of VIEWS (the export's views) nor a
    CTE of the query: no file, path, table function or other catalog. to_spark() is tried on it,
    so that what Spark cannot run the same way is refused here too, before a JVM starts."""
    from traceql.query.sqlcheck import (TOO_DEEP, Catalog, check_dialect, check_names, check_params,
                                        is_read_only, statement_keyword, syntax_message, tree_placeholders)

    d = check_dialect(dialect)
    if text is None or not text.strip():
        raise UsageError("SQL: empty query")
    if params is not None and not isinstance(params, (dict, list, tuple)):
        raise UsageError("SQL: parameters are a dict ($name placeholders) or a list (? placeholders)")
    try:
        trees = [t for t in sqlglot.parse(text, read=d) if t is not None]
    except ParseError as exc:
        raise UsageError(syntax_message(exc)) from None
    except TokenError as exc:
        raise UsageError(f"SQL: syntax error: {str(exc).splitlines()[0]}") from None
    except RecursionError:
        raise UsageError(TOO_DEEP) from None
    if not trees:
        raise UsageError("SQL: empty query")
    if len(trees) != 1:
        raise UsageError(f"SQL: --engine spark runs one query at a time, got {len(trees)} statements")
    tree = trees[0]
    if not is_read_only(tree) or not isinstance(tree, exp.Query):
        raise UsageError(f"SQL: {statement_keyword(tree, d)} is not a query: --engine spark only reads its "
                         "export (SELECT or WITH)")
    try:
        check_names(tree, Catalog.contract())
    except UsageError:
        raise
    except Exception:  # noqa: BLE001 - sqlglot cannot analyse it: the table check and Spark decide
        pass
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    allowed = {v.lower() for v in views}
    for table in tree.find_all(exp.Table):
        plain = isinstance(table.this, exp.Identifier) and not table.args.get("db") and not table.args.get("catalog")
        if not plain or (table.name.lower() not in ctes and table.name.lower() not in allowed):
            raise UsageError(f"SQL: {table.sql(d)}: --engine spark reads the export's views only "
                             "(traceql schema lists them), no file, path or table function")
    named, positional = tree_placeholders([tree])
    check_params(named, positional, params)
    if d == "duckdb":
        duck = text
    else:
        from traceql.query.dialects import to_duckdb

        duck = to_duckdb(tree, d)
    to_spark(duck)
    return duck


# The name of the temporary view a shared CTE is computed into (shared_ctes): not a name of the
# contract, nor one a query of the library uses.
SHARED_VIEW_PREFIX = "__traceql_cte_"


@lru_cache(maxsize=256)
def shared_ctes(spark_sql: str) -> tuple[tuple[tuple[str, str], ...], str]:
    """The Spark SQL of one query in steps: ((view, Spark SQL), ...) for each CTE of its top-level
    WITH that the query reads more than once, in their order, and the query's own SQL reading them
    as those views (SHARED_VIEW_PREFIX + the CTE's name). Spark inlines every deterministic CTE at
    each place it is read, so a CTE read twice by a CTE read twice is planned and run four times
    (analyze/iterations: 121 shuffles, 19 file scans and 40 CPU s for 22 rows); DuckDB computes
    such a CTE once. traceql.engines.spark runs the steps in order, each cached, then the query.
    A step keeps the once-read CTEs it needs and reads the parameters by name. With no steps the
    query is unchanged: no top-level WITH, nothing read twice, a CTE name reused inside the query
    or given column names, or `?` parameters (bound by their place in the text)."""
    tree = sqlglot.parse_one(spark_sql, read="spark")
    with_ = tree.args.get("with_")
    if with_ is None or with_.args.get("recursive"):
        return (), spark_sql
    ctes = list(with_.expressions)
    names = [c.alias_or_name for c in ctes]
    inner = [c.alias_or_name for c in tree.find_all(exp.CTE) if c.parent is not with_]
    if len(set(names)) != len(names) or set(names) & set(inner) or any(c.args["alias"].columns for c in ctes) \
            or any(p.this in (None, "?") for p in tree.find_all(exp.Placeholder)):  # ? markers count by place
        return (), spark_sql

    def reads(node) -> list[str]:
        return [t.name for t in node.find_all(exp.Table) if not t.args.get("db") and t.name in names]

    count: dict[str, int] = {}
    for name in reads(tree):
        count[name] = count.get(name, 0) + 1
    if any(name in reads(c.this) for name, c in zip(names, ctes)):  # a CTE naming a view it hides
        return (), spark_sql
    shared = [n for n in names if count.get(n, 0) > 1]
    if not shared:
        return (), spark_sql
    view = {n: SHARED_VIEW_PREFIX + n for n in shared}
    body = dict(zip(names, ctes))

    def needed(node) -> list[str]:
        """The once-read CTEs NODE reads, directly or through each other, in the WITH's order."""
        seen, todo = set(), [n for n in reads(node) if n not in view]
        while todo:
            n = todo.pop()
            if n not in seen:
                seen.add(n)
                todo += [m for m in reads(body[n].this) if m not in view]
        return [n for n in names if n in seen]

    def rename(node):
        for t in list(node.find_all(exp.Table)):
            if not t.args.get("db") and t.name in view:
                t.replace(exp.Table(this=exp.to_identifier(view[t.name]),
                                    alias=exp.TableAlias(this=exp.to_identifier(t.alias or t.name))))
        return node

    def with_ctes(select, node_names):
        select = rename(select)
        if node_names:
            select.set("with_", exp.With(expressions=[rename(body[n].copy()) for n in node_names]))
        return select

    steps = []
    for n in shared:
        select = body[n].this.copy()
        steps.append((view[n], with_ctes(select, needed(body[n].this)).sql(dialect="spark")))
    rest = tree.copy()
    rest.set("with_", None)
    final = with_ctes(rest, needed(rest)).sql(dialect="spark")
    return tuple(steps), final
