"""The public API (layer 9): traceql.open and the Workspace it returns, and traceql.ingest, diff,
upgrade and remove (progress= of ingest and export: a Progress, or RichProgress for a terminal), as
`import traceql` gives them. The CLI and the MCP server stand on these: what
a command does, the Python API does.

ingest, diff, upgrade and remove are imported from their layers on first use, so that
traceql.open does not load the ingest machinery nor traceql.ingest the analysis."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

from traceql.core.errors import UsageError
from traceql.core.resources import CONTRACT_TABLES, CONTRACT_VIEWS, ROW_ORDER
from traceql.store.workspace import WorkspaceFile, default_db

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["Progress", "RichProgress", "Workspace", "diff", "ingest", "open", "remove", "upgrade"]

_LAZY = {
    "Progress": "traceql.core.progress",
    "RichProgress": "traceql.core.progress",
    "ingest": "traceql.store.ingest",
    "upgrade": "traceql.store.upgrade",
    "remove": "traceql.store.remove",
    "diff": "traceql.analysis.diff",
}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'traceql.api' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


def open(path: str | os.PathLike | None = None, *, write: bool = False,  # noqa: A001 - mirrors the builtin
         queries=(), on_wait=None, allow_files: bool = False, engine: str = "duckdb",
         spark_master: str | None = None, spark_conf: dict | None = None, spark_session=None) -> "Workspace":
    """Open an existing workspace, read-only unless write=True (which lets .sql() run
    statements that change it, and holds the workspace lock until close(): an ingest into
    it waits, and it waits for one, see traceql.store.lock; on_wait(message) tells that it waits).
    queries: folders of the user's own .sql queries, added to the query library next to
    $TRACEQL_QUERIES (see traceql.query.library). Queries read the workspace and nothing else:
    allow_files=True lets them read and write files of this machine (read_csv, read_parquet,
    COPY ... TO, ATTACH), see query_config().

    engine='spark': PATH is a Parquet export partitioned by trace (`traceql export --format parquet
    --partition-by trace`), queried on Apache Spark; the result has query(), report() and
    summary() as a Workspace has (traceql.engines.spark.SparkWorkspace). spark_master, spark_conf (a dict
    of Spark settings) and spark_session (a SparkSession of yours) configure it."""
    if engine == "spark":  # path: a Parquet export partitioned by trace (traceql.outputs.parquet, traceql.engines.spark)
        from traceql.engines.spark import SparkWorkspace  # pyspark: only for engine='spark'

        if write or allow_files:
            raise UsageError("engine='spark' reads a Parquet export: write and allow_files are for workspaces")
        return SparkWorkspace(path if path is not None else default_db(), queries=queries, master=spark_master,
                              conf=spark_conf, session=spark_session)
    if engine != "duckdb":
        raise UsageError(f"engine {engine!r}: 'duckdb' (a workspace) or 'spark' (a Parquet export)")
    return Workspace(path if path is not None else default_db(), write=write, queries=queries, on_wait=on_wait,
                     allow_files=allow_files)


class Workspace(WorkspaceFile):
    """A traceql workspace, read-only unless opened with write=True. Every query returns a
    pyarrow.Table: .to_pandas() with pandas installed, polars.from_arrow() for polars.
    Queries, reports and info are the workspace file's (traceql.store.workspace.WorkspaceFile);
    this adds analyze, exports, timelines and plots."""

    def analyze(self, rules=None, trace_id: int | None = None, **params):
        """What `traceql analyze` finds: a traceql.analysis.analyze.Analysis (findings, one row per trace and
        rule ranked by recoverable time; evidence, the rows of each rule). rules: names of rules
        (queries/analyze/<rule>.sql) to run, default all; params: rule parameters such as
        min_gap_ns=500000, given to every rule that declares them."""
        from traceql.analysis.analyze import analyze

        return analyze(self, rules, trace_id=trace_id, params=params)

    # -- export ----------------------------------------------------------------------
    def export(self, out_dir: str | os.PathLike, fmt: str = "parquet", trace_id: int | None = None,
               per_trace: bool = False, overwrite: bool = False, progress=None, partition_by: str | None = None,
               trace_id_offset: int = 0) -> list[Path]:
        """Write every contract view as one file (csv or parquet) into out_dir, for all
        traces together, one trace (trace_id) or one sub-folder per trace (per_trace).
        progress: a traceql.core.progress.Progress told about each file. partition_by='trace': Parquet
        partitioned by trace, Hive-style, with a manifest (traceql.outputs.parquet; Spark reads it),
        trace ids shifted by trace_id_offset."""
        from traceql.core.progress import as_progress

        progress = as_progress(progress)
        self.ensure()  # every view is written
        if fmt not in ("csv", "parquet"):
            raise UsageError(f"--format {fmt}: export writes csv or parquet")
        self.check_trace(trace_id)
        if partition_by is not None or trace_id_offset:
            if partition_by != "trace" or fmt != "parquet" or per_trace:
                raise UsageError("--partition-by trace (and --trace-id-offset) write Parquet partitioned by trace; "
                                 "--per-trace and csv are the other layouts")
            from traceql.outputs.parquet import write

            return write(self.con, out_dir, self.trace_ids() if trace_id is None else [trace_id],
                         trace_id_offset=trace_id_offset, overwrite=overwrite, progress=progress)
        out_dir = Path(out_dir)
        ids = self.trace_ids() if trace_id is None else [trace_id]
        jobs = []
        for view in CONTRACT_TABLES + CONTRACT_VIEWS:
            if per_trace:
                jobs += [(out_dir / f"trace_{t}" / f"{view}.{fmt}", view, t) for t in ids]
            else:
                jobs.append((out_dir / f"{view}.{fmt}", view, trace_id))
        from traceql.store.guard import check_not_workspace

        for target, _, _ in jobs:
            check_not_workspace(target, self.path)
        existing = [p for p, _, _ in jobs if p.exists()]
        if existing and not overwrite:
            raise UsageError(f"{existing[0]}: exists; use --overwrite to replace the files in {out_dir}")
        written = []
        progress.start(f"writing {out_dir}", len(jobs))
        for target, view, tid in jobs:
            progress.update(len(written), detail=str(target.relative_to(out_dir)))
            target.parent.mkdir(parents=True, exist_ok=True)
            order = ROW_ORDER[view]
            if tid is None:
                reader = self.con.execute(f"SELECT * FROM {view} ORDER BY {order}").to_arrow_reader()
            else:
                reader = self.con.execute(
                    f"SELECT * FROM {view} WHERE trace_id = ? ORDER BY {order}", [tid]).to_arrow_reader()
            _write_stream(reader, target, fmt)
            written.append(target)
        progress.update(len(written), detail="done")
        return written

    def export_perfetto(self, output: str | os.PathLike, trace_id: int | None = None, start=None, end=None,
                        overwrite: bool = False, progress=None, align_clocks: bool = False):
        """Write a Chrome trace event JSON timeline for ui.perfetto.dev and chrome://tracing: one
        trace (trace_id, or the workspace's only one; traceql.outputs.timeline.export_perfetto), or
        every trace of the workspace on one UTC axis, each a process group, with align_clocks
        each host's estimated skew taken off (traceql.outputs.job_timeline). start and end: a window."""
        from traceql.store.guard import check_not_workspace

        check_not_workspace(output, self.path)
        ids = self.trace_ids()
        if trace_id is None and len(ids) > 1:
            from traceql.outputs.job_timeline import export_job_perfetto

            return export_job_perfetto(self, output, ids, start=start, end=end, overwrite=overwrite,
                                       align_clocks=align_clocks, progress=progress)
        if align_clocks:
            raise UsageError("--align-clocks lines up the clocks of several traces; this timeline shows one")
        from traceql.outputs.timeline import export_perfetto

        return export_perfetto(self, output, trace_id=trace_id, start=start, end=end, overwrite=overwrite,
                               progress=progress)

    def export_folded(self, output: str | os.PathLike, trace_id: int | None = None, overwrite: bool = False) -> int:
        """Write the kernels' call stacks in the folded format of flame graphs ('frame;frame;kernel
        ns' per line, see traceql.outputs.folded); the number of lines written."""
        from traceql.outputs.folded import write_folded
        from traceql.store.guard import check_not_workspace

        check_not_workspace(output, self.path)
        self.check_trace(trace_id)
        return write_folded(self, output, trace_id=trace_id, overwrite=overwrite)

    def plot(self, by: str = "range", output: str | os.PathLike | None = None, **options):
        """A bar chart of a report as a matplotlib Figure, written to `output` (.png, .svg,
        .pdf) when given (see traceql.outputs.plot.plot for the options)."""
        from traceql.outputs.plot import plot

        if output is not None:
            from traceql.store.guard import check_not_workspace

            check_not_workspace(output, self.path)
        return plot(self, by, output, **options)


def _write_stream(reader: pa.RecordBatchReader, target: Path, fmt: str) -> None:
    tmp = target.with_name(target.name + ".part")
    try:
        if fmt == "parquet":
            import pyarrow.parquet as pq

            with pq.ParquetWriter(tmp, reader.schema) as writer:
                for batch in reader:
                    writer.write_batch(batch)
        else:
            import pyarrow.csv as pacsv

            with pacsv.CSVWriter(tmp, reader.schema) as writer:
                for batch in reader:
                    writer.write_batch(batch)
        os.replace(tmp, target)
    except BaseException:  # a full disk, Ctrl-C: no partial file left behind
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise
