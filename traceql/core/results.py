"""Query results as users get them: every column kept under its own name, integers as integers.

DuckDB hands a result to Arrow as it is: `SELECT dur, dur FROM kernel` has two columns named
`dur` (which pandas, JSON and Python dicts collapse into one), and `sum()` of a BIGINT column
is a HUGEINT, which arrives as decimal128(38, 0). tidy() renames repeated names the way
DuckDB names the columns of a table made from such a query (dur, dur_1, dur_2, ...) and
turns a decimal128(38, 0) column into int64 when every value fits in 64 bits (a sum of ns
durations stays below 2^63 for 292 years of GPU time); a column with a value beyond keeps
its exact decimal128(38, 0) type (JSON output writes such values as exact integers).

Rows is a result read as Python rows instead, for `traceql sql` printing columns of plain types:
it spares the command importing pyarrow (0.05 s of a 0.3 s command). RowTable is one read whole,
for the reports and the summary the CLI prints (traceql.query.reports.run_report(rows=True),
summary(rows=True)): the few operations of a pyarrow.Table they use (select, slice, num_rows,
add_column, concat, sort_by, to_pylist), on Python rows; read_whole() and dicts() choose between
the two kinds for a result.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where an Arrow result is made: a Rows result needs none of it
    import pyarrow as pa

_INT64 = (-(2 ** 63), 2 ** 63 - 1)

# DuckDB's types whose Python values (DuckDB's fetch) are the ones pyarrow's to_pylist() gives for
# the same column, and which print the same (integers, decimals, floats, text, booleans; a
# HUGEINT is an int here and an int64 or exact decimal there, written the same)
NUMBER_TYPES = frozenset({"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
                          "UINTEGER", "UBIGINT", "FLOAT", "DOUBLE"})
TEXT_TYPES = frozenset({"VARCHAR"})
PLAIN_TYPES = NUMBER_TYPES | TEXT_TYPES | {"BOOLEAN"}


def is_plain(duckdb_type: str) -> bool:
    return duckdb_type in PLAIN_TYPES or (duckdb_type.startswith("DECIMAL(") and duckdb_type.endswith(")"))


class Field:
    """A column of a Rows result: its name and DuckDB type (a str); what pyarrow's field gives
    the printing code (traceql.outputs.cells.is_number). metadata: as a pyarrow field's
    (traceql.outputs.cells.RIGHT for a text column of numbers)."""

    def __init__(self, name: str, duckdb_type: str, metadata: dict | None = None):
        self.name, self.type, self.metadata = name, duckdb_type, metadata


class Schema(list):
    """The fields of a Rows result, with their names as a pyarrow.Schema has them."""

    @property
    def names(self) -> list[str]:
        return [f.name for f in self]

    def empty_table(self) -> Chunk:
        return Chunk(self, [])


class Column:
    """A column of a chunk of rows: its DuckDB type and values."""

    def __init__(self, duckdb_type: str, values: list):
        self.type, self._values = duckdb_type, values

    def to_pylist(self) -> list:
        return self._values


class Chunk:
    """Up to a chunk's worth of rows, as a pyarrow.Table of them is read for printing."""

    def __init__(self, schema: Schema, rows: list[tuple]):
        cols = list(zip(*rows)) if rows else [() for _ in schema]
        self._set(schema, [Column(f.type, list(values)) for f, values in zip(schema, cols)], len(rows))

    @classmethod
    def of_columns(cls, schema: Schema, columns: list[Column]) -> Chunk:
        chunk = cls.__new__(cls)
        chunk._set(schema, columns, len(columns[0].to_pylist()) if columns else 0)
        return chunk

    def _set(self, schema: Schema, columns: list[Column], num_rows: int) -> None:
        self.schema, self.columns, self.num_rows = schema, columns, num_rows
        self.column_names = schema.names


