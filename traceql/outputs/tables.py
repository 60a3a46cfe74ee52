"""Tables for people: the layout of columns at a terminal's width (numbers whole and right-aligned,
long names last on the line or on a line of their own, shortened if need be), written in chunks of
rows; paragraphs wrapped to the terminal."""

from __future__ import annotations

import os
import sys

from traceql.core.text import clean_text
from traceql.outputs.cells import column_cells, is_number, pad, shorten_distinct, text_width


SEP = "  "  # between columns


INDENT = "  "  # the lines of numbers under a name that has a line of its own


LONG = 24  # text columns with a longer value are the 'name' columns: last on the line, shortened if need be


INLINE_MIN = 32  # a name column narrower than this goes to a line of its own


INLINE_ENOUGH = 80  # ... and so does one with room for fewer than 3 in 4 of its names whole, below this


CHUNK = 2_000  # rows formatted at a time


def terminal_width(out=None, wide: bool = False) -> int | None:
    """The width tables for people are fitted to: None (no limit) with wide; printing to
    standard output or a terminal, $COLUMNS when set, else the terminal's width; None for a
    pipe without $COLUMNS and for a file."""
    if wide:
        return None
    out = out or sys.stdout
    try:
        tty = out.isatty()
    except (AttributeError, ValueError):
        tty = False
    if out is not sys.stdout and not tty:  # -o FILE: lines as long as the data
        return None
    env = os.environ.get("COLUMNS", "")
    if env.strip().isdigit() and int(env) > 0:
        return int(env)
    if tty:
        try:
            return os.get_terminal_size(out.fileno()).columns or None  # a pty may report 0 columns
        except (AttributeError, OSError, ValueError):
            pass
    return None


def _header_min(head: str) -> int:
    """The narrowest a header can be: its longest word (headers wrap at spaces)."""
    return max((text_width(w) for w in head.split()), default=0)


