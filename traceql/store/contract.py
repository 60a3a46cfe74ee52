"""The contract version of a workspace: which version of the views, columns and attribution
rules its rows were computed under.

Every workspace records it in its `workspace_version` table (one row), written when the
workspace is created and on every write (ingest, `sql --write`, `upgrade`, `rm`). A traceql
reads only workspaces of its own version: an older one is stale (its derived tables follow
rules this version changed) and `traceql upgrade` brings it forward; a newer one is refused.
A workspace without the table was written before versions were recorded: contract 1.

Every change to a view, column or rule that users see bumps CONTRACT_VERSION, with a section
in schemas/CHANGELOG.md and an entry in CHANGES below (what a user of an older workspace is
told), and traceql/upgrade.py learns to bring the previous version forward.
"""

from __future__ import annotations

from datetime import datetime, timezone

import duckdb

from traceql.core.version import __version__
from traceql.core.errors import NewerWorkspaceError, StaleWorkspaceError

CONTRACT_VERSION = 3

# version -> what changed in it, one line, for the message on a stale workspace
CHANGES = {
    2: "attribution: a range holds the GPU work of every thread of its process (op_range, range_gpu with "
       "own/other-thread kernel time, the range report); nvtx_range.group_name and paths of grouping names; "
       "a depth cap; graph_exec, graph_event, memcpy/memset.graph_id; trace.file_sha256; PyTorch profiler (Kineto) "
       "traces with nvtx_range.args and trace.world_size; sync_event, osrt_call, profiler_overhead, gpu_metric, "
       "launch.category and device_busy's temporal breakdown",
    3: "CUDA graphs traced whole (graph_exec) count as GPU busy and compute in device_busy (summary, breakdown, "
       "rank) and in the analyze rules; sync_calls reports host reads (.item(), .cpu(): kind 'copy') with the op "
       "that forced them; pageable_memcpy costs a copy by its own time; the rule exposed_memcpy (copies no "
       "kernel overlapped); "
       "kernel_op.call_range_id and report --by kernel-op's op/mod as PyProf names them (the outermost PyProf "
       "call) with the innermost op in aten_op; a FLOPs plug-in for a wrapped module costs the whole call"
       "; PyTorch ops: torch_op.recompute and kernel_op.recompute (activation checkpointing; recompute ops "
       "are forward), torch_op.collective and comm_bytes; report --by op has recompute_ns, comm_ns, collectives and "
       "comm_bytes, compute columns without communication kernels, and '[no op: <reason>]' rows; "
       "trace.source_format 'rocpd' (rocprofv3 databases: agents as devices, HIP calls as api_call) and "
       "'rocprof' (rocprof v1 results.db) and 'rpd' (rocmProfileData, .rpd or .rpd.gz, HIP graph 'Task' ops as kernels, roctx ranges as nvtx_range) and 'rocprofv3_json' (rocprofv3 JSON); "
       "sync_event rows for synchronizing HIP calls on AMD traces, which analyze's sync_calls counts; trace.gpu_api ('CUDA'/'HIP'; HIP traces, ROCm PyTorch ones included, name copies '[HIP memcpy <kind>]'); "
       "hostile input: Kineto device ids beyond 32 bits and op sizes that are not counts (or FLOPs past 2**63-1) "
       "are NULL with a warning; times beyond +-2**62 ns (or durations adding up to 2**62 ns in a trace or a "
       "workspace, or traces' spans adding up past 2**63-1) are refused at ingest; "
       "memory_event (allocations and frees with levels, ranges and Python stacks, Kineto profile_memory and nsys "
       "--cuda-memory-usage), the analyze rules memory_leak, allocator_churn and memory_peak, and GPU memory "
       "counter tracks in the Perfetto export; "
       "trace.driver_version, cuda_driver_version, cuda_runtime_version and torch_version "
       "(diff warns when they differ); gpu_gaps: overhead records that start at the same time all count for "
       "cause 'profiler'; nvtx_range nested when a query first reads it (the ranges wait in nvtx_range_source), "
       "and memory_event.range_id placed then",
}

TABLE = "workspace_version"

DDL = f"""CREATE TABLE IF NOT EXISTS {TABLE} (
    contract_version  INTEGER NOT NULL,
    traceql_version   VARCHAR NOT NULL,
    written_at        TIMESTAMP NOT NULL
)"""


def read_version(con: duckdb.DuckDBPyConnection, tables: set[tuple[str, str]] | None = None) -> int:
    """The contract version of the workspace open on con (1 when it records none). Read with
    built-ins qualified by system.main and no aggregate: `sql --write` reads it before it has
    checked the workspace's macros (traceql.store.guard), so a stored macro cannot answer.
    tables: the workspace's (schema, table) names when the caller has listed them already."""
    if tables is not None:
        found = any(name == TABLE for _, name in tables)
    else:
        found = con.execute("SELECT 1 FROM system.main.duckdb_tables() WHERE database_name = "
                            "system.main.current_database() AND table_name = ? LIMIT 1", [TABLE]).fetchone()
    if not found:
        return 1
    row = con.execute(f"SELECT contract_version FROM {TABLE} WHERE contract_version IS NOT NULL "
                      "ORDER BY contract_version DESC LIMIT 1").fetchone()
    return int(row[0]) if row else 1


def write_version(con: duckdb.DuckDBPyConnection) -> None:
    """Record that the workspace on con holds this version's contract (after a write)."""
    con.execute(DDL)
    con.execute(f"DELETE FROM {TABLE}")
    con.execute(f"INSERT INTO {TABLE} VALUES (?, ?, ?)",
                [CONTRACT_VERSION, __version__, datetime.now(timezone.utc).replace(tzinfo=None)])


def check(con: duckdb.DuckDBPyConnection, path, tables: set[tuple[str, str]] | None = None) -> None:
    """Raise StaleWorkspaceError or NewerWorkspaceError unless the workspace is of this version.
    tables: as for read_version."""
    version = read_version(con, tables)
    if version < CONTRACT_VERSION:
        changed = "; ".join(f"{v}: {CHANGES[v]}" for v in range(version + 1, CONTRACT_VERSION + 1))
        raise StaleWorkspaceError(
            f"{path}: workspace of contract version {version}, this traceql reads version {CONTRACT_VERSION} "
            f"(changed in {changed}); run 'traceql --db {path} upgrade' to bring it forward "
            "(nothing is changed until you do)")
    if version > CONTRACT_VERSION:
        raise NewerWorkspaceError(
            f"{path}: workspace of contract version {version}, written by a newer traceql; this traceql "
            f"({__version__}) reads version {CONTRACT_VERSION}: update traceql")
