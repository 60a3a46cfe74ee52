"""PyTorch ops at ingest: what derive/kernel_op.sql and derive/device_peak.sql read.

The NVTX strings are parsed in SQL: `prepare_torch_op(con)` runs schemas/derive/torch_parse.sql
and fills the ops' enclosing ranges in windows, before schemas/derive/torch_op.sql. FLOPs and
bytes need formulas over shapes (traceql.derive.flops), so `prepare_kernel_op(con)` runs between
torch_op and kernel_op: it loads the data files of schemas/torch/ as temporary tables, maps
every distinct op name to a formula, runs schemas/derive/kernel_op_units.sql (each kernel's
costed call), and computes the cost of each distinct (formula, sizes or marker, dtype)
combination once, in Python, and PyProf's params of each distinct PyProf call
(traceql.derive.pyprof_params). Traces repeat the same few shapes, so that is a few hundred
evaluations even for millions of kernels.

A user's FLOPs plug-ins (traceql.derive.flops_plugins) come first: an op one of them names gets the
formula key 'plugin:<op name>', costed by the plug-in, else (it declines or fails) by the
built-in formula of the op, if any. plugin_stats() gives the failures of the last trace, as
ingest_stats rows.
"""

from __future__ import annotations

from traceql.derive import flops, flops_plugins, pyprof_params, windows
from traceql.sources.adapters import create_temp, data_tables
from traceql.core.resources import read_schema

DATA = ("tensor_core_patterns", "kernel_dtypes", "gpu_peaks", "sm_throughput")


def load_data(con) -> None:
    """schemas/torch/<stem>.csv -> temporary table torch_<stem>."""
    for table, data in data_tables("torch"):
        create_temp(con, "torch_" + table[len("src_"):], data)


_state: dict = {"registry": None, "plugin_keys": {}}


def plugin_stats() -> list[tuple[str, int, str, str]]:
    """ingest_stats rows for the FLOPs plug-ins that failed on the trace derived last."""
    registry = _state["registry"]
    rows = registry.stats() if registry is not None else []
    if _state.get("out_of_range"):
        rows.append(("flops.sizes_out_of_range", _state["out_of_range"], "warning",
                     "distinct input shapes of PyTorch ops whose sizes are not counts (text, None, negative) or whose "
                     "FLOPs or bytes pass 2**63-1: their FLOPs and bytes are NULL"))
    return rows


def formula_keys(con) -> None:
    names = con.execute(
        "SELECT DISTINCT module, name FROM torch_op WHERE trace_id = getvariable('trace_id') AND name IS NOT NULL"
    ).fetchall()
    registry = _state["registry"] = flops_plugins.active()
    registry.failures.clear()
    plugin_keys = _state["plugin_keys"] = {}
    rows = []
    for m, n in names:
        found = registry.lookup(n, m)
        if found is None:
            rows.append((m, n, flops.formula_key(n, m)))
            continue
        key = f"plugin:{n}" if m is None else f"plugin:{m}.{n}"
        plugin_keys[key] = (found[0], found[1], n, flops.formula_key(n, m))
        rows.append((m, n, key))
    create_temp(con, "torch_formula_key", tuple((column, "VARCHAR", [r[i] for r in rows])
                                                 for i, column in enumerate(("module", "name", "key"))))


def unit_costs(con) -> None:
    inputs = con.execute(
        "SELECT DISTINCT unit_kind, key, sizes, marker_text, kdtype, dtypes FROM raw.kop_unit_inputs").fetchall()
    cols: dict[str, list] = {c: [] for c in ("unit_kind", "key", "sizes", "marker_text", "kdtype", "dtypes", "dtype",
                                               "op_family", "flops", "bytes", "params", "tc_eligible")}
    _state["out_of_range"] = 0
    for unit_kind, key, sizes, marker_text, kdtype, dtypes in inputs:
        dtype, c = kdtype, None
        try:
            if unit_kind == "op":
                try:
                    args = flops.args_from_sizes(sizes, dtypes)  # dtypes: Kineto's Input type, else NULL
                except flops.SizeError:
                    raise
                except (ValueError, SyntaxError, MemoryError, RecursionError):
                    args = None
            else:
                args = flops.args_from_marker(marker_text) if marker_text else None
            if args is not None:
                dtype = flops._dtype(args, flops.canonical_dtype(kdtype))
                direction = "backward" if unit_kind == "backward" else "forward"
                if any(a.is_tensor and any(d < 0 for d in a.shape) for a in args):
                    raise ValueError("a negative size")
                if key in _state["plugin_keys"]:
                    c = _plugin_cost(key, args, dtype, direction)
                else:
                    c = flops.cost(key, args, dtype, direction)
                if c is not None and not all(v is None or 0 <= v < 2**63 for v in (c.flops, c.bytes)):
                    raise OverflowError("FLOPs or bytes beyond 2**63-1")
        except (ValueError, TypeError, OverflowError):  # a size that is no count ('a', None, 1e400, -3) or too large
            _state["out_of_range"] += 1
            args, c = None, None
        for name, value in (("unit_kind", unit_kind), ("key", key), ("sizes", sizes), ("marker_text", marker_text),
                            ("kdtype", kdtype), ("dtypes", dtypes), ("dtype", dtype),
                            ("op_family", c.family if c else _family(key)),
                            ("flops", c.flops if c else None), ("bytes", c.bytes if c else None),
                            ("params", c.params if c else _default_params(args, dtype)),
                            ("tc_eligible", c.tc_eligible if c else None)):
            cols[name].append(value)
    types = {"flops": "BIGINT", "bytes": "BIGINT", "tc_eligible": "BOOLEAN"}
    create_temp(con, "torch_unit_cost", tuple((k, types.get(k, "VARCHAR"), v) for k, v in cols.items()))