class Rows:
    """A DuckDB result whose columns are all of PLAIN_TYPES, read as Python rows as they are
    printed: schema, and chunks(size) of at most SIZE rows (traceql.outputs.tables.chunks).
    Column names are made unique as tidy() makes them. on_error(exc): the exception to raise
    instead when reading fails."""

    def __init__(self, result, on_error=None):
        self._result, self._on_error = result, on_error
        self.schema = schema_of_result(result)

    @staticmethod
    def plain(result) -> bool:
        """Whether every column of RESULT (a DuckDB result) is of a plain type."""
        return bool(result.description) and all(is_plain(str(d[1])) for d in result.description)

    def chunks(self, size: int):
        while True:
            try:
                rows = self._result.fetchmany(size)
            except Exception as exc:  # noqa: BLE001 - said as the caller says it
                if self._on_error is None:
                    raise
                raise self._on_error(exc) from None
            if not rows:
                return
            yield Chunk(self.schema, rows)


class RowTable:
    """A DuckDB result whose columns are all of PLAIN_TYPES, read whole as Python rows: what
    the reports and the summary the CLI prints need of a pyarrow.Table (schema, column_names,
    num_rows, select, slice, add_column, concat, sort_by, to_pylist) and chunks(size) for
    printing. of(result): one, or None when a column is not of a plain type (the caller then
    reads the result as Arrow)."""

    def __init__(self, schema: Schema, rows: list[tuple]):
        self.schema, self._rows = schema, rows
        self.column_names = schema.names
        self.num_rows = len(rows)

    @classmethod
    def of(cls, result) -> RowTable | None:
        if not Rows.plain(result):
            return None
        return cls(schema_of_result(result), result.fetchall())

    def select(self, names: list[str]) -> RowTable:
        at = [self.column_names.index(n) for n in names]
        return RowTable(Schema(self.schema[i] for i in at), [tuple(row[i] for i in at) for row in self._rows])

    def slice(self, offset: int, length: int | None = None) -> RowTable:
        end = None if length is None else offset + length
        return RowTable(self.schema, self._rows[offset:end])

    def add_column(self, i: int, name: str, duckdb_type: str, values: list) -> RowTable:
        """A column NAME of these VALUES (one per row) inserted at position I."""
        schema = Schema([*self.schema[:i], Field(name, duckdb_type), *self.schema[i:]])
        return RowTable(schema, [(*row[:i], v, *row[i:]) for row, v in zip(self._rows, values)])

    @staticmethod
    def concat(tables: list[RowTable]) -> RowTable:
        """The rows of TABLES (of the same columns) one after the other."""
        return RowTable(tables[0].schema, [row for t in tables for row in t._rows])

    def sort_by(self, name: str) -> RowTable:
        """The rows in ascending order of column NAME (a stable sort: ties keep their order)."""
        at = self.column_names.index(name)
        return RowTable(self.schema, sorted(self._rows, key=lambda row: row[at]))

    def to_pylist(self) -> list[dict]:
        """A dict per row, as pyarrow's Table.to_pylist()."""
        return [dict(zip(self.column_names, row)) for row in self._rows]

    def chunks(self, size: int):
        for start in range(0, self.num_rows, size):
            yield Chunk(self.schema, self._rows[start:start + size])


def read_whole(result, rows: bool = False):
    """A DuckDB result read whole: a RowTable when ROWS and its columns are of plain types,
    else an Arrow table (always for a result without DuckDB's column types: Spark's)."""
    if rows and hasattr(result, "description"):
        table = RowTable.of(result)
        if table is not None:
            return table
    return result.to_arrow_table()


def dicts(result) -> list[dict]:
    """A DuckDB result (or Spark's) read whole as a dict per row, as pyarrow's to_pylist() gives
    them; through pyarrow only when a column is not of a plain type."""
    return read_whole(result, rows=True).to_pylist()


def schema_of_result(result) -> Schema:
    """The fields of a DuckDB result, their names made unique as tidy() makes them."""
    names = unique_names([d[0] for d in result.description])
    return Schema(Field(n, str(d[1])) for n, d in zip(names, result.description))


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
    import pyarrow as pa

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
    import pyarrow as pa

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
    import pyarrow as pa

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
    import pyarrow as pa

    columns = [col if col.type == field.type else col.cast(field.type) for col, field in zip(batch.columns, schema)]
    return pa.RecordBatch.from_arrays(columns, schema=schema)
