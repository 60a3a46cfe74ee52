"""Printing results: aligned text tables for people; csv, tsv, json and markdown for machines.

Tables for people (format 'table') follow the spirit of `nsys stats`: numbers are printed
whole, right-aligned, never cut; text longer than LONG characters (kernel names, NVTX paths)
goes last on the line and gets the room that is left, shortened in the middle ('…') when it
must be, keeping similar names apart. When that room holds fewer than 3 in 4 of the names
whole and is narrower than INLINE_ENOUGH, each name gets a line of its own above its
numbers, and numbers that do not fit one line are split into bands of lines. The width is
the `width` argument, else $COLUMNS, else the terminal's when printing to one; into a pipe
or a file, or with `wide`, lines are as long as the data (for `less -S`) and nothing is
shortened.

Rows are formatted CHUNK at a time, the layout measured on the first chunk, so a result of
millions of rows (a pyarrow.RecordBatchReader) prints with bounded memory. Nothing here
interprets markup: a kernel name such as `f<[with T = float]>` prints as it is.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
import unicodedata

from traceql.core.text import clean_text

# pyarrow is imported by the functions that need it: the commands that print no table (help,
# schema, reports, queries) start without it.

FORMATS = ("table", "csv", "tsv", "json", "markdown")
UNITS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
_DECIMALS = {"ns": 0, "us": 1, "ms": 3, "s": 6}  # --unit: to 0.1 us (us), to the microsecond (ms, s)
_RIGHT = {b"align": b"right"}  # field metadata: a text column of numbers, right-justified in tables

SEP = "  "  # between columns
INDENT = "  "  # the lines of numbers under a name that has a line of its own
LONG = 24  # text columns with a longer value are the 'name' columns: last on the line, shortened if need be
INLINE_MIN = 32  # a name column narrower than this goes to a line of its own
INLINE_ENOUGH = 80  # ... and so does one with room for fewer than 3 in 4 of its names whole, below this
CHUNK = 2_000  # rows formatted at a time
ELLIPSIS = "…"
_IDS = re.compile(r"(^|_)(id|pid|tid|seq|ts)$")  # integer columns printed without thousands separators


# ------------------------------------------------------------------------------ cells

def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


_clean = clean_text


NA = "-"  # a table cell without a value (NULL: not applicable or unknown), as PyProf prints it


def _column_cells(arr) -> list[str]:
    import pyarrow as pa

    values = arr.to_pylist()
    if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type) or pa.types.is_dictionary(arr.type):
        return [NA if v is None else _clean(str(v)) for v in values]
    return [NA if v is None else _clean(_cell(v)) for v in values]


def _is_number(field) -> bool:
    import pyarrow as pa

    t = field.type
    return (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)
            or (field.metadata or {}).get(b"align") == b"right")


def text_width(text: str) -> int:
    """Terminal columns of text (East Asian wide characters count 2, combining marks 0)."""
    if text.isascii():
        return len(text)
    return sum(_char_width(ch) for ch in text)


def _char_width(ch: str) -> int:
    if unicodedata.combining(ch):
        return 0
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


def _take(text: str, width: int, from_end: bool = False) -> str:
    """The longest start (or end) of text that is at most `width` columns wide."""
    if width <= 0:
        return ""
    if text.isascii():
        return text[len(text) - width:] if from_end else text[:width]
    chars = reversed(text) if from_end else iter(text)
    out, used = [], 0
    for ch in chars:
        w = _char_width(ch)
        if used + w > width:
            break
        out.append(ch)
        used += w
    return "".join(reversed(out)) if from_end else "".join(out)


def _pad(text: str, width: int, right: bool) -> str:
    gap = width - text_width(text)
    if gap <= 0:
        return text
    return " " * gap + text if right else text + " " * gap


def shorten(text: str, width: int) -> str:
    """text cut to `width` columns with an ellipsis at the end; one line."""
    text = " ".join(str(text).split())
    if text_width(text) <= width:
        return text
    return _take(text, width - 1).rstrip() + ELLIPSIS


def shorten_middle(text: str, width: int) -> str:
    """text cut to `width` columns with an ellipsis in the middle (keeps both ends)."""
    if text_width(text) <= width:
        return text
    if width <= 1:
        return ELLIPSIS[:width]
    head = _take(text, (width - 1) // 2)
    return head + ELLIPSIS + _take(text, width - 1 - text_width(head), from_end=True)


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def _keep_difference(text: str, width: int, first: int) -> str:
    """text in `width` columns, keeping visible the character at index `first` where it
    first differs from a similar text, with a little of what follows it."""
    context = 8
    if first + context < width - 1:  # the difference lies in the head: cut after it
        tail = width - 1 - (first + context)
        return text[:first + context] + ELLIPSIS + _take(text, tail, from_end=True)
    # head, the window around the difference, tail: two ellipses
    tail = max(6, width // 5)
    window = max(12, width // 3)
    head = width - 2 - tail - window
    start = max(head, min(first - window // 3, len(text) - tail - window))
    return text[:head] + ELLIPSIS + text[start:start + window] + ELLIPSIS + _take(text, tail, from_end=True)


def shorten_distinct(texts: list[str], width: int) -> list[str]:
    """Each text cut to `width` columns (in the middle), so that texts that differ stay
    different when the cut would make them alike: the part where a text first differs from
    its most similar neighbour is kept."""
    out = [shorten_middle(t, width) if text_width(t) > width else t for t in texts]
    groups: dict[str, list[int]] = {}
    for i, (o, t) in enumerate(zip(out, texts)):
        if o != t:
            groups.setdefault(o, []).append(i)
    taken = {o for o, t in zip(out, texts) if o == t}
    for short, members in groups.items():
        originals = {texts[i] for i in members}
        if len(originals) == 1 and short not in taken:
            continue
        others = [texts[j] for j in range(len(texts)) if out[j] == short or texts[j] == short]
        for i in members:
            t = texts[i]
            first = max((_common_prefix(t, o) for o in others if o != t), default=0)
            if width >= 20 and t.isascii():
                out[i] = _keep_difference(t, width, first)
    return _settle(out, texts, width)


def _collisions(out: list[str], texts: list[str]) -> list[list[int]]:
    """Groups of indexes whose shortened texts are alike although the texts differ."""
    groups: dict[str, list[int]] = {}
    for i, o in enumerate(out):
        groups.setdefault(o, []).append(i)
    return [m for m in groups.values() if len({texts[i] for i in m}) > 1]


def _around(text: str, width: int, first: int) -> str:
    """text in `width` columns (ASCII): a little of its head, as much as fits from just
    before index `first` on, and a little of its tail."""
    head, tail = min(8, width // 5), min(6, width // 6)
    window = width - head - tail - 2
    start = max(head, first - 2)
    if start + window >= len(text) - tail:  # the window reaches the tail: one cut only
        return text[:head] + ELLIPSIS + text[len(text) - (width - head - 1):]
    return text[:head] + ELLIPSIS + text[start:start + window] + ELLIPSIS + text[len(text) - tail:]


def _settle(out: list[str], texts: list[str], width: int) -> list[str]:
    """The texts still alike after shortening kept apart: each shows the stretch from where it
    first differs from the others of its group; texts alike even so are numbered ('#2')."""
    for group in _collisions(out, texts):
        for i in group:
            t = texts[i]
            if width >= 20 and t.isascii() and out[i] != t:
                first = max(_common_prefix(t, texts[j]) for j in group if texts[j] != t)
                out[i] = _around(t, width, first)
    left = sorted({i for group in _collisions(out, texts) for i in group if out[i] != texts[i]},
                  key=lambda i: texts[i])
    if left:  # numbered within the texts that shorten alike ('#' and up to 3 digits)
        room = max(width - 5, 1)
        bases: dict[str, list[int]] = {}
        for i in left:
            bases.setdefault(shorten_middle(texts[i], room), []).append(i)
        for base, members in bases.items():
            for k, i in enumerate(members, start=1):
                out[i] = f"{base} #{k}"
    return out


# ------------------------------------------------------------------------------ layout

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
    def header(self) -> list[str]:
        lines: list[str] = []
        if self.mode == "line":
            cols = self.bands[0]
            depth = max((len(self.head_lines[i]) for i in cols), default=1)
            for k in range(depth):
                parts = []
                for i in cols:
                    hl = self.head_lines[i]
                    text = hl[k - (depth - len(hl))] if k >= depth - len(hl) else ""
                    parts.append(_pad(text, self.fixed_width[i], self.rights[i]))
                if k == depth - 1:
                    parts += [_pad(self.heads[i], self.flex_width[i], False) for i in self.flex]
                lines.append(SEP.join(parts).rstrip())
            if self.underline:
                rule = [("-" * self.fixed_width[i]) for i in cols]
                rule += ["-" * self.flex_width[i] for i in self.flex]
                lines.append(SEP.join(rule))
            return lines
        for item in self._text_lines():
            if item is None:
                lines.append(SEP.join(_pad(self.heads[i], self.fixed_width[i], False) for i in self.title).rstrip())
            else:
                lines.append(self.heads[item])
        for b, band in enumerate(self.bands):
            indent = self.indent or (INDENT if b else "")
            depth = max(len(self.head_lines[i]) for i in band)
            for k in range(depth):
                parts = []
                for i in band:
                    hl = self.head_lines[i]
                    text = hl[k - (depth - len(hl))] if k >= depth - len(hl) else ""
                    parts.append(_pad(text, self.fixed_width[i], self.rights[i]))
                lines.append(indent + SEP.join(parts).rstrip())
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
                parts = [_pad(cells[i][r], self.fixed_width[i], self.rights[i]) for i in self.bands[0]]
                if self.flex:
                    parts += [_pad(names[i][r], self.flex_width[i], False) for i in self.flex]
                yield SEP.join(parts).rstrip()
                continue
            for item in self._text_lines():
                if item is None:
                    yield SEP.join(_pad(cells[i][r], self.fixed_width[i], False) for i in self.title).rstrip()
                else:
                    yield names[item][r]
            for b, band in enumerate(self.bands):
                indent = self.indent or (INDENT if b else "")
                yield indent + SEP.join(_pad(cells[i][r], self.fixed_width[i], self.rights[i]) for i in band).rstrip()


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


def _chunks(data, size: int = CHUNK):
    """pa.Tables of at most `size` rows from a Table or a RecordBatchReader."""
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


def _schema(data):
    return data.schema


def write_table(data, out, width: int | None = None, transform=None, footer: bool = True) -> int:
    """Print a Table or RecordBatchReader as an aligned text table; the number of rows.
    transform: applied to each chunk (a pa.Table) before it is formatted (humanize)."""
    style = _Style(out)
    layout = None
    count = 0
    for chunk in _chunks(data):
        if transform is not None:
            chunk = transform(chunk)
        cells = [_column_cells(col) for col in chunk.columns]
        if layout is None:
            layout = Layout([clean_text(n) for n in chunk.column_names], [_is_number(f) for f in chunk.schema], cells,
                            width)
            for line in layout.header():
                out.write(style.bold(line) + "\n")
        for line in layout.rows(cells):
            out.write(line + "\n")
        count += chunk.num_rows
    if layout is None:  # no rows: the header alone
        schema = _schema(data)
        if transform is not None:
            schema = transform(schema.empty_table()).schema
        layout = Layout([clean_text(n) for n in schema.names], [_is_number(f) for f in schema],
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


# ------------------------------------------------------------------------------ formats

def json_value(value):
    """What json cannot write by itself: exact integers for integral decimals (sums
    beyond 64 bits), floats for other decimals, text for times and the rest."""
    from decimal import Decimal

    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


def render(data, fmt: str = "table", out=None, *, width: int | None = None, wide: bool = False,
           transform=None) -> None:
    """Print a pyarrow Table or RecordBatchReader in format fmt. Tables for people are fitted
    to `width` (default: terminal_width(out, wide)); transform (e.g. humanize) is applied to
    each chunk of rows of table and markdown output."""
    try:
        _render(data, fmt, out or sys.stdout, width, wide, transform)
    except OverflowError:  # Arrow to Python: a date past year 9999, an interval of 2**31 days, ...
        from traceql.core.errors import UsageError

        raise UsageError("a value of the result is out of the range traceql can print (a date or timestamp "
                         "outside years 1-9999, an interval beyond 999,999,999 days): CAST it to VARCHAR, or "
                         "write --format parquet -o FILE") from None


def _render(data, fmt, out, width, wide, transform) -> None:
    if fmt == "table":
        if width is None:
            width = terminal_width(out, wide)
        write_table(data, out, None if wide else width, transform)
    elif fmt in ("csv", "tsv"):
        import csv

        writer = csv.writer(out, delimiter="," if fmt == "csv" else "\t", lineterminator="\n")
        writer.writerow(_schema(data).names)
        for batch in _chunks(data):
            for row in zip(*(col.to_pylist() for col in batch.columns)):
                writer.writerow(["" if v is None else v for v in row])
    elif fmt == "json":
        first = True
        for batch in _chunks(data):
            names = batch.column_names
            for row in zip(*(col.to_pylist() for col in batch.columns)):
                text = json.dumps(dict(zip(names, row)), default=json_value, indent=1)
                out.write(("[\n" if first else ",\n") + " " + text.replace("\n", "\n "))
                first = False
        out.write("[]\n" if first else "\n]\n")
    elif fmt == "markdown":
        names = _schema(data).names if transform is None else transform(_schema(data).empty_table()).column_names
        out.write("| " + " | ".join(clean_text(n).replace("|", "\\|") for n in names) + " |\n")
        out.write("|" + "|".join("---" for _ in names) + "|\n")
        for batch in _chunks(data):
            if transform is not None:
                batch = transform(batch)
            for row in zip(*(col.to_pylist() for col in batch.columns)):
                out.write("| " + " | ".join(clean_text(_cell(v)).replace("|", "\\|") for v in row) + " |\n")
    else:
        raise ValueError(f"unknown format {fmt}")


# ------------------------------------------------------------------------------ numbers

def _sig3(value: float) -> str | None:
    """value to three significant digits without an exponent; None when it rounds to 1000."""
    text = f"{value:.3g}"
    return None if "e" in text else text


def human_ns(ns) -> str:
    """A duration in ns as a short readable string: 1.23 ms."""
    if ns is None:
        return "-"
    a = abs(ns)
    if a < 1_000:
        return f"{ns:.3g} ns" if isinstance(ns, float) else f"{ns} ns"
    for unit, scale in (("us", 1e3), ("ms", 1e6), ("s", 1e9)):
        if a < scale * 1_000 or unit == "s":
            text = _sig3(ns / scale)
            if text is not None:
                return f"{text} {unit}"
            if unit == "s":
                return f"{ns / scale:,.0f} s"
    return f"{ns} ns"  # not reached


def human_bytes(n) -> str:
    """A byte count as a short readable string with decimal prefixes: 1.05 MB."""
    if n is None:
        return "-"
    a = abs(n)
    if a < 1_000:
        return f"{n:.0f} B" if isinstance(n, float) else f"{n} B"
    for unit, scale in (("kB", 1e3), ("MB", 1e6), ("GB", 1e9), ("TB", 1e12)):
        if a < scale * 1_000 or unit == "TB":
            text = _sig3(n / scale)
            if text is not None:
                return f"{text} {unit}"
            if unit == "TB":
                return f"{n / scale:,.0f} TB"
    return f"{n} B"  # not reached


def human_flops(n) -> str:
    """A count of floating-point operations with decimal prefixes: 1.93 TFLOP, 2.38 GFLOP."""
    if n is None:
        return "-"
    a = abs(n)
    if a < 1_000:
        return f"{n:.0f} FLOP" if isinstance(n, float) else f"{n} FLOP"
    for unit, scale in (("kFLOP", 1e3), ("MFLOP", 1e6), ("GFLOP", 1e9), ("TFLOP", 1e12), ("PFLOP", 1e15)):
        if a < scale * 1_000 or unit == "PFLOP":
            text = _sig3(n / scale)
            if text is not None:
                return f"{text} {unit}"
            if unit == "PFLOP":
                return f"{n / scale:,.0f} PFLOP"
    return f"{n} FLOP"  # not reached


def short_float(value) -> str | None:
    """A ratio or rate (GB/s, TFLOP/s) to three significant digits: 8.55, 0.00229, 1,234."""
    if value is None:
        return None
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    a = abs(value)
    if a < 1e-4:
        return f"{value:.2e}"
    text = _sig3(value)
    return text if text is not None else f"{value:,.0f}"


def in_unit(ns, unit: str) -> str | None:
    """A duration in ns as a number in `unit` with thousands separators: ns exact (0.1 for
    averages), us to 0.1 us, ms and s to the microsecond ('1,841.631' ms)."""
    if ns is None:
        return None
    if unit == "ns":
        return f"{ns:,.1f}" if isinstance(ns, float) and ns != int(ns) else f"{int(ns):,}"
    return f"{ns / UNITS[unit]:,.{_DECIMALS[unit]}f}"


def humanize(table, unit: str | None = None, labels: dict | None = None):
    """For people: *_ns columns as readable durations ('1.23 ms') named without the suffix,
    or, with unit, as numbers in that unit named *_<unit>; bytes and *_bytes columns as
    '1.05 MB', flops and *_flops as '1.93 TFLOP' (csv and json keep the exact counts);
    percentages (pct, *_pct) to two decimals; other fractional numbers to three significant
    digits; counts with thousands separators; headers from labels where given, else the
    column's name in words ('cpu total', 'avg ms': no underscores in tables for people)."""
    import pyarrow as pa

    labels = labels or {}
    fields, columns = [], []
    for name, col in zip(table.column_names, table.columns):
        header = labels.get(name)
        if header is None and "_" in name and not name.endswith("_ns"):  # 'cpu total', not 'cpu_total'
            header = name.replace("_", " ")
        kind = col.type
        number = pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind)
        if name.endswith("_ns") and number:
            values = col.to_pylist()
            if unit is None:
                col, shown = pa.array([None if v is None else human_ns(v) for v in values], pa.string()), name[:-3]
            else:
                col, shown = pa.array([in_unit(v, unit) for v in values], pa.string()), f"{name[:-3]} {unit}"
            shown = shown.replace("_", " ")
            fields.append(pa.field(header or shown, pa.string(), metadata=_RIGHT))
        elif (name == "bytes" or name.endswith("_bytes")) and number:
            col = pa.array([None if v is None else human_bytes(v) for v in col.to_pylist()], pa.string())
            fields.append(pa.field(header or name, pa.string(), metadata=_RIGHT))
        elif (name == "flops" or name.endswith("_flops")) and number:
            col = pa.array([None if v is None else human_flops(v) for v in col.to_pylist()], pa.string())
            fields.append(pa.field(header or name, pa.string(), metadata=_RIGHT))
        elif (name == "pct" or name.endswith("_pct")) and pa.types.is_floating(kind):
            col = pa.array([None if v is None else f"{v:.2f}" for v in col.to_pylist()], pa.string())
            fields.append(pa.field(header or name, pa.string(), metadata=_RIGHT))
        elif pa.types.is_floating(kind) or (pa.types.is_decimal(kind) and kind.scale > 0):
            col = pa.array([short_float(None if v is None else float(v)) for v in col.to_pylist()], pa.string())
            fields.append(pa.field(header or name, pa.string(), metadata=_RIGHT))
        elif number and not _IDS.search(name):
            col = pa.array([None if v is None else f"{v:,}" for v in col.to_pylist()], pa.string())
            fields.append(pa.field(header or name, pa.string(), metadata=_RIGHT))
        else:
            fields.append(pa.field(header or name, col.type))
        columns.append(col)
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


