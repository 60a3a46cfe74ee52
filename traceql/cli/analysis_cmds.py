"""analyze (findings with evidence) and diff (two runs compared)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from traceql.core.progress import for_stderr
from traceql.cli.context import Context, say_wait, table_width
from traceql.cli.output import check_output, emit, pa_strings, first_rows
from traceql.cli.params import (FILE_HELP, engine_options, file_argument, format_option, limit_option, output_option,
                                overwrite_option, param_option, trace_option, wide_option)
from traceql.cli.group import cli


ANALYZE_HELP = """Why the GPU is idle, what synchronizes, what to fix first.

Runs the rules of the query library's analyze/ folder (traceql queries analyze/RULE shows one):

\b
  gpu_gaps         GPU idle gaps and why the next work came late
  sync_calls       synchronizing calls and the GPU idle time after each
  pageable_memcpy  async copies from pageable memory (they run synchronously)
  sync_memcpy      synchronous host-device copies
  sync_memset      synchronous memsets of pinned or managed memory
  small_kernels    kernels shorter than their launch call (launch overhead)
  low_utilization  chunks of a GPU's time with low time utilization
  exposed_comm     communication kernels no computation overlapped
  exposed_memcpy   memory copies no kernel overlapped (the GPU only copied)
  tensor_cores     matrix products whose kernels use no tensor cores
  memory_leak      GPU memory that grows across iterations, never freed
  allocator_churn  device allocations and frees of one size in an iteration
  memory_peak      a GPU's peak memory within 10% of its capacity
  iterations       iterations (ProfilerStep, a repeated range), their spread

Each finding comes with evidence rows (the gaps, calls, copies, kernels or windows, with the
NVTX range and thread they happened in) ranked by recoverable time, the time it cost; rules
overlap, so their times are not to be added. --param NAME=VALUE sets a rule's threshold
(--list shows them with their defaults). Tables and markdown show the top --limit rows per rule
(default 5); csv, tsv and parquet give one row per rule, or with a single --rule its evidence
rows; json gives both. --fail-on RULE (or 'any') exits with code 8 when the rule has findings
with recoverable time (a memory rule: any finding; they cost memory, not time), for CI.
""" + "\n" + FILE_HELP.replace("COMMAND", "analyze")


@cli.command(help=ANALYZE_HELP)
@file_argument()
@click.option("--rule", "rule_names", multiple=True, metavar="NAME", help="Run only this rule (repeatable).")
@trace_option()
@param_option("A rule parameter, e.g. min_gap_ns=500000 (repeatable; --list shows them).")
@limit_option("Evidence rows per rule and trace [default: 5 in tables and markdown, all otherwise].")
@format_option("table for people, markdown for a pull request; csv, tsv, json, parquet for machines (ns).")
@output_option()
@click.option("--fail-on", "fail_on", multiple=True, metavar="RULE",
              help="Exit with code 8 when RULE ('any': any rule run) has findings (repeatable).")
@click.option("--list", "list_rules", is_flag=True, help="List the rules with their parameters and defaults.")
@overwrite_option
@wide_option
@engine_options
@click.pass_obj
def analyze(obj: Context, file, rule_names, trace_id, params, limit, fmt, output, fail_on, list_rules):
    from traceql.analysis.analyze import FINDINGS_EXIT, rule, rules, write_text
    from traceql.query.library import parse_params

    run = list(rules().values()) if not rule_names else [rule(n) for n in rule_names]
    if list_rules:
        for r in run:
            click.echo(f"{r.name}: {r.description}")
            for p in r.thresholds:
                default = r.query.defaults.get(p)
                click.echo(f"  --param {p}=...  {r.query.params[p]} [default: {'-' if default is None else str(default).lower() if isinstance(default, bool) else default}]")
            click.echo("")
        return
    check_output(output)
    from traceql.query.reports import report_query

    reads = "\n".join([r.query.sql for r in run] + [report_query("breakdown").sql])  # what a FILE's ingest builds
    ws, trace_id = obj.open_on(file, trace_id, reads=reads)
    with ws:
        result = ws.analyze(list(rule_names) or None, trace_id=trace_id, **parse_params(params))
        traces = ws.execute("SELECT trace_id, path, duration FROM trace WHERE ? IS NULL OR trace_id = ? "
                            "ORDER BY trace_id", [trace_id, trace_id]).to_arrow_table().to_pylist()
        gpus = ws.report("breakdown", trace_id=trace_id, per_trace=True).to_pylist()
    if fmt in ("table", "markdown"):
        def write(fh, width=None):
            write_text(result, traces, fh, fmt, width=width, limit=5 if limit is None else limit, gpus=gpus)

        if output is None:
            write(sys.stdout, None if fmt == "markdown" else table_width())
        else:
            with open(output, "w", encoding="utf-8", newline="") as fh:
                write(fh, None if fmt == "markdown" else table_width(fh))
    elif fmt == "json":
        doc = {"findings": result.findings.to_pylist(),
               "evidence": {name: (t if limit is None else first_rows(t, limit)).to_pylist()
                            for name, t in result.evidence.items()}}
        from traceql.outputs.render import json_value

        text = json.dumps(doc, default=json_value, indent=1) + "\n"
        if output is None:
            click.echo(text, nl=False)
        else:
            Path(output).write_text(text, encoding="utf-8")
    else:
        table = result.findings
        if len(result.rules) == 1:
            table = result.evidence[next(iter(result.rules))]
            table = table if limit is None else first_rows(table, limit)
        emit(table, fmt, output)
    failed = result.failed(fail_on) if fail_on else []
    if failed:
        click.echo(f"traceql: analyze: findings for {', '.join(failed)} (--fail-on)", err=True)
        sys.stdout.flush()
        sys.exit(FINDINGS_EXIT)


DIFF_HELP = """Compare two runs: what changed, and whether it is more than run-to-run noise.

