"""The derived tables of a trace, by family (traceql.derive.derivation: schemas/derive/graph.csv):
which families an ingest builds, filling them from a trace's contract rows (derive), building
the deferred ones on first use or on demand (build_families), and emptying the staging catalog
and temporary objects the steps leave. Used by ingest (traceql.store.load), a workspace's first
query of a family (traceql.store.workspace) and traceql upgrade."""

from __future__ import annotations

import duckdb

from traceql.core.resources import read_schema
from traceql.derive import callstacks, derivation, windows
from traceql.store import stored


# The contract tables computed from other contract tables alone, in order (schemas/derive/graph.csv):
# launching calls, enclosing ranges, per-range GPU work, PyTorch ops and their kernels with FLOPs
# and bytes (traceql/pytorch.py), GPU peaks, busy time, the unattributed totals.
DERIVED_TABLES = derivation.tables()


def ingest_families() -> set[str]:
    """The families of derived tables an ingest builds (traceql.derive.derivation): the ingest family,
    every family with TRACEQL_DERIVE=eager or full, and with FLOPs plug-ins in effect (--flops,
    $TRACEQL_FLOPS, entry points) the PyTorch family too: kernel_op is costed with the plug-ins
    of the ingest, not with whatever is in effect when it is first read."""
    from traceql.derive import flops_plugins

    if derivation.mode() != "lazy":
        return set(derivation.families())
    if flops_plugins.active().plugins:
        return derivation.requires("pytorch")
    return {derivation.INGEST}


# Calls per window in which op_range is built (schemas/derive/op_range.sql): whole, its ASOF join
# and window function spill beyond a few million calls under the default memory limit.
OP_RANGE_WINDOW_CALLS = 1_500_000


def _op_range_windows(con: duckdb.DuckDBPyConnection) -> list[windows.Window]:
    """The windows of derived_op_range: the start times of the calls in raw.op_calls, about
    OP_RANGE_WINDOW_CALLS calls each, and the earliest end of each window's calls."""
    return windows.windows(con, "raw.op_calls", "a_ts", OP_RANGE_WINDOW_CALLS, end="a_end")


def derive(con: duckdb.DuckDBPyConnection, trace_id: int, step=lambda name: None, families=None) -> list[str]:
    """Fill the derived tables of FAMILIES (traceql.derive.derivation; default: every family) for trace
    TRACE_ID from its contract rows (ingest; traceql upgrade when a trace's source file is gone;
    a workspace's first query of a family). Needs the raw staging catalog attached. A step whose
    inputs hold no row of the trace is skipped (not with TRACEQL_DERIVE=full). Returns the
    tables computed."""
    con.execute("SET VARIABLE trace_id = ?", [trace_id])
    full = derivation.mode() == "full"
    done, torch_data = [], False
    for s in derivation.graph():
        if families is not None and s.family not in families:
            continue
        table = s.table
        step(table)
        if s.needs_any and not full and not any(con.execute(f"SELECT EXISTS (SELECT 1 FROM {t} WHERE trace_id = ?)",
                                            [trace_id]).fetchone()[0] for t in s.needs_any):
            continue
        if table == "torch_op":
            from traceql.derive.pytorch import prepare_torch_op

            prepare_torch_op(con)
        elif table == "kernel_op":
            from traceql.derive.pytorch import prepare_kernel_op

            prepare_kernel_op(con)
            torch_data = True
        elif table == "device_peak" and not torch_data:  # the GPU tables of schemas/torch/ (kernel_op loads them too)
            from traceql.derive.pytorch import load_data

            load_data(con)
        elif table == "nvtx_range":
            con.execute(read_schema("derive/group_name.sql"))  # the macro nvtx_range.sql uses
        sql = read_schema(f"derive/{table}.sql")
        if table == "op_stack":  # also (re)writes the PyProf stacks of call_stack
            sql = callstacks.inline(sql)
        con.execute(sql)
        if table == "launch":  # the plain join when no two calls share a key (schemas/derive/launch.sql)
            shared = con.execute("SELECT keys FROM launch_shared_keys").fetchone()[0]
            con.execute(f"INSERT INTO launch BY NAME SELECT * FROM {'derived_launch' if shared else 'derived_launch_first'}")
        elif table == "op_range":  # in windows of calls on a big trace (schemas/derive/op_range.sql)
            windows.fill(con, "op_range", "derived_op_range", ("op_from", "op_to", "op_reach"), _op_range_windows(con))
        else:
            con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM derived_{table}")
        if table == "nvtx_range":  # a trace's ranges are in one of the two (schemas/include/nvtx_range_any.sql)
            con.execute(f"DELETE FROM {derivation.RANGE_SOURCE} WHERE trace_id = ?", [trace_id])
            if con.execute("SELECT EXISTS (SELECT 1 FROM memory_event WHERE trace_id = ?)", [trace_id]).fetchone()[0]:
                con.execute(read_schema("derive/memory_range.sql"))  # the memory events' ranges (graph.csv: writes)
        done.append(table)
        free_staging(con)
    return done