# ------------------------------------------------------------------------------ summary

def summary_time(ns, unit: str | None = None) -> str:
    """A time in `traceql summary`: as the reports print it ('4.01 ms', '17 us': three
    significant digits, never more than the source's resolution suggests); with unit, a plain
    number in that unit."""
    if ns is None:
        return "-"
    if unit is not None:
        return in_unit(ns, unit)
    return human_ns(ns)


def render_summary(summary, fmt: str = "table", out=None, unit: str | None = None, *, width: int | None = None,
                   wide: bool = False) -> None:
    """`traceql summary`: nvprof's layout for people (table), the rows for machines."""
    out = out or sys.stdout
    if fmt in ("csv", "tsv"):
        render(summary.rows, fmt, out)
        return
    if fmt == "json":
        doc = {"traces": summary.traces.to_pylist(), "gpus": summary.gpus.to_pylist(),
               "rows": summary.rows.to_pylist()}
        out.write(json.dumps(doc, default=json_value, indent=1) + "\n")
        return
    if fmt == "table" and width is None:
        width = terminal_width(out, wide)
    if wide or fmt != "table":
        width = None
    traces = summary.traces.to_pylist()
    gpus = summary.gpus.to_pylist()
    rows = summary.rows.to_pylist()
    groups = [[t] for t in traces] if summary.per_trace else [traces]
    for i, group in enumerate(groups):
        if i:
            out.write("\n")
        ids = {t["trace_id"] for t in group}
        for t in group:
            _trace_header(t, [g for g in gpus if g["trace_id"] == t["trace_id"]], out, fmt, unit, width)
        if not summary.per_trace and len(group) > 1:
            out.write(f"\nSections below: the {len(group)} traces of one job together (--per-trace splits them)\n")
        mine = [r for r in rows if not summary.per_trace or r["trace_id"] in ids]
        for section, what in (
                ("GPU activities", "all GPU activities (kernels, copies, memsets, graph executions)"),
                ("API calls", "all CUDA API calls")):
            part = [r for r in mine if r["section"] == section]
            out.write("\n" + fill(f"{section} (Time(%) = share of the summed time of {what}, not of wall time):",
                                   width, "") + "\n")
            if fmt == "markdown":
                _markdown_section(part, out, unit)
            else:
                _text_section(part, out, unit, width)


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


