"""An ingest_stats warning as people read it, its count first ('2,276 of 4,368 GPU operations with
no API call ...'): what ingest prints and `traceql info` lists."""

from __future__ import annotations


# What the count of an ingest_stats warning is a part of (a view of the trace): '2,276 of 4,368'.
_WARNING_TOTALS = {"launch.ops_without_launch": "gpu_op", "gpu_op.negative_duration": "gpu_op",
                   "gpu_op.correlation_ambiguous": "gpu_op", "kernel.unnamed": "kernel",
                   "api_call.negative_duration": "api_call", "nvtx_range.unclosed": "nvtx_range",
                   "nvtx_range.negative_duration": "nvtx_range", "nvtx_range.beyond_depth_cap": "nvtx_range"}


def warning_text(key: str, value, detail: str, totals: dict | None = None) -> str:
    """An ingest_stats warning for people, its count first: '2,276 of 4,368 GPU operations with
    no API call ...' (totals: rows per view of the trace: gpu_op, kernel, api_call, nvtx_range).
    A detail that states its numbers, or names a table first, gets the count after it."""
    if value is None or not detail or detail[:1].isdigit() or key.startswith(("schema.", "source.column_absent.")):
        return detail
    if key.startswith("source.read_with_sqlite3."):
        return f"{detail} ({value:,} rows)"
    if key.startswith("source.duplicate_keys."):
        return f"{detail} ({value:,} rows left out)"
    total = (totals or {}).get(_WARNING_TOTALS.get(key, ""))
    return f"{value:,} of {total:,} {detail}" if total else f"{value:,} {detail}"