def _plugin_cost(key: str, args, dtype, direction: str):
    """The plug-in's cost of one unit, else the built-in formula's (None without either)."""
    plugin, name, op, builtin = _state["plugin_keys"][key]
    counts = _state["registry"].cost(plugin, name, op, args, direction)
    built_in = flops.cost(builtin, args, dtype, direction)
    if counts is None:
        return built_in
    if built_in is not None:  # the built-in's family, parameters and tensor-core eligibility stay
        return flops.Cost(built_in.family, counts[0], counts[1], built_in.params, built_in.tc_eligible)
    return flops.Cost(flops.family(builtin) or "custom", counts[0], counts[1], _default_params(args, dtype) or "", None)


def _family(key):
    if key in _state["plugin_keys"]:
        return flops.family(_state["plugin_keys"][key][3]) or "custom"
    return flops.family(key)


def _default_params(args, dtype) -> str | None:
    if not args:
        return None
    return flops._shape_params(args, dtype) or None


def call_params(con) -> None:
    """Temporary table torch_pyprof_params (marker_text, role, params): PyProf's params of each
    distinct PyProf call of the trace's kernels, per role (traceql.derive.pyprof_params)."""
    texts = con.execute(
        "SELECT DISTINCT n.name FROM raw.kop_units u "
        "JOIN nvtx_range n ON n.trace_id = getvariable('trace_id') AND n.range_id = u.call_range_id").fetchall()
    rows = [(text, role, value) for (text,) in texts
            for role, value in (pyprof_params.params(text) or {}).items()]
    create_temp(con, "torch_pyprof_params", tuple((column, "VARCHAR", [r[i] for r in rows])
                                                   for i, column in enumerate(("marker_text", "role", "params"))))


# Ops per window in which raw.torch_anc is filled (schemas/derive/torch_parse.sql), and rows of
# raw.kop_enc (a kernel's enclosing ops) per window in which raw.kop_units is
# (schemas/derive/kernel_op_units.sql; about 1.5 M kernels of a generated trace): in one pass,
# the ASOF join and the aggregates spill on big traces under the default memory limit.
TORCH_ANC_WINDOW_OPS = 4_000_000
KOP_WINDOW_ROWS = 4_000_000


def prepare_torch_op(con) -> None:
    """Before derive/torch_op.sql: raw.torch_parsed, and raw.torch_anc filled from
    derived_torch_anc in windows of about TORCH_ANC_WINDOW_OPS ops (derive/torch_parse.sql)."""
    con.execute(read_schema("derive/torch_parse.sql"))
    spans = windows.windows(con, "raw.torch_parsed", "range_id", TORCH_ANC_WINDOW_OPS, end="e")
    windows.fill(con, "raw.torch_anc", "derived_torch_anc", ("anc_from", "anc_to", "anc_reach"), spans, create=True)


def fill_units(con) -> None:
    """raw.kop_units from derived_kop_units, in windows of the kernel ids of raw.kop_enc, about
    KOP_WINDOW_ROWS rows each (one window of everything when no kernel is in a torch op: the
    layers alone)."""
    spans = windows.windows(con, "raw.kop_enc", "kernel_id", KOP_WINDOW_ROWS)
    windows.fill(con, "raw.kop_units", "derived_kop_units", ("kop_from", "kop_to"),
                 spans or [(windows.MIN, windows.MAX, windows.MIN)], create=True)


def prepare_kernel_op(con) -> None:
    """Before derive/kernel_op.sql (and derive/device_peak.sql): the temporary tables they read."""
    load_data(con)
    formula_keys(con)
    con.execute(read_schema("derive/kernel_op_units.sql"))
    fill_units(con)
    con.execute(read_schema("derive/kernel_op_inputs.sql"))
    unit_costs(con)
    call_params(con)
