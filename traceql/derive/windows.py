"""Big derivation steps run in windows: a step whose one pass would spill on a big trace (an ASOF
join, a window function or aggregates over every row) is written as a view that reads the rows
whose key lies in [getvariable(from), getvariable(to)), and is filled one window after another.
windows() cuts a key column at quantiles; fill() sets the variables and inserts each window.
Used by traceql.store.families (op_range) and traceql.derive.pytorch (raw.torch_anc,
raw.kop_units); each view's SQL says why its windows give the rows of one pass."""

from __future__ import annotations

import duckdb

MIN, MAX = -(1 << 63), (1 << 63) - 1

Window = tuple[int, int, int]


def windows(con: duckdb.DuckDBPyConnection, table: str, key: str, per_window: int,
            end: str | None = None) -> list[Window]:
    """The windows (from, to, reach) of the rows of TABLE: KEY's values [from, to), cut at
    quantiles into windows of about PER_WINDOW rows (rows with equal keys stay together; the first
    window starts at the lowest BIGINT, the last ends at the highest), and reach, the least value of
    the column END among the window's rows (the lowest BIGINT without END). One window of
    everything for a table of at most PER_WINDOW rows; none for an empty table."""
    n = con.execute(f"SELECT count({key}) FROM {table}").fetchone()[0]
    count = -(-n // per_window)
    if count <= 1:
        return [(MIN, MAX, MIN)] if n else []
    cuts = con.execute(f"SELECT quantile_disc({key}, ?::DOUBLE[]) FROM {table}",
                       [[i / count for i in range(1, count)]]).fetchone()[0]
    bounds = sorted({MIN, *cuts, MAX})
    spans = []
    for lo, hi in zip(bounds, bounds[1:]):
        if end is None:
            spans.append((lo, hi, MIN))
            continue
        reach = con.execute(f"SELECT min({end}) FROM {table} WHERE {key} >= ? AND {key} < ?", [lo, hi]).fetchone()[0]
        if reach is not None:
            spans.append((lo, hi, reach))
    return spans


def fill(con: duckdb.DuckDBPyConnection, target: str, view: str, names: tuple[str, ...],
         spans: list[Window], create: bool = False) -> None:
    """INSERT the rows of VIEW into TARGET (by name) once per window of SPANS, with the variables
    NAMES (from, to[, reach]) set to the window's bounds. CREATE: first (re)create TARGET empty,
    with VIEW's columns."""
    if create:
        con.execute(f"CREATE OR REPLACE TABLE {target} AS SELECT * FROM {view} LIMIT 0")
    for span in spans:
        for name, value in zip(names, span):
            con.execute(f"SET VARIABLE {name} = ?::BIGINT", [value])
        con.execute(f"INSERT INTO {target} BY NAME SELECT * FROM {view}")
