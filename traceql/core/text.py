"""Text for people: the one escaping function of everything traceql prints (clean_text), and
DuckDB's multi-line errors as one line (one_line_error)."""

from __future__ import annotations

import re


class _Visible(dict):
    """str.translate's table for clean_text: a control character as an escape, other characters
    kept (a KeyError keeps the character)."""

    # Unicode's bidirectional controls reorder what follows on the line: shown, not obeyed
    BIDI = {0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)}

    def __missing__(self, code: int) -> str:
        if code < 32 or 127 <= code < 160:
            value = {9: "\\t", 10: "\\n", 13: "\\r"}.get(code, f"\\x{code:02x}")
        elif code in self.BIDI or code in (0x2028, 0x2029):
            value = f"\\u{code:04x}"
        else:
            raise KeyError(code)
        self[code] = value
        return value


_VISIBLE = _Visible()


def clean_text(text) -> str:
    """The one escaping function of every text traceql prints for people or writes into a
    markdown file: names, table headers, GPU names, hosts, paths, descriptions, messages. It
    stays one line and cannot drive the terminal: a newline shows as \\n (tab \\t, CR \\r),
    another control character (ESC, BEL, the C1 range) as \\xNN, a bidirectional control or a
    line separator as \\uNNNN. Machine formats (csv, tsv, json, parquet) keep the text as it is."""
    text = text if isinstance(text, str) else str(text)
    return text if text.isprintable() else text.translate(_VISIBLE)


def one_line_error(message: str) -> str:
    """DuckDB's multi-line error as one line: the message, DuckDB's suggestions, and the
    line and column its caret points at."""
    lines = [ln for ln in message.strip().splitlines()]
    out = lines[0].strip() if lines else message
    for i, ln in enumerate(lines):
        m = re.match(r"LINE (\d+): ", ln)
        if m and i + 1 < len(lines) and lines[i + 1].strip() == "^":
            column = lines[i + 1].index("^") - len(m.group(0)) + 1
            out += f" (line {m.group(1)}, column {column})"
        elif ln.startswith("Candidate bindings:") or ln.startswith("Did you mean"):
            out += "; " + ln.strip()
    return out
