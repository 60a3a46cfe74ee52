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
- A DOUBLE cast to an integer type rounds in DuckDB (half away from zero) and truncates in
  Spark: rounded first.
- `len()` of a list is `array_size()` (Spark's `length()` is for strings).
- HUGEINT (`CAST(NULL AS HUGEINT)`) is DECIMAL(38, 0), the type Spark has for 128-bit integers.
- A placeholder in a place that needs a BOOLEAN (a CASE WHEN condition, WHERE, a FILTER clause)
  or a list (the first argument of a list function) is cast to that type, since Spark types a
  NULL parameter as VOID and refuses it there.
- `WITH x AS [NOT] MATERIALIZED` loses DuckDB's planning hint.

What does not translate is refused with UntranslatableError naming the construct: ASOF joins
(Spark has none; the analyze/ rules use them) and DuckDB functions sqlglot leaves as unknown
calls that Spark lacks. Whether an expression is a DOUBLE is decided from the query itself:
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
            node.set("this", exp.Round(this=node.this.copy()))
        elif isinstance(node, exp.Length) and _is_list(node.this):
            node.replace(exp.Anonymous(this="array_size", expressions=[node.this.copy()]))
        elif isinstance(node, exp.Placeholder):
            _type_placeholder(node)
    names = frozenset(t.name for t in tree.find_all(exp.Table) if not t.db)  # CTEs' names too: a superset
    return tree.sql(dialect="spark", comments=False), names


def _refuse(tree: exp.Expression) -> None:
    for join in tree.find_all(exp.Join):
        if (join.args.get("method") or "").upper() == "ASOF":
            raise UntranslatableError("ASOF JOIN has no Spark SQL equivalent: this query runs on DuckDB only")
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
