"""What commands print: notes on stderr, lines and tables on stdout or into -o FILE, in the --format asked."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from traceql.core.errors import UsageError
from traceql.outputs.numbers import humanize
from traceql.outputs.render import render
from traceql.cli.context import Context, table_width, wide


def tell(message: str) -> None:
    """A note or warning for people on stderr ('traceql: ' first), wrapped to the terminal's
    width when stderr is one."""
    from traceql.outputs.tables import fill, terminal_width

    click.echo(fill(f"traceql: {message}", terminal_width(sys.stderr), "  "), err=True)


def say(text: str, indent: int = 2) -> None:
    """A line for people on stdout, wrapped to the terminal's width ($COLUMNS, else the
    terminal's; into a pipe as it is), the lines after the first indented by `indent`; a NUL
    is a space that never breaks ('kernel\0' '17,032' stays on one line)."""
    from traceql.outputs.tables import hang, terminal_width

    click.echo(hang(text, None if wide() else terminal_width(sys.stdout), indent).replace("\0", " "))


def shown_path(path: str, before: int) -> str:
    """A path on a line after `before` columns of text: shortened in the middle (its file name
    kept) to fit a terminal; whole into a pipe."""
    from traceql.outputs.cells import shorten_middle
    from traceql.outputs.tables import terminal_width

    width = None if wide() else terminal_width(sys.stdout)
    return path if width is None or before + len(path) <= width else shorten_middle(path, width - before)


def gpu_list(gpus: list[str]) -> str:
    """'0 NVIDIA H100 80GB HBM3, 1 NVIDIA H100 80GB HBM3, ...' as '0-7 NVIDIA H100 80GB HBM3 (8)'
    when consecutive GPUs share a model."""
    runs: list[list] = []  # [first id, last id, model]
    for g in gpus:
        head, _, model = g.partition(" ")
        if head.isdigit() and runs and runs[-1][2] == model and runs[-1][1] == int(head) - 1:
            runs[-1][1] = int(head)
        elif head.isdigit():
            runs.append([int(head), int(head), model])
        else:
            runs.append([None, None, g])
    return ", ".join(model if a is None else f"{a} {model}" if a == b else f"{a}-{b} {model} ({b - a + 1})"
                     for a, b, model in runs)


def check_output(path: Path | None, folder: bool = False, overwrite: bool | None = None, inputs=()) -> None:
    """-o PATH before any work, the same rule for every command (traceql.store.guard.check_output):
    never the workspace (--db) or an input, a file that exists only with --overwrite."""
    from traceql.store.guard import check_output as check

    obj = click.get_current_context().find_object(Context)
    check(path, workspace=obj.db if obj is not None else None, inputs=inputs,
          overwrite=obj.overwrite if overwrite is None and obj is not None else bool(overwrite), folder=folder)


def emit_raw(table, fmt, output) -> None:
    """Print or write a result as it is (no unit conversion): sql and query. table: a
    pyarrow Table or RecordBatchReader (written as it is read)."""
    if fmt == "parquet":
        emit(table, fmt, output)
    elif output is None:
        render(table, fmt, width=table_width(), wide=wide())
    else:
        with open(output, "w", encoding="utf-8", newline="") as fh:
            render(table, fmt, fh, width=table_width(fh))


def first_rows(table, limit: int):
    """The first LIMIT rows of each trace of an evidence table (it is ranked within each trace)."""
    from traceql.query.reports import order_and_limit

    return order_and_limit(table, None, limit, per_trace=True)


def pa_strings(values):
    import pyarrow as pa

    return pa.array(list(values), pa.string())


def plural(n: int, word: str) -> str:
    """word for n things: 1 kernel, 2 kernels, 3 copies."""
    if n == 1:
        return word
    return word[:-1] + "ies" if word.endswith("y") and word[-2:-1] not in "aeiou" else word + "s"


def check_unit(unit, fmt) -> None:
    if unit is not None and fmt not in ("table", "markdown"):
        raise UsageError(f"--unit applies to --format table and markdown; {fmt} gives times in ns")


def emit(table, fmt, output, unit=None, labels=None):
    if fmt == "parquet":
        if output is None:
            raise UsageError("--format parquet needs -o FILE")
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            with pq.ParquetWriter(output, table.schema) as writer:  # a Table or a RecordBatchReader
                for batch in (table.to_batches() if hasattr(table, "to_batches") else table):
                    writer.write_batch(batch)
        except pa.ArrowNotImplementedError as exc:  # an interval, a union: no Parquet type
            Path(output).unlink(missing_ok=True)
            raise UsageError(f"--format parquet: {str(exc).splitlines()[0]}; CAST that column to VARCHAR") from None
        return
    transform = None
    if fmt == "table" or (fmt == "markdown" and unit is not None):
        names = labels if fmt == "table" else None
        transform = lambda chunk: humanize(chunk, unit=unit, labels=names)  # noqa: E731 - per chunk of rows
    if output is None:
        render(table, fmt, width=table_width(), wide=wide(), transform=transform)
    else:
        with open(output, "w", encoding="utf-8", newline="") as fh:
            render(table, fmt, fh, width=table_width(fh), transform=transform)