def source_label(source_format: str | None, exporter_version: str | None) -> str:
    """'nsys 2025.1.3.140', 'PyTorch profiler (Kineto)': the format's name once."""
    if exporter_version and source_format and source_format.lower() in exporter_version.lower():
        return exporter_version
    return " ".join(v for v in (source_format, exporter_version) if v)


def _trace_header(t, gpus, out, fmt, unit, width=None) -> None:
    version = source_label(t["source_format"], t["exporter_version"])
    bullet = "- " if fmt == "markdown" else "  "
    head, path = f"trace {t['trace_id']}: ", clean_text(t["path"])
    if width is not None and text_width(head + path) > width:  # the file's name kept, the middle of its folder cut
        path = shorten_middle(path, width - text_width(head))
    out.write(fill(f"{head}{path} ({version})", width, "") + "\n")
    if t["span_ns"] is None:
        out.write(f"{bullet}span: none (no event with a time)\n")
    else:
        span = summary_time(t["span_ns"], unit) + (f" {unit}" if unit else "")
        out.write(fill(f"{bullet}span: {span} from the first to the last event of any kind", width, bullet) + "\n")
    if not gpus:
        out.write(f"{bullet}GPUs: none recorded\n")
    idle = [g for g in gpus if not g["ops"]]
    if len(idle) > 1:  # GPUs of the machine the program did not use: one line, after the others
        gpus = [g for g in gpus if g["ops"]]
    for g in gpus:
        busy = summary_time(g["busy_ns"], unit) + (f" {unit}" if unit else "")
        pct = "-" if g["busy_pct"] is None else f"{g['busy_pct']:.2f}%"
        out.write(fill(f"{bullet}GPU {g['device_id']} {clean_text(g['device'] or '(name not recorded)')}: busy {busy} = {pct} "
                        f"of the span (time with at least one kernel, copy, memset or CUDA graph running; "
                        f"{g['ops']:,} operations)", width, bullet) + "\n")
        if g.get("idle_ns") is not None and t["span_ns"]:  # the temporal breakdown, report --by breakdown
            parts = ", ".join(f"{name} {100.0 * g[col] / t['span_ns']:.2f}%" for name, col in (
                ("compute", "compute_ns"), ("communication", "comm_ns"), ("memory only", "memory_ns"),
                ("idle", "idle_ns")))
            sub = "  - " if fmt == "markdown" else "    "
            out.write(fill(f"{sub}of the span: {parts} (report --by breakdown)", width, sub) + "\n")
    if len(idle) > 1:
        names = sorted({g["device"] or "(name not recorded)" for g in idle})
        ids = ", ".join(str(g["device_id"]) for g in idle)
        out.write(fill(f"{bullet}GPUs {ids} ({', '.join(names)}): no kernel, copy or memset", width, bullet) + "\n")


