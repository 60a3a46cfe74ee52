"""The unit of a column, from its name: one rule for the contract's columns and for every result
column (reports, summary, analyze, diff, sql), written once here. The MCP server gives it beside
each column's type (traceql.mcp_server); tests/core/test_units.py checks it against the columns'
descriptions (a column whose description says 'in ns' has unit ns, and so on).

The names follow the contract's conventions (Perfetto's): a time or duration in integer ns is
`ts`, `dur` or ends in `_ns`, `_ts`, `_dur`; sizes are `bytes` or end in `_bytes`; a percentage
is `pct` or ends in `_pct`. A few older names of the contract carry their unit in the
description only (queue_delay, file_size, clock_rate, ...): they are listed by name."""

from __future__ import annotations

import re

# The most rows a --limit (or the API's limit=) can ask for: a signed 64-bit row count, the most
# Arrow's slice and DuckDB's LIMIT take (traceql.query.reports.check_limit).
MAX_LIMIT = 2**63 - 1

# (pattern over the column name, unit): the first that matches wins; None: no unit (ids, names, labels)
RULES: tuple[tuple[re.Pattern, str], ...] = tuple((re.compile(p), u) for p, u in (
    (r"^(ts|dur|duration|sil|queue_delay)$|_(ns|ts|dur)$|^proj_(start|end)$", "ns"),
    (r"^(bytes|allocated|reserved|file_size|total_memory|l2_cache_size|local_memory_per_thread)$"
     r"|_(bytes|shared_memory|smem)$", "bytes"),
    (r"^memory_bandwidth$", "bytes/s"),
    (r"^(gb_per_s|peak_gbps)$", "GB/s"),
    (r"^clock_rate$", "Hz"),
    (r"^tflops$", "TFLOP/s"),
    (r"^flops$", "FLOP"),
    (r"_flops$", "FLOP/s"),
    (r"_tc_ops$", "OP/s"),
    (r"^pct$|_pct$", "%"),
    (r"^(calls|instances|kernels|memcpys|memsets|graphs|ops|gpu_ops|api_calls|launched|queued|allocations"
     r"|iterations|ranks|stacks|gpus|slowest_in|min_calls|call_kernels|kernels_per_call|sm_count|world_size"
     r"|registers|registers_per_thread|findings|rows)$", "count"),
))


def unit(column: str) -> str | None:
    """The unit of a column named COLUMN: 'ns', 'bytes', 'bytes/s', 'GB/s', 'Hz', 'FLOP', 'FLOP/s',
    'TFLOP/s', 'OP/s', '%', 'count', or None (an id, a name, a label, a number without a unit)."""
    for pattern, name in RULES:
        if pattern.search(column):
            return name
    return None
