"""`traceql --db JOB/ ingest --engine spark FILES...`: trace files ingested on Spark's executors,
straight into a Parquet export partitioned by trace (traceql.outputs.parquet).

The files are spread over Spark tasks, one task per file. A task ingests its file with DuckDB
on its executor, as `traceql ingest` would (traceql.store.ingest, one file into a workspace file
of its own in the executor's temporary directory), and exports that trace's partitions
(traceql.outputs.parquet.write) under the trace id the driver gave the file up front: the
files' order on the command line, after the export's highest trace id. The partitions are
written into a staging folder of the export (`_staging-<id>/`: a name starting with '_' is
not data for Spark or pyarrow). Once every task has succeeded the driver moves each partition
into place and writes the manifest; when a task fails, the staging folder is removed and the
export stays as it was (a file is not ingested twice: Spark's task retries start it again
from nothing).

Files are local paths or URLs. A URL (hdfs://, s3a://, ...) is read by the task through
pyarrow's file systems (copied to the executor's temporary directory first: the readers need a
local file); the trace's `path` is then the URL. The export (--db) is a local directory: on a
cluster, one every executor mounts (NFS, a shared volume). The executors run traceql: on a
cluster it must be installed in their Python (PYSPARK_PYTHON); a local session's executors run
this process's Python.

So that the tasks running at once on one executor (spark.executor.cores, a local session's
cores) do not each take the whole memory limit, a task's DuckDB gets TRACEQL_MEMORY_LIMIT (2.6GB
by default) divided by their number, as `ingest -j` shares it between its workers.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from traceql.core.errors import InputError, UsageError


@dataclass
class SparkIngested:
    """One file ingested by a Spark task."""
    trace_id: int
    source: str        # as given
    counts: dict       # rows per contract view of the trace
    seconds: float     # the task's wall time
    cpu_seconds: float  # the task's CPU time (its Python process and DuckDB's threads)
    replaced: bool = False


def _is_url(source: str) -> bool:
    return "://" in source and not source.startswith("file://")


def _local(source: str) -> str:
    return source.removeprefix("file://")


def existing_trace_ids(root: Path) -> list[int]:
    """The trace ids that partitions of the export at ROOT hold (its trace/ folder)."""
    from traceql.outputs.parquet import PARTITION

    folder = root / "trace"
    if not folder.is_dir():
        return []
    return sorted(int(p.name.split("=", 1)[1]) for p in folder.iterdir()
                  if p.name.startswith(f"{PARTITION}=") and p.name.split("=", 1)[1].isdigit())


def plan(files, out_dir) -> tuple[Path, list[tuple[int, str]]]:
    """The export's root and (trace id, source) per file, checked before any task starts: the
    export is one (or a new directory), every local file exists, no file is given twice."""
    from traceql.outputs.parquet import MANIFEST, VIEWS, read_manifest

    root = Path(_local(os.fspath(out_dir)))
    if _is_url(os.fspath(out_dir)):
        raise UsageError(f"{out_dir}: ingest --engine spark writes a local directory (one every executor "
                         "mounts, on a cluster); the trace files may be URLs")
    if root.exists() and not root.is_dir():
        raise UsageError(f"{root}: exists and is not a directory (--engine spark writes a Parquet export "
                         "partitioned by trace, a directory)")
    if (root / MANIFEST).exists():
        read_manifest(root)
    elif root.is_dir() and any(p.name in VIEWS for p in root.iterdir()):
        raise UsageError(f"{root}: holds view folders but no {MANIFEST}: not a traceql Parquet export")
    sources = [os.fspath(f) for f in files]
    if not sources:
        raise InputError("no input files given")
    seen = set()
    for s in sources:
        key = s if _is_url(s) else os.path.realpath(_local(s))
        if key in seen:
            raise UsageError(f"{s}: given twice")
        seen.add(key)
        if not _is_url(s):
            p = Path(_local(s))
            if not p.is_file():
                raise InputError(f"{s}: no such file" if not p.exists() else f"{s}: not a file")
    first = max(existing_trace_ids(root), default=0) + 1
    return root, [(first + i, s) for i, s in enumerate(sources)]


def ingest(files, out_dir, *, master: str | None = None, conf: dict | None = None, session=None,
           flops=None, host: str | None = None, progress=None) -> list[SparkIngested]:
    """Ingest FILES on Spark into the Parquet export OUT_DIR (see the module's documentation): one
    SparkIngested per file, in the files' order. session: a SparkSession to use (left running);
    else one is made from master and conf (traceql.engines.spark.make_session) and stopped."""
    import sys

    from traceql.engines.spark import _one_line, make_session
    from traceql.outputs.parquet import _write_manifest

    root, jobs = plan(files, out_dir)
    flops = [os.path.abspath(f) if os.path.isfile(f) else f for f in (flops or [])]
    own = False
    if session is None:
        session, own = make_session(master, conf)
    try:
        sc = session.sparkContext
        if sc.master.startswith("local") and "PYSPARK_PYTHON" not in os.environ:
            sc.pythonExec = sys.executable  # the executors of a local session run this Python
        slots = _slots(sc)
        new = not root.exists()
        staging = root / f"_staging-{uuid.uuid4().hex[:12]}"
        staging.mkdir(parents=True)
        try:
            task = _Task(str(staging), flops, host, os.environ.get("TRACEQL_MEMORY_LIMIT"), slots)
            try:
                done = sc.parallelize(jobs, len(jobs)).map(task).collect()
            except Exception as exc:  # a task's error, raised again by the driver as Py4J/Spark's
                raise InputError(f"ingest --engine spark: a task failed, the export is unchanged: "
                                 f"{_task_error(exc) or _one_line(exc)}") from None
            _move_into_place(staging, root, [t for t, _ in jobs])
            _write_manifest(root)
            new = False
        finally:
            shutil.rmtree(staging, ignore_errors=True)
            if new:  # a failed ingest into a new directory leaves no directory
                shutil.rmtree(root, ignore_errors=True)
    finally:
        if own:
            session.stop()
    return [SparkIngested(**d) for d in sorted(done, key=lambda d: d["trace_id"])]


def _slots(sc) -> int:
    """Tasks that run at once on one executor."""
    conf = sc.getConf()
    if sc.master.startswith("local"):
        return max(1, sc.defaultParallelism // int(conf.get("spark.task.cpus", "1")))
    return max(1, int(conf.get("spark.executor.cores", "1")) // int(conf.get("spark.task.cpus", "1")))


def _task_error(exc: BaseException) -> str | None:
    """The one line a failed task raised (traceql's own error, or the exception), out of the
    Python traceback Spark hands back inside its own error text."""
    text = str(exc)
    marker = "traceql-task-error: "
    at = text.rfind(marker)
    if at < 0:
        return None
    return text[at + len(marker):].splitlines()[0].strip()


class _Task:
    """What a Spark task runs for one (trace id, source): picklable, no SparkContext inside."""

    def __init__(self, staging: str, flops, host, memory_limit, slots: int):
        self.staging, self.flops, self.host = staging, flops, host
        self.memory_limit, self.slots = memory_limit, slots

    def __call__(self, job):
        trace_id, source = job
        try:
            return _ingest_one(trace_id, source, self)
        except Exception as exc:  # the driver gets its line back through Spark's error text
            from traceql.core.errors import TraceqlError

            line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            if not isinstance(exc, TraceqlError):
                line = f"{source}: {type(exc).__name__}: {line}"
            raise RuntimeError(f"traceql-task-error: {line}") from exc


def _ingest_one(trace_id: int, source: str, task: _Task) -> dict:
    """In a Spark task: SOURCE ingested into a workspace file of its own, its partitions written
    under TRACE_ID into the staging folder."""
    import tempfile

    from traceql.core.settings import DEFAULT_MEMORY_LIMIT, limit_bytes
    from traceql.outputs import parquet
    from traceql.store.ingest import ingest as ingest_files
    from traceql.store.workspace import WorkspaceFile

    started, cpu = time.time(), _cpu()
    tmp = Path(tempfile.mkdtemp(prefix=f"traceql-spark-{trace_id}-"))
    try:
        path = Path(_local(source))
        if _is_url(source):
            path = tmp / "in" / source.rstrip("/").rsplit("/", 1)[-1]  # its name: ranks and hosts are read from it
            path.parent.mkdir()
            _download(source, path)
        limit = limit_bytes(task.memory_limit) if task.memory_limit else limit_bytes(DEFAULT_MEMORY_LIMIT)
        os.environ["TRACEQL_MEMORY_LIMIT"] = f"{max(256 * 10**6, limit // task.slots) // 10**6}MB"
        db = tmp / "ws.duckdb"
        ingest_files([path], db=db, flops=task.flops or None, host=task.host, jobs=1)
        out = tmp / "out"
        with WorkspaceFile(db, write=True) as ws:
            ws.ensure()
            if _is_url(source):
                ws.con.execute("UPDATE trace SET path = ? WHERE trace_id = 1", [source])
            counts = {v: ws.con.execute(f"SELECT count(*) FROM {v}").fetchone()[0] for v in parquet.VIEWS}
            parquet.write(ws.con, out, [1], trace_id_offset=trace_id - 1)
        staging = Path(task.staging)
        for view in parquet.VIEWS:
            src = parquet.partition_dir(out, view, trace_id)
            dst = parquet.partition_dir(staging, view, trace_id)
            dst.parent.mkdir(parents=True, exist_ok=True)
            if dst.exists():  # a retried task
                shutil.rmtree(dst)
            shutil.copytree(src, dst)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {"trace_id": trace_id, "source": source, "counts": counts, "seconds": time.time() - started,
            "cpu_seconds": _cpu() - cpu}


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


def _download(url: str, target: Path) -> None:
    """Copy the file at URL (any file system pyarrow reads: hdfs://, s3://; s3a:// and s3n:// are
    read as s3://) to TARGET."""
    from pyarrow import fs

    uri = url
    for scheme in ("s3a://", "s3n://"):
        if uri.startswith(scheme):
            uri = "s3://" + uri[len(scheme):]
    try:
        filesystem, path = fs.FileSystem.from_uri(uri)
        with filesystem.open_input_stream(path) as src, open(target, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    except (OSError, ValueError) as exc:
        raise InputError(f"{url}: cannot read it ({str(exc).splitlines()[0]})") from None


def _move_into_place(staging: Path, root: Path, trace_ids: list[int]) -> None:
    """Each staged partition renamed into the export (one directory rename per view and trace)."""
    from traceql.outputs.parquet import VIEWS, partition_dir

    for view in VIEWS:
        (root / view).mkdir(parents=True, exist_ok=True)
        for t in trace_ids:
            os.replace(partition_dir(staging, view, t), partition_dir(root, view, t))