A (before) and B (after) are each a trace file (Nsight Systems, nvprof or PyTorch profiler;
ingested into a temporary workspace, removed afterwards), a trace id of the workspace (--db),
or a workspace file (all its traces make one side); with --engine spark also a Parquet
export (a directory or URL, all its traces), compared on Spark. E.g.

\b
  traceql diff before.sqlite after.sqlite
  traceql diff 1 2                 (two traces of the workspace)
  traceql diff base.duckdb trace.json.gz --format markdown --gate 5

Rows align kernels by name, PyTorch ops by name and direction, NVTX ranges by path (CPU time,
and GPU time of the work inside), API calls by name, copies by kind, memsets by memory kind;
totals are the iteration time, the GPU operation time, busy time per GPU and the span. When
one anchor (ProfilerStep, an NVTX range or a kernel's pace; traceql analyze --rule iterations)
gives iterations on both sides, times and calls are per iteration and iteration k of A is
paired with iteration k of B. A row changed when its test (paired over the iterations for the
headline, kernels, ops and NVTX ranges; else Yuen's test on trimmed means over its instances'
durations) gives a Benjamini-Hochberg q below --alpha AND the change is at least --min-effect
percent; a key on one side only is added or removed. Kernels, ops, copies and memsets are compared within launch
configuration, input sizes or byte count (Δ%). Δ = B - A.

--gate PCT exits with code 7 when, beyond the noise (q below --alpha), the iteration time or
the GPU operation time per iteration is slower by more than PCT percent, or a kernel, op or
NVTX range adds more than PCT percent of A's iteration time per iteration (+%iter).
Tables and markdown show the changed rows; csv, tsv, json and parquet give every row.
"""


@cli.command(help=DIFF_HELP)
@click.argument("a", metavar="A")
@click.argument("b", metavar="B")
@format_option("table for people, markdown for a pull request; csv, tsv, json, parquet: every row (ns).")
@output_option()
@click.option("--gate", type=click.FloatRange(min=0), default=None, metavar="PCT",
              help="Exit with code 7 when iteration time or GPU operation time per iteration is slower by more "
                   "than PCT percent, or a kernel, op or NVTX range adds more than PCT percent of the iteration "
                   "time, beyond the noise (q below --alpha).")
@click.option("--alpha", type=click.FloatRange(min=0, max=1, min_open=True, max_open=True), default=0.01,
              show_default=True, metavar="Q", help="False discovery rate: a change needs a Benjamini-Hochberg q below it.")
@click.option("--min-effect", "min_effect", type=click.FloatRange(min=0), default=5.0, show_default=True,
              metavar="PCT", help="Smallest change, in percent, called a change (the run-to-run drift that one "
                                  "trace per side cannot measure).")
@click.option("--trim", type=click.FloatRange(min=0, max=0.5, max_open=True), default=0.2, show_default=True,
              metavar="FRACTION", help="Fraction of the shortest and of the longest instances trimmed from each key's mean "
                   "(0: Welch's t-test on plain means).")
@click.option("--per-iteration/--no-per-iteration", "per_iteration", default=None,
              help="Times and calls per iteration [default: when both sides have iterations].")
@click.option("--kernel-key", type=click.Choice(["name", "short_name"]), default="name", show_default=True,
              help="Align kernels by demangled name or by short name (template arguments and parameters left out).")
@click.option("--paired/--no-paired", "paired", default=None,
              help="Compare iteration k of A with iteration k of B [default: when one anchor gives iterations on "
                   "both sides]; --no-paired: Yuen's test on the instances everywhere.")
@click.option("--section", "sections", multiple=True, metavar="NAME",
              type=click.Choice(["total", "kernel", "op", "range", "range_gpu", "api", "memcpy", "memset"]),
              help="Show only these sections (repeatable): total, kernel, op, range, range_gpu, api, memcpy, memset.")
@limit_option("Tables and markdown: at most N rows per section.", default=10)
@click.option("--all", "show_all", is_flag=True, help="Tables and markdown: unchanged rows too.")
@overwrite_option
@wide_option
@engine_options
@click.pass_obj
def diff(obj: Context, a, b, fmt, output, gate, alpha, min_effect, trim, per_iteration, kernel_key, paired,
         sections, limit, show_all):
    from traceql.analysis.diff_rules import GATE_EXIT
    from traceql.analysis.diff_text import gate_message, write_text
    from traceql.analysis.diff import diff as compare_runs

    check_output(output, inputs=[Path(x) for x in (a, b) if Path(x).exists()])
    progress = for_stderr()  # bars on a terminal only, while trace files are ingested
    opener = None
    if obj.engine == "spark":  # a side that is a Parquet export is read on Spark
        from traceql.engines.spark import ExportOpener, parse_conf

        opener = ExportOpener(obj.spark_master, parse_conf(obj.spark_conf))
    try:
        result = compare_runs(a, b, obj.db, alpha=alpha, min_effect_pct=min_effect, per_iteration=per_iteration,
                               kernel_key=kernel_key, trim=trim, paired=paired, progress=progress,
                               on_wait=say_wait, open_export=opener)
    finally:
        if progress:
            progress.close()
        if opener is not None:
            opener.close()
    if fmt in ("table", "markdown"):
        def write(fh, width=None):
            write_text(result, fh, fmt, width=width, limit=limit, sections=list(sections) or None,
                                show_all=show_all)

        if output is None:
            write(sys.stdout, None if fmt == "markdown" else table_width())
        else:
            with open(output, "w", encoding="utf-8", newline="") as fh:
                write(fh, None if fmt == "markdown" else table_width(fh))
    else:
        table = result.rows
        if sections:
            import pyarrow.compute as pc

            table = table.filter(pc.is_in(table.column("section"), value_set=pa_strings(sections)))
        if fmt == "json":
            from traceql.outputs.render import json_value

            text = json.dumps({"summary": result.summary(), "rows": table.to_pylist()}, default=json_value,
                              indent=1) + "\n"
            if output is None:
                click.echo(text, nl=False)
            else:
                Path(output).write_text(text, encoding="utf-8")
        else:
            emit(table, fmt, output)
    if gate is not None:
        failed = result.gate(gate)
        if failed:
            click.echo(f"traceql: diff: {gate_message(result, failed, gate)}", err=True)
            sys.stdout.flush()
            sys.exit(GATE_EXIT)
