"""Cell text of tables for people: values as text (NULL as '-'), the width a text takes on a
terminal (wide East Asian characters count 2), and names shortened to fit, kept distinct."""

from __future__ import annotations

import re
import unicodedata

from traceql.core.text import clean_text


RIGHT = {b"align": b"right"}  # field metadata: a text column of numbers, right-justified in tables


ELLIPSIS = "…"


ID_COLUMNS = re.compile(r"(^|_)(id|pid|tid|seq|ts)$")  # integer columns printed without thousands separators


def cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


NA = "-"  # a table cell without a value (NULL: not applicable or unknown), as PyProf prints it


def column_cells(arr) -> list[str]:
    """The cells of a column: a pyarrow array, or a column of a traceql.core.results.Rows chunk
    (its type a DuckDB type name)."""
    values = arr.to_pylist()
    if _is_text(arr.type):
        return [NA if v is None else clean_text(str(v)) for v in values]
    return [NA if v is None else clean_text(cell(v)) for v in values]


def _is_text(t) -> bool:
    if isinstance(t, str):  # a DuckDB type (traceql.core.results.Rows)
        from traceql.core.results import TEXT_TYPES

        return t in TEXT_TYPES
    import pyarrow as pa

    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_dictionary(t)


def is_number(field) -> bool:
    """Whether a column prints right-justified: numbers, and text columns of numbers (RIGHT)."""
    if (field.metadata or {}).get(b"align") == b"right":
        return True
    t = field.type
    if isinstance(t, str):  # a DuckDB type (traceql.core.results.Rows)
        from traceql.core.results import NUMBER_TYPES

        return t in NUMBER_TYPES or t.startswith("DECIMAL(")
    import pyarrow as pa

    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)


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


def pad(text: str, width: int, right: bool) -> str:
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
    """How many leading characters A and B share: a binary search over slices compared whole
    (C++ kernel names run to thousands of characters, and shorten_distinct compares each with
    its neighbours: a loop over the characters cost seconds on a trace of a hundred names)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


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
