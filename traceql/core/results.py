"""Query results as users get them: every column kept under its own name, integers as integers.

DuckDB hands a result to Arrow as it is: `SELECT dur, dur FROM kernel` has two columns named
`dur` (which pandas, JSON and Python dicts collapse into one), and `sum()` of a BIGINT column
is a HUGEINT, which arrives as decimal128(38, 0). tidy() renames repeated names the way
DuckDB names the columns of a table made from such a query (dur, dur_1, dur_2, ...) and
turns a decimal128(38, 0) column into int64 when every value fits in 64 bits (a sum of ns
durations stays below 2^63 for 292 years of GPU time); a column with a value beyond keeps
its exact decimal128(38, 0) type (JSON output writes such values as exact integers).
"""

from __future__ import annotations

import pyarrow as pa

_INT64 = (-(2 ** 63), 2 ** 63 - 1)


def unique_names(names: list[str]) -> list[str]:
    """Repeated names made unique as DuckDB does: the second `dur` becomes `dur_1`, unless
    that name is taken, then `dur_2`, ..."""
    taken = set(names)
    seen: set[str] = set()
    out = []
    for name in names:
        if name not in seen:
            seen.add(name)
            out.append(name)
            continue
        k = 1
        while f"{name}_{k}" in taken or f"{name}_{k}" in seen:
            k += 1
        fresh = f"{name}_{k}"
        seen.add(fresh)
        out.append(fresh)
    return out


def _integral_decimal(t: pa.DataType) -> bool:
    return pa.types.is_decimal(t) and t.scale == 0 and t.precision > 18


def _fits_int64(column) -> bool:
    import pyarrow.compute as pc

    if column.null_count == len(column):
        return True
    bounds = pc.min_max(column)
    lo, hi = bounds["min"].as_py(), bounds["max"].as_py()
    return _INT64[0] <= lo and hi <= _INT64[1]


def tidy(table: pa.Table) -> pa.Table:
    """table with unique column names and 64-bit-sized integral decimals as int64."""
    names = unique_names(table.column_names)
    if names != table.column_names:
        table = table.rename_columns(names)
    for i, field in enumerate(table.schema):
        if _integral_decimal(field.type) and _fits_int64(table.column(i)):
            table = table.set_column(i, pa.field(field.name, pa.int64(), field.nullable, field.metadata),
                                     table.column(i).cast(pa.int64()))
    return table


def tidy_reader(reader: pa.RecordBatchReader, on_error=None) -> pa.RecordBatchReader:
    """A reader whose batches are tidy(): unique names; integral decimals as int64 when the
    first batch fits (a later value beyond 64 bits is an error rather than a wrong number).
    on_error(exc): the exception to raise instead when reading fails (DuckDB reports an error
    of a streamed query, or an interrupted one, through Arrow as an OSError)."""
    names = unique_names(reader.schema.names)

    def read(it):
        try:
            return next(it, None)
        except (OSError, pa.ArrowException) as exc:
            if on_error is None:
                raise
            raise on_error(exc) from None

    it = iter(reader)
    first = read(it)
    fields = []
    for name, field in zip(names, reader.schema):
        kind = field.type
        if _integral_decimal(kind) and (first is None or _fits_int64(first.column(field.name))):
            kind = pa.int64()
        fields.append(pa.field(name, kind, field.nullable, field.metadata))
    schema = pa.schema(fields)

    def batches():
        batch = first
        while batch is not None:
            yield _conform(batch, schema)
            batch = read(it)

    return pa.RecordBatchReader.from_batches(schema, batches())


def _conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    columns = [col if col.type == field.type else col.cast(field.type) for col, field in zip(batch.columns, schema)]
    return pa.RecordBatch.from_arrays(columns, schema=schema)