def _section_cells(rows, unit):
    time_head = "Time" if unit is None else f"Time({unit})"
    heads = ["Time(%)", time_head, "Calls", "Avg", "Min", "Max", "Name"]
    if unit is not None:
        heads[3:6] = [f"{h}({unit})" for h in heads[3:6]]
    cells = [[("-" if r["pct"] is None else f"{r['pct']:.2f}%"), summary_time(r["total_ns"], unit), f"{r['calls']:,}",
              summary_time(r["avg_ns"], unit), summary_time(r["min_ns"], unit), summary_time(r["max_ns"], unit),
              _clean(r["name"]) if r["name"] is not None else "(unnamed)"] for r in rows]
    return heads, cells


def _text_section(rows, out, unit, width=None) -> None:
    heads, cells = _section_cells(rows, unit)
    if not cells:
        out.write("  (none)\n")
        return
    columns = [list(col) for col in zip(*cells)]
    layout = Layout(heads, [True] * 6 + [False], columns, width, underline=False)
    for line in layout.header():
        out.write(line + "\n")
    for line in layout.rows(columns):
        out.write(line + "\n")


def _markdown_section(rows, out, unit) -> None:
    heads, cells = _section_cells(rows, unit)
    out.write("\n| " + " | ".join(heads) + " |\n")
    out.write("|" + "|".join("---:" for _ in heads[:-1]) + "|---|\n")
    for c in cells:
        out.write("| " + " | ".join(v.replace("|", "\\|") for v in c) + " |\n")
