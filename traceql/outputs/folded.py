"""Folded stacks for flame graphs: 'frame;frame;kernel ns' per distinct (stack, kernel) of the
trace(s), from op_stack (the code line behind each GPU operation, traceql.derive.callstacks) through
queries/_internal/folded.sql; `traceql export --format folded` and Workspace.export_folded write them."""

from __future__ import annotations

from pathlib import Path


def folded(ws, trace_id: int | None = None) -> list[tuple[str, int]]:
    """(line without its value, GPU time in ns) per distinct (stack, kernel) of the trace(s),
    heaviest first: the user's frames of each kernel's stack (op_stack), outermost first, then
    the kernel's name as the innermost frame, joined by ';'. Kernels without a stack are
    '[no stack];<kernel>', so the values add up to the kernels' summed time. A stack without
    user frames keeps all of its frames. Several traces: each line starts with 'trace N'."""
    rows = ws.query("_internal/folded", trace_id=trace_id).to_pylist()  # queries/_internal/folded.sql
    several = len({r["trace_id"] for r in rows}) > 1
    out = []
    for r in rows:
        tid, frames, kernel, ns = r["trace_id"], r["frames"], r["kernel"], r["kernel_ns"]
        parts = ([f"trace {tid}"] if several else []) + list(frames or ["[no stack]"]) + [kernel or "[unnamed]"]
        out.append((";".join(_frame_text(p) for p in parts), int(ns)))
    return out


def _frame_text(frame: str) -> str:
    """A frame as one field of a folded line: no ';' (the separator) and no line breaks."""
    return " ".join(frame.replace(";", ",").split())


def write_folded(ws, output, trace_id: int | None = None, overwrite: bool = False) -> int:
    """Write the folded stacks of the trace(s) to OUTPUT; the number of lines."""
    from traceql.core.errors import UsageError

    output = Path(output)
    if output.exists() and not overwrite:
        raise UsageError(f"{output}: exists; use --overwrite to replace it")
    lines = folded(ws, trace_id)
    output.parent.mkdir(parents=True, exist_ok=True)
    with open(output, "w", encoding="utf-8", newline="\n") as fh:
        for text, ns in lines:
            fh.write(f"{text} {ns}\n")
    return len(lines)
