"""The report registry: every report of `traceql report --by NAME` once, with all that the layers
know about it. A row names

- query: its query file (queries/<query>.sql) and defaults, the parameters given unless the caller
  gives them (every report query also declares trace_id and per_trace);
- blurb: one line for `traceql report --help` (at most 60 characters, so that every --by value fits
  one line of an 80-column terminal; `traceql reports NAME` documents the report whole);
- groupings: what --group chooses for it, the default first;
- range_rule: how --range/--range-match filter it (traceql.query.rangefilter): the input's id
  column, the fragment of schemas/filters/ that holds it, the report's time column and the
  denominator of range_pct ('gpu_ns' or 'cpu_ns'); None: --range does not apply;
- stored: whether ingest stores its default rows per trace (traceql.store.stored): the reports
  whose input grows with the trace.

OPTIONS says which report-specific options apply to which reports; reports.run_report checks them
for the CLI and the Python API alike."""

from __future__ import annotations

from typing import NamedTuple


class RangeRule(NamedTuple):
    key: str          # the input's id column
    fragment: str     # schemas/filters/<fragment>.sql
    column: str       # the report's time column, whose share range_pct is
    denominator: str  # 'gpu_ns' or 'cpu_ns'


class Report(NamedTuple):
    query: str
    defaults: dict
    blurb: str | None = None
    groupings: tuple[str, ...] = ()
    range_rule: RangeRule | None = None
    stored: bool = False


_OPS = RangeRule("kernel_id", "range_ops", "total_ns", "gpu_ns")

REPORTS: dict[str, Report] = {
    "kernel": Report("kernel", {"with_dims": False}, "kernels by name, like nvprof's GPU activities",
                     range_rule=_OPS, stored=True),
    "api": Report("api", {}, "CUDA (or HIP) API calls by name (no _vNNNN suffix)",
                  range_rule=RangeRule("api_id", "range_calls", "total_ns", "cpu_ns"), stored=True),
    "memcpy": Report("memcpy", {}, "copies by direction, with bytes and throughput (GB/s)",
                     range_rule=RangeRule("memcpy_id", "range_ops", "total_ns", "gpu_ns")),
    "memset": Report("memset", {}, "memsets by memory kind, with bytes and throughput",
                     range_rule=RangeRule("memset_id", "range_ops", "total_ns", "gpu_ns")),
    "gpu": Report("gpu", {}, "kernels, copies and memsets together",
                  range_rule=RangeRule("op_id", "range_gpu", "total_ns", "gpu_ns"), stored=True),
    "stream": Report("stream", {}, "GPU work per stream, with busy time (overlap once)"),
    "device": Report("device", {}, "GPU work per GPU, busy time and its share of the span"),
    "thread": Report("thread", {}, "API calls per CPU thread and the GPU work they launched"),
    "launch": Report("launch", {}, "per kernel name: launch call time, queue delay",
                     range_rule=RangeRule("kernel_id", "range_ops", "kernel_total_ns", "gpu_ns")),
    "range": Report("range", {"group_by": "group", "spread": False},
                    "NVTX ranges: CPU, GPU and sync time (--spread, --skip-first)",
                    groupings=("group", "name", "path"), stored=True),
    "op": Report("op", {"with_shapes": False, "level": "top"},
                 "PyTorch ops: forward/backward GPU time, FLOPs, roofline", range_rule=_OPS, stored=True),
    "kernel-op": Report("kernel_op", {}, "per kernel its PyTorch op: PyProf's table (-c all, --width)",
                        range_rule=RangeRule("kernel_id", "range_ops", "sil", "gpu_ns")),
    "layer": Report("layer", {}, "GPU work per PyProf 'layer:' annotation, fwd and bwd", range_rule=_OPS),
    "breakdown": Report("breakdown", {}, "per GPU: compute, exposed communication, memory, idle"),
    "source": Report("source", {"group_by": "frame"}, "GPU time per line of the user's code behind it",
                     groupings=("frame", "stack"), range_rule=RangeRule("op_id", "range_ops", "total_ns", "gpu_ns")),
    "rank": Report("rank", {}, "the ranks of a job side by side, one row per trace"),
    "collective": Report("collective", {}, "collectives matched across ranks: who arrived last"),
    "straggler": Report("straggler", {"measure": "time", "per_iteration": False},
                        "NVTX ranges compared across ranks: the slowest rank"),
    "clock": Report("clock", {}, "how the traces' clocks line up (skew between hosts)"),
    "gpu-trace": Report("gpu_trace", {}, "each kernel, copy, memset in time order (--print-gpu-trace)"),
    "api-trace": Report("api_trace", {}, "each API call in time order (nvprof --print-api-trace)"),
    "memory": Report("memory", {"per_iteration": False}, "each GPU's peak memory and who holds it at the peak"),
}