def _wrap(head: str, width: int) -> list[str]:
    lines: list[str] = []
    for word in head.split():
        if lines and text_width(lines[-1]) + 1 + text_width(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines or [""]


class Layout:
    """Where each column goes, measured once (on the first rows) and kept for the rest.

    mode 'line': one line per row, the name columns (long text) last, shortened to their
    width when it is not None. mode 'stacked': each name column on a line of its own (cut to
    the width when there is one), then the other columns in bands of lines that each fit."""

    def __init__(self, heads: list[str], rights: list[bool], cells: list[list[str]], width: int | None,
                 underline: bool = True):
        self.heads, self.rights, self.width, self.underline = heads, rights, width, underline
        natural = [max((text_width(c) for c in col), default=0) for col in cells]
        self.flex = [i for i, (r, n) in enumerate(zip(rights, natural)) if not r and n > LONG]
        fixed = [i for i in range(len(heads)) if i not in self.flex]
        self.shortened = False

        def widths(wrap: bool) -> dict[int, int]:
            return {i: max(natural[i], _header_min(heads[i]) if wrap else text_width(heads[i])) for i in fixed}

        def span(ws) -> int:
            return sum(ws) + len(SEP) * max(len(ws) - 1, 0)

        # flex_width: the width a name column is padded to; flex_cap: the width it is cut to (None: never)
        self.mode, self.bands, self.title, self.indent = "line", [fixed], [], ""
        self.flex_width = {i: max(natural[i], text_width(heads[i])) for i in self.flex}
        self.flex_cap: dict[int, int | None] = {i: None for i in self.flex}
        if width is None:
            self.fixed_width = widths(False)
            self._headers()
            return
        least = {i: max(min(_quartile3(cells[i]), INLINE_ENOUGH), min(natural[i], INLINE_MIN), text_width(heads[i]))
                 for i in self.flex}
        best = None  # (room for the names, fixed widths) of the better way to fit one line
        for wrap in (False, True):
            fw = widths(wrap)
            used = span(list(fw.values()))
            room = width - used - (len(SEP) if fixed and self.flex else 0) - len(SEP) * max(len(self.flex) - 1, 0)
            if room >= sum(least.values()) and (best is None or room > best[0]):
                best = (room, fw)
            if best is not None and sum(natural[i] for i in self.flex) <= best[0]:
                break  # nothing is shortened: headers on one line if they can be
        if best is not None:
            room, self.fixed_width = best
            if self.flex:
                self.flex_width = _share(room, least, {i: max(natural[i], least[i]) for i in self.flex})
                self.flex_cap = dict(self.flex_width)
                self.shortened = any(self.flex_width[i] < natural[i] for i in self.flex)
            self._headers()
            return
        # Not on one line: a title line of the short text columns (name, kind), each long one
        # (kernel name) on a line of its own, then the numbers in bands of lines indented
        # under them; without text, the bands after the first are indented.
        self.mode = "stacked"
        fw = {i: max(natural[i], text_width(heads[i])) for i in range(len(heads))}
        texts = [i for i in range(len(heads)) if not rights[i]]
        short = [i for i in texts if i not in self.flex]
        if texts and span([fw[i] for i in texts]) <= width:  # every text column whole on one title line
            self.title, self.flex = texts, []
        else:
            self.title = short if short and span([fw[i] for i in short]) <= width else []
            self.flex = sorted(i for i in texts if i not in self.title)  # each on a line of its own
        self.flex_width = {i: min(max(natural[i], text_width(heads[i])), width) for i in self.flex}
        self.flex_cap = {i: width for i in self.flex}
        self.shortened = any(natural[i] > width for i in self.flex)
        numbers = [i for i in range(len(heads)) if i not in texts]
        self.indent = INDENT if self.title or self.flex else ""
        inner = width - len(INDENT)
        self.fixed_width = {**{i: fw[i] for i in self.title}, **widths(False)}
        if span([self.fixed_width[i] for i in numbers]) > inner:
            self.fixed_width.update({i: w for i, w in widths(True).items() if i in numbers})
        bands: list[list[int]] = [[]]
        for i in numbers:
            if bands[-1] and span([self.fixed_width[j] for j in bands[-1] + [i]]) > inner:
                bands.append([])
            bands[-1].append(i)
        self.bands = _grid(self, [b for b in bands if b], inner, span)
        self._headers()

    def _headers(self) -> None:
        self.head_lines = {i: (_wrap(self.heads[i], w) if text_width(self.heads[i]) > w else [self.heads[i]])
                           for i, w in self.fixed_width.items()}

    def _text_lines(self) -> list[int | None]:
        """The text lines of a stacked row in column order: a long column's index, None for
        the title line of the short ones."""
        items = [(i, i) for i in self.flex] + ([(min(self.title), None)] if self.title else [])
        return [item for _, item in sorted(items, key=lambda x: x[0])]

    # -- lines -----------------------------------------------------------------------

    def _head_cells(self, cols: list[int], depth: int, k: int) -> list[str]:
        """Line k (of depth) of the headers of columns COLS, bottom-aligned, each padded to its width."""
        cells = []
        for i in cols:
            hl = self.head_lines[i]
            text = hl[k - (depth - len(hl))] if k >= depth - len(hl) else ""
            cells.append(pad(text, self.fixed_width[i], self.rights[i]))
        return cells
    def header(self) -> list[str]:
        lines: list[str] = []
        if self.mode == "line":
            cols = self.bands[0]
            depth = max((len(self.head_lines[i]) for i in cols), default=1)
            for k in range(depth):
                parts = self._head_cells(cols, depth, k)
                if k == depth - 1:
                    parts += [pad(self.heads[i], self.flex_width[i], False) for i in self.flex]
                lines.append(SEP.join(parts).rstrip())
            if self.underline:
                rule = [("-" * self.fixed_width[i]) for i in cols]
                rule += ["-" * self.flex_width[i] for i in self.flex]
                lines.append(SEP.join(rule))
            return lines
        for item in self._text_lines():
            if item is None:
                lines.append(SEP.join(pad(self.heads[i], self.fixed_width[i], False) for i in self.title).rstrip())
            else:
                lines.append(self.heads[item])
        for b, band in enumerate(self.bands):
            indent = self.indent or (INDENT if b else "")
            depth = max(len(self.head_lines[i]) for i in band)
            for k in range(depth):
                lines.append(indent + SEP.join(self._head_cells(band, depth, k)).rstrip())
        if self.underline:
            longest = max((text_width(line) for line in lines), default=0)
            lines.append("-" * min(self.width or longest, longest))
        return lines

    def rows(self, cells: list[list[str]]):
        """The lines of these rows (cells: one list per column)."""
        n = len(cells[0]) if cells else 0
        names = {i: (shorten_distinct(cells[i], self.flex_cap[i]) if self.flex_cap[i] is not None else cells[i])
                 for i in self.flex}
        if any(names[i] is not cells[i] and names[i] != cells[i] for i in self.flex):
            self.shortened = True
        for r in range(n):
            if self.mode == "line":
                parts = [pad(cells[i][r], self.fixed_width[i], self.rights[i]) for i in self.bands[0]]
                if self.flex:
                    parts += [pad(names[i][r], self.flex_width[i], False) for i in self.flex]
                yield SEP.join(parts).rstrip()
                continue
            for item in self._text_lines():
                if item is None:
                    yield SEP.join(pad(cells[i][r], self.fixed_width[i], False) for i in self.title).rstrip()
                else:
                    yield names[item][r]
            for b, band in enumerate(self.bands):
                indent = self.indent or (INDENT if b else "")
                yield indent + SEP.join(pad(cells[i][r], self.fixed_width[i], self.rights[i]) for i in band).rstrip()


def _grid(layout: Layout, bands: list[list[int]], inner: int, span) -> list[list[int]]:
    """The bands of numbers as a grid: as few bands as fit, the columns shared out evenly
    (the last band the shortest), and the k-th column of every band as wide as the widest of
    them, so that each number of a row's second line stands under its own header, in the
    same place as the one above it."""
    if len(bands) < 2:
        return bands
    numbers = [i for band in bands for i in band]
    for count in range(len(bands), len(numbers) + 1):
        per = -(-len(numbers) // count)
        grid = [numbers[k:k + per] for k in range(0, len(numbers), per)]
        widths = [max(layout.fixed_width[band[j]] for band in grid if j < len(band)) for j in range(per)]
        if span(widths) <= inner:
            for band in grid:
                for j, i in enumerate(band):
                    layout.fixed_width[i] = widths[j]
            return grid
    return bands


def _quartile3(cells: list[str]) -> int:
    """The width that 3 in 4 of the cells fit in."""
    widths = sorted(text_width(c) for c in cells)
    return widths[(len(widths) * 3) // 4 - (1 if len(widths) % 4 == 0 else 0)] if widths else 0


def _share(room: int, least: dict[int, int], natural: dict[int, int]) -> dict[int, int]:
    """Widths for the name columns: each at least its least width, the rest of the room
    shared out by what each still needs, never beyond its natural width."""
    out = dict(least)
    spare = room - sum(least.values())
    while spare > 0:
        needy = [i for i in out if out[i] < natural[i]]
        if not needy:
            break
        step = max(spare // len(needy), 1)
        for i in needy:
            give = min(step, natural[i] - out[i], spare)
            out[i] += give
            spare -= give
            if spare <= 0:
                break
    return out


def chunks(data, size: int = CHUNK):
    """pa.Tables of at most `size` rows from a Table or a RecordBatchReader; from a
    traceql.core.results.Rows, its chunks of rows (read as a pa.Table is)."""
    from traceql.core.results import Rows, RowTable

    if isinstance(data, (Rows, RowTable)):
        yield from data.chunks(size)
        return
    import pyarrow as pa

    if isinstance(data, (pa.Table, pa.RecordBatch)):
        for start in range(0, data.num_rows, size):
            yield data.slice(start, size)
        return
    pending, rows = [], 0
    for batch in data:
        while batch.num_rows:
            take = batch.slice(0, size - rows)
            pending.append(take)
            rows += take.num_rows
            batch = batch.slice(take.num_rows)
            if rows >= size:
                yield pa.Table.from_batches(pending)
                pending, rows = [], 0
    if pending:
        yield pa.Table.from_batches(pending)


def schema_of(data):
    return data.schema


def write_table(data, out, width: int | None = None, transform=None, footer: bool = True) -> int:
    """Print a Table or RecordBatchReader as an aligned text table; the number of rows.
    transform: applied to each chunk (a pa.Table) before it is formatted (humanize)."""
    style = _Style(out)
    layout = None
    count = 0
    for chunk in chunks(data):
        if transform is not None:
            chunk = transform(chunk)
        cells = [column_cells(col) for col in chunk.columns]
        if layout is None:
            layout = Layout([clean_text(n) for n in chunk.column_names], [is_number(f) for f in chunk.schema], cells,
                            width)
            for line in layout.header():
                out.write(style.bold(line) + "\n")
        for line in layout.rows(cells):
            out.write(line + "\n")
        count += chunk.num_rows
    if layout is None:  # no rows: the header alone
        schema = schema_of(data)
        if transform is not None:
            schema = transform(schema.empty_table()).schema
        layout = Layout([clean_text(n) for n in schema.names], [is_number(f) for f in schema],
                        [[] for _ in schema.names], width)
        for line in layout.header():
            out.write(style.bold(line) + "\n")
    if footer:
        note = f"{count:,} row{'s' if count != 1 else ''}"
        if layout.shortened:
            note += f"; long names shortened to fit {width} columns (--wide prints them whole)"
        for line in fill(note, width, "").splitlines():
            out.write(style.dim(line) + "\n")
    return count


class _Style:
    """Bold headers and a dim footer on a terminal (unless $NO_COLOR); plain text elsewhere."""

    def __init__(self, out):
        try:
            self.on = out.isatty() and not os.environ.get("NO_COLOR")
        except (AttributeError, ValueError):
            self.on = False

    def bold(self, text: str) -> str:
        return f"\x1b[1m{text}\x1b[0m" if self.on and text else text

    def dim(self, text: str) -> str:
        return f"\x1b[2m{text}\x1b[0m" if self.on and text else text


def fill(text: str, width: int | None, indent: str) -> str:
    """text wrapped to width, continuation lines indented two more than `indent`."""
    if width is None or text_width(text) <= width:
        return text
    import textwrap

    return textwrap.fill(text, width, subsequent_indent=indent + "  " if indent else "", break_long_words=False,
                         break_on_hyphens=False)


def hang(text: str, width: int | None, indent: int) -> str:
    """text wrapped to width (None: as it is) at spaces, lines after the first indented by
    `indent` spaces (at most half the width); a word longer than a line is left whole."""
    if width is None or text_width(text) <= width:
        return text
    import textwrap

    indent = min(indent, width // 2)
    return textwrap.fill(text, width, subsequent_indent=" " * indent, break_long_words=False,
                         break_on_hyphens=False)