def build_families(con: duckdb.DuckDBPyConnection, wanted) -> dict[int, list[str]]:
    """Build the deferred families WANTED (with the families they need) for every trace of the
    workspace on CON that lacks them: their tables, their diagnostics (ingest_stats) and the
    stored reports that read them; recorded in derived_family. Run on a writing copy under the
    workspace lock (traceql.store.workspace): what another process built meanwhile is not built again.
    Returns trace id -> the families built for it."""
    need = set()
    for f in wanted:
        need |= derivation.requires(f)
    built: dict[int, list[str]] = {}
    missing = derivation.pending(con)
    traces = sorted({t for f, ids in missing.items() if f in need for t in ids})
    if not traces:
        return built
    con.execute("ATTACH ':memory:' AS raw")
    try:
        for trace_id in traces:
            have = [f for f in derivation.families() if trace_id not in missing.get(f, ())]
            new = [f for f in derivation.ordered(need) if trace_id in missing.get(f, ())]
            _forget_rows(con, trace_id, new)
            derive(con, trace_id, families=set(new))
            stats_sql = derivation.stats_sql(new, have + new)
            rows = [] if stats_sql is None else con.execute(
                f"SELECT * FROM ({stats_sql}) AS s(trace_id, key, value, severity, detail) WHERE trace_id = ?",
                [trace_id]).fetchall()
            if "pytorch" in new:
                from traceql.derive.pytorch import plugin_stats

                rows += [(trace_id, k, v, sv, d) for k, v, sv, d in plugin_stats()]
            if rows:  # a key recorded before (the family's rows were there, derived_family did not say so)
                con.execute("DELETE FROM ingest_stats WHERE trace_id = ? AND list_contains(?::VARCHAR[], key)",
                            [trace_id, sorted({r[1] for r in rows})])
                add_stats(con, rows)
            stored.store(con, trace_id, families=have + new, only_new=new)
            derivation.record(con, trace_id, new)
            built[trace_id] = new
    finally:
        drop_temp_objects(con)
        con.execute("DETACH DATABASE IF EXISTS raw")  # (a Ctrl-C inside free_staging: raw may be gone)
    return built


def _forget_rows(con: duckdb.DuckDBPyConnection, trace_id: int, families) -> None:
    """Delete the trace's rows from the tables of FAMILIES before they are built: rows that a
    workspace holds although derived_family does not list the family (its rows deleted by
    `sql --write`) would otherwise be counted twice."""
    present = {n for (n,) in con.execute("SELECT table_name FROM duckdb_tables() WHERE database_name = "
                                         "current_database() AND schema_name = 'main'").fetchall()}
    for step in derivation.graph():
        if step.family in families and step.table in present:
            if step.table == "nvtx_range" and not con.execute(
                    f"SELECT EXISTS (SELECT 1 FROM {derivation.RANGE_SOURCE} WHERE trace_id = ?)", [trace_id]).fetchone()[0]:
                continue  # the ranges were nested already and their source rows dropped: nvtx_range holds them
            con.execute(f'DELETE FROM "{step.table}" WHERE trace_id = ?', [trace_id])


def add_stats(con: duckdb.DuckDBPyConnection, rows) -> None:
    """Append ROWS, (trace_id, key, value, severity, detail) tuples, to ingest_stats in one statement:
    executemany ran one INSERT, and in a workspace one commit, per row (a small ingest writes some
    ten rows: 0.02-0.04 CPU s)."""
    rows = list(rows)
    if rows:
        con.execute("INSERT INTO ingest_stats SELECT unnest(?::INTEGER[]), unnest(?::VARCHAR[]), "
                    "unnest(?::BIGINT[]), unnest(?::VARCHAR[]), unnest(?::VARCHAR[])",
                    [list(column) for column in zip(*rows)])


def free_staging(con: duckdb.DuckDBPyConnection, *temp_tables: str) -> None:
    """Empty the staging catalog (raw), and drop the temporary tables TEMP_TABLES: the source tables
    once the contract tables hold their rows, each derivation's intermediate tables once it is
    done. raw is detached and attached again, empty: two statements, where listing its tables and
    dropping each took one per table (some 30 in an nsys ingest)."""
    con.execute("DETACH raw")
    con.execute("ATTACH ':memory:' AS raw")
    for name in temp_tables:
        con.execute(f'DROP TABLE IF EXISTS temp.main."{name}"')


def drop_temp_objects(con) -> None:
    for name, kind in con.execute(
            "SELECT view_name, 'VIEW' FROM duckdb_views() WHERE temporary AND NOT internal "
            "UNION ALL SELECT table_name, 'TABLE' FROM duckdb_tables() WHERE temporary").fetchall():
        con.execute(f'DROP {kind} IF EXISTS temp.main."{name}"')