class Option(NamedTuple):
    """A report-specific option: the CLI's flag, the reports it applies to, its values as a JSON
    schema (boolean: a flag; array: repeatable; enum, minimum, exclusiveMinimum: the values it
    takes), its help, and for the CLI a metavar and a default (shown in --help). The CLI builds its
    click options from these (traceql.cli.params.report_options), the MCP server its report
    tool's arguments, so that both take the same values; reports.check_options refuses an option
    given to a report it does not apply to, in the same words for the CLI, MCP and Python."""
    flag: str
    reports: tuple[str, ...]
    values: dict
    help: str
    metavar: str | None = None
    default: object = None


_WORDS = {"type": "array", "items": {"type": "string"}}
_PEAK = {"type": "number", "exclusiveMinimum": 0}

# Report-specific options: the query's parameter -> Option (the order of `traceql report --help`).
OPTIONS: dict[str, Option] = {
    "with_dims": Option("--with-dims", ("kernel",), {"type": "boolean"}, "kernel: group by grid and block size too."),
    "group_by": Option(
        "--group", ("range", "source"), {"type": "string", "enum": ["group", "name", "path", "frame", "stack"]},
        "range: group instances by operator (the name without PyTorch's per-instance ', seq = N', ', op_id = N', "
        "', sizes = [...]' and PyProf's marker details), by full name, or by nesting path. source: by the "
        "innermost frame of the user's code (frame, the default) or by the whole stack.", default="group"),
    "max_depth": Option("--depth", ("range",), {"type": "integer", "minimum": 1},
                        "range: keep ranges above this depth (path has at most N levels)."),
    "match": Option("--match", ("range",), _WORDS,
                    "range: keep ranges whose name contains WORD (repeatable, any matches, ignores case).",
                    metavar="WORD"),
    "domain": Option("--domain", ("range",), {"type": "string"}, "range: only this NVTX domain ('' = default domain)."),
    "spread": Option("--spread", ("range",), {"type": "boolean"},
                     "range: the spread of the instances too: min, median, max and standard deviation of the CPU "
                     "time and of the kernel time per instance."),
    "skip_first": Option("--skip-first", ("range",), {"type": "integer", "minimum": 0},
                         "range: leave out the first N instances of each name (per trace; the warm-up iterations).",
                         metavar="N"),
    "with_shapes": Option("--with-shapes", ("op",), {"type": "boolean"}, "op: split each op by the input sizes of its calls."),
    "level": Option("--level", ("op",), {"type": "string", "enum": ["top", "leaf"]},
                    "op: the outermost op of each call stack (aten::linear) or the op that launched the kernels "
                    "(aten::addmm).", default="top"),
    "peak_tflops": Option("--peak-tflops", ("op",), _PEAK,
                          "op: peak TFLOP/s for the roofline instead of the GPU's (device_peak).", metavar="TFLOPS"),
    "peak_gbps": Option("--peak-gbps", ("op",), _PEAK,
                        "op: peak memory bandwidth in GB/s for the roofline instead of the GPU's.", metavar="GBPS"),
    "measure": Option("--measure", ("straggler",), {"type": "string", "enum": ["time", "compute"]},
                      "straggler: compare the ranges' durations, or the compute kernel time launched inside them.",
                      default="time"),
    "per_iteration": Option("--per-iteration", ("straggler", "memory"), {"type": "boolean"},
                            "straggler: a row per iteration (the i-th range of a name on every rank) instead of "
                            "per name. memory: each GPU's peak in each iteration (ProfilerStep), with the "
                            "level at its start and end."),
}

# The reports whose rows --group chooses, and what each can group by (the first: the default).
GROUPINGS = {name: r.groupings for name, r in REPORTS.items() if r.groupings}
RANGED = {name: r.range_rule for name, r in REPORTS.items() if r.range_rule is not None}
STORED = tuple(name for name, r in REPORTS.items() if r.stored)
