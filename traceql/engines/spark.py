"""The Spark engine: the query library, reports and summary on Apache Spark, over a Parquet
export partitioned by trace (traceql.outputs.parquet).

    traceql export --format parquet --partition-by trace -o job/
    traceql report --by kernel --engine spark --db job/ [--spark-master spark://host:7077]

    ws = traceql.open("job/", engine="spark", spark_master="local[4]")
    ws.report("kernel"); ws.query("range", group_by="path"); ws.summary()

Each contract view is a temporary view of the session over its folder of the export, with the
export's schema (traceql.outputs.parquet.view_schema, column descriptions as Spark column comments) and
the contract's column order. A query of the library runs as Spark SQL that sqlglot translates
from its DuckDB SQL (traceql.engines.transpile; the library has one copy of each query), with its
parameters bound by Spark (`:name` markers), never pasted into the text. The result comes back
as Arrow with the columns and the Arrow types DuckDB gives the same query: the types are read
from DuckDB running the query over an empty in-memory copy of the contract, and Spark's columns
are cast to them (a cast that would lose a value fails). So `report`, `query` and `summary`
return what they return on the workspace, row for row; the tests compare them. A CTE the
query reads twice or more runs first, once, checkpointed on the executors under a temporary
view the rest reads (transpile.shared_ctes: Spark would inline it at every read), dropped
after the query.

The session: pyspark's SparkSession builder, which reads the usual Spark configuration
(spark-defaults.conf in $SPARK_CONF_DIR or $SPARK_HOME/conf, PYSPARK_SUBMIT_ARGS, SPARK_*
environment variables); `spark_master` (--spark-master) and `spark_conf` (--spark-conf KEY=VALUE)
override it. With no master from any of them the session is local, `local[*]`, bound to the
loopback address, without its web UI, with a 4g heap (spark.driver.memory, unless configured) and, unless spark.driver.extraJavaOptions
is configured, the JIT's quick tier and the serial collector (LOCAL_JVM_OPTIONS). Settings traceql relies on, unless the configuration sets
them: spark.sql.ansi.enabled=true (errors, not wrapped values, on overflow: Spark 4's default),
spark.sql.runSQLOnFiles=false (a query reads the export's views, not files named in SQL),
spark.sql.optimizer.excludedRules=RemoveRedundantAliases (EXCLUDED_RULES: with it Spark 4.0's
optimizer fails on queries/range.sql, PLAN_VALIDATION_FAILED_RULE_IN_BATCH, a window over a union
of branches read from CTEs the query reads again; the rule only drops aliases); for a
local session spark.sql.shuffle.partitions = its cores and spark.sql.adaptive.enabled = false
(LOCAL_ADAPTIVE). A SparkSession of the caller's (session=)
is used as it is, and left running by close(); so is a session this process runs already (a
notebook's: getOrCreate). The session starts at the first query: a query that does not
translate is refused before the JVM starts.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from traceql.outputs import parquet
from traceql.core.errors import UsageError

if TYPE_CHECKING:
    import pyarrow as pa

MISSING = ("--engine spark needs pyspark and Java 17 or newer: pip install 'traceql[spark]' "
           "(and a JDK, e.g. apt-get install openjdk-17-jre-headless)")

# optimizer rules a session traceql makes runs without (module docstring)
EXCLUDED_RULES = "org.apache.spark.sql.catalyst.optimizer.RemoveRedundantAliases"

_LOG4J = "log4j2-traceql.properties"  # beside this file: Spark's own log lines at ERROR, on stderr


def available() -> str | None:
    """None when this machine can run the Spark engine, else why not."""
    import shutil

    try:
        import pyspark  # noqa: F401
    except ImportError:
        return "pyspark is not installed (pip install 'traceql[spark]')"
    java = Path(os.environ["JAVA_HOME"]) / "bin" / "java" if os.environ.get("JAVA_HOME") else None
    if not (java and java.exists()) and shutil.which("java") is None:
        return "no Java runtime (java on PATH or $JAVA_HOME); Spark 4 needs Java 17 or newer"
    return None


def parse_conf(items) -> dict[str, str]:
    """--spark-conf KEY=VALUE items as a dict."""
    out = {}
    for item in items or ():
        key, sep, value = str(item).partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--spark-conf {item}: give KEY=VALUE, e.g. spark.executor.memory=8g")
        out[key.strip()] = value.strip()
    return out


def _configured(key: str, option: str, env: str | None = None) -> str | None:
    """The value the usual Spark configuration gives KEY, if any: OPTION in PYSPARK_SUBMIT_ARGS,
    the environment variable ENV, else KEY in spark-defaults.conf ($SPARK_CONF_DIR, else
    $SPARK_HOME/conf)."""
    m = re.search(rf"{option}[ =](\S+)", os.environ.get("PYSPARK_SUBMIT_ARGS", ""))
    if m:
        return m.group(1)
    if env and os.environ.get(env):
        return os.environ[env]
    conf_dir = os.environ.get("SPARK_CONF_DIR") or (
        os.path.join(os.environ["SPARK_HOME"], "conf") if os.environ.get("SPARK_HOME") else None)
    if conf_dir:
        try:
            with open(os.path.join(conf_dir, "spark-defaults.conf"), encoding="utf-8") as fh:
                for line in fh:
                    parts = line.strip().split(None, 1)
                    if len(parts) == 2 and parts[0] == key:
                        return parts[1].strip()
        except OSError:
            pass
    return None


# A local session's JVM heap (driver and executors in one), unless configured: Spark's 1g default
# fails the op report of a 1 M-kernel trace ("Not enough memory to build and broadcast the table").
LOCAL_DRIVER_MEMORY = "4g"
# A local session's JVM lives as long as one command: the JIT's quick tier only and the serial
# collector (bench/SPARK.md, 64 ranks on local[2]: 41% less CPU to start, 44% less for the first
# queries, 16-63% less per warm report than Java's defaults).
LOCAL_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


# A local session runs without adaptive query execution (spark.sql.adaptive.enabled=false, unless
# configured): AQE plans the rest of a query again after each of its stages, and the analyze
# rules' queries have dozens of stages over small inputs. analyze/exposed_comm on cs336-jsun,
# two NCCL ranks and a generated trace, its first run in a new local[2] JVM: 68.6 CPU s with
# AQE (24.6 of them planning), 19.3 without; the rows are the same (tests/engines/test_spark.py).
LOCAL_ADAPTIVE = False


def make_session(master: str | None = None, conf: dict | None = None):
    """A SparkSession configured as the module's documentation says, and whether this call
    started it: when this process runs a session already (a notebook's, a test module's), that
    one is used (getOrCreate) and left running by SparkWorkspace.close()."""
    reason = available()
    if reason is not None:
        raise UsageError(f"{MISSING}: {reason}")
    from pyspark.sql import SparkSession

    conf = dict(conf or {})
    master = master or conf.pop("spark.master", None) or _configured("spark.master", "--master", "MASTER")
    local = master is None or master.startswith("local")
    builder = SparkSession.builder.appName("traceql").master(master or "local[*]")
    if local:
        for key, value in (("spark.driver.bindAddress", "127.0.0.1"), ("spark.driver.host", "127.0.0.1"),
                           ("spark.ui.enabled", "false"), ("spark.ui.showConsoleProgress", "false")):
            if key not in conf:
                builder = builder.config(key, value)
        if "spark.driver.memory" not in conf and \
                _configured("spark.driver.memory", "--driver-memory", "SPARK_DRIVER_MEMORY") is None:
            builder = builder.config("spark.driver.memory", LOCAL_DRIVER_MEMORY)
    log4j = Path(__file__).with_name(_LOG4J)
    if "spark.driver.extraJavaOptions" not in conf and \
            _configured("spark.driver.extraJavaOptions", "--driver-java-options") is None:
        options = [f"-Dlog4j2.configurationFile={log4j.as_uri()}"] + ([LOCAL_JVM_OPTIONS] if local else [])
        builder = builder.config("spark.driver.extraJavaOptions", " ".join(options))
    for key, value in conf.items():
        builder = builder.config(key, value)
    _quiet_python_logging()
    from pyspark import SparkContext

    running = SparkContext._active_spark_context  # the JVM of this process's session, if one runs
    spark = builder.getOrCreate()
    explicit = spark.sparkContext.getConf()
    defaults = {"spark.sql.ansi.enabled": "true", "spark.sql.runSQLOnFiles": "false",
                "spark.sql.optimizer.excludedRules": EXCLUDED_RULES}
    if local:
        defaults["spark.sql.shuffle.partitions"] = str(spark.sparkContext.defaultParallelism)
        defaults["spark.sql.adaptive.enabled"] = str(LOCAL_ADAPTIVE).lower()
    for key, value in defaults.items():
        if not explicit.contains(key) and key not in conf:
            spark.conf.set(key, value)
    return spark, running is None


def _quiet_python_logging() -> None:
    """pyspark logs every failed query with its Java stack trace (logger SQLQueryContextLogger);
    traceql reports the error itself, in one line."""
    import logging

    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)


def _spark_type(t: "pa.DataType"):
    import pyarrow as pa
    from pyspark.sql import types as T

    if pa.types.is_int32(t):
        return T.IntegerType()
    if pa.types.is_int64(t):
        return T.LongType()
    if pa.types.is_int16(t):
        return T.ShortType()
    if pa.types.is_int8(t):
        return T.ByteType()
    if pa.types.is_float64(t):
        return T.DoubleType()
    if pa.types.is_float32(t):
        return T.FloatType()
    if pa.types.is_boolean(t):
        return T.BooleanType()
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return T.StringType()
    if pa.types.is_timestamp(t):
        return T.TimestampNTZType() if t.tz is None else T.TimestampType()
    if pa.types.is_decimal(t):
        return T.DecimalType(t.precision, t.scale)
    raise RuntimeError(f"no Spark type for the export's Arrow type {t}")


def view_struct(view: str):
    """The Spark schema of a view of the export: its files' columns and the partition column, each
    with its contract description as the column's comment."""
    from pyspark.sql import types as T

    fields = []
    for f in parquet.view_schema(view, with_partition=True):
        comment = f.metadata[b"description"].decode() if f.metadata else ""
        fields.append(T.StructField(f.name, _spark_type(f.type), True, {"comment": comment}))
    return T.StructType(fields)


class _Result:
    """What SparkWorkspace.execute returns: the part of DuckDB's result interface the reports use."""

    def __init__(self, table: "pa.Table"):
        self._table = table

    def to_arrow_table(self) -> "pa.Table":
        return self._table

    def fetchall(self) -> list[tuple]:
        columns = [c.to_pylist() for c in self._table.columns]
        return list(zip(*columns)) if columns else []

    def fetchone(self):
        rows = self.fetchall()
        return rows[0] if rows else None


# Which SparkWorkspace's view a session's temporary view is: (id(session), view) -> id(workspace).
_ACTIVE: dict[tuple[int, str], int] = {}


class SparkWorkspace:
    """A Parquet export (traceql.outputs.parquet) queried on Spark: query(), report(), summary() and
    execute() as on a Workspace, answering with the same Arrow tables."""

    engine = "spark"

    def __init__(self, path: str | os.PathLike, *, queries=(), master: str | None = None, conf: dict | None = None,
                 session=None):
        self.path = str(path)
        self.query_dirs = tuple(Path(q) for q in ([queries] if isinstance(queries, (str, os.PathLike))
                                                  else queries or ()))
        if "://" not in self.path or self.path.startswith("file:"):
            parquet.read_manifest(self.path.removeprefix("file://"))
        self._session, self._own = session, False
        self._master, self._conf = master, dict(conf or {})
        if session is None:
            reason = available()  # refused now, not at the first query
            if reason is not None:
                raise UsageError(f"{MISSING}: {reason}")
        self._frames: dict = {}
        self._template_con = None
        self._closed = False

    # -- the engine ------------------------------------------------------------------
    @property
    def spark(self):
        """The SparkSession, started at the first query (a query Spark cannot run is refused
        before the JVM starts)."""
        if self._session is None:
            self._session, self._own = make_session(self._master, self._conf)
        return self._session

    def _activate(self, views) -> None:
        """Make the session's temporary views VIEWS (kernel, trace, ...) this export's. Only the
        views a query reads: each costs a listing of its folder."""
        root = self.path.rstrip("/")
        for view in views:
            if view not in self._frames:
                struct = view_struct(view)
                try:
                    df = self.spark.read.schema(struct).parquet(f"{root}/{view}")
                except Exception as exc:  # AnalysisException [PATH_NOT_FOUND]
                    raise UsageError(f"{root}: the export has no readable folder {view}/ ({_one_line(exc)})") from None
                self._frames[view] = df.select(*[f.name for f in struct.fields])
            key = (id(self.spark), view)
            if _ACTIVE.get(key) != id(self):
                self._frames[view].createOrReplaceTempView(view)
                _ACTIVE[key] = id(self)

    def execute(self, sql: str, params=None) -> _Result:
        """Run the DuckDB SQL of the query library (trusted SQL, as Workspace.execute) on Spark:
        translated by traceql.engines.transpile, parameters bound by Spark, the result with DuckDB's
        column types."""
        from traceql.engines.transpile import shared_ctes, to_spark

        if self._closed:
            raise UsageError("the Spark workspace is closed")
        spark_sql, views = to_spark(sql, tables=True)
        self._activate(sorted(views & set(parquet.VIEWS)))
        args = _spark_args(params)
        steps, final = shared_ctes(spark_sql)
        cached = []
        try:
            for view, step in steps:  # each CTE the query reads twice or more, computed once
                df = self._sql(step, args).localCheckpoint(eager=True)
                cached.append((view, df))
                df.createOrReplaceTempView(view)
            table = self._sql(final, args).toArrow()
        except Exception as exc:  # pyspark's errors: one line, as the DuckDB engine gives them
            from pyspark.errors import PySparkException

            if isinstance(exc, PySparkException) or type(exc).__module__.startswith("py4j"):
                raise UsageError(f"Spark: {_one_line(exc)}") from None
            raise
        finally:
            for view, df in reversed(cached):
                self.spark.catalog.dropTempView(view)
                _free_checkpoint(df)
        return _Result(self._conform(table, sql, params))

    def _sql(self, text: str, args):
        return self.spark.sql(text, args=args) if args is not None else self.spark.sql(text)

    def _template(self, sql: str, params) -> "pa.Schema":
        """The Arrow schema DuckDB gives SQL with these parameters (run over the empty contract)."""
        import duckdb

        from traceql.core.resources import read_schema

        if self._template_con is None:
            con = duckdb.connect()
            for view in parquet.VIEWS:
                con.execute(read_schema(f"contract/{view}.sql"))
            self._template_con = con
        return self._template_con.execute(sql, params or []).to_arrow_table().schema

    def _conform(self, table: "pa.Table", sql: str, params) -> "pa.Table":
        import pyarrow as pa

        schema = self._template(sql, params)
        if table.num_columns != len(schema):
            raise RuntimeError(f"Spark returned {table.num_columns} columns where DuckDB gives {len(schema)}")
        arrays = []
        for column, field in zip(table.columns, schema):
            if column.type != field.type:
                column = column.cast(field.type)  # safe: a value that does not fit fails
            arrays.append(column)
        return pa.Table.from_arrays(arrays, schema=schema)

    def close(self) -> None:
        """Stop the session traceql started (a session given to the constructor keeps running)."""
        if self._closed:
            return
        self._closed = True
        if self._template_con is not None:
            self._template_con.close()
        if self._session is not None:
            for key in [k for k, v in _ACTIVE.items() if v == id(self)]:
                del _ACTIVE[key]
            if self._own:
                self._session.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- what a Workspace offers ---------------------------------------------------------
    def queries(self) -> dict:
        from traceql.query import library

        return library.collection(self.query_dirs)

    def query(self, name: str, **params) -> "pa.Table":
        """Run a query of the library with its parameters, as Workspace.query."""
        from traceql.query import library
        from traceql.core.results import tidy

        q = library.get(name, self.query_dirs)
        values = library.bind(q, params)
        if q.origin is not None:
            library.check_placeholders(q)
        return tidy(self.execute(q.sql, values).to_arrow_table())

    def report(self, by: str, trace_id: int | None = None, **params) -> "pa.Table":
        """What `traceql report --by BY --engine spark` prints (see Workspace.report)."""
        from traceql.query.reports import run_report

        self.check_trace(trace_id)
        params["recompute"] = True  # reports stored at ingest live in the workspace: every report is computed
        return run_report(self, by, trace_id=trace_id, **params)

    def summary(self, trace_id: int | None = None, per_trace: bool = False, limit: int | None = None,
                recompute: bool = False, rows: bool = False):
        """What `traceql summary --engine spark` prints (see Workspace.summary; Arrow tables, rows
        accepted as there)."""
        from traceql.query.reports import summary

        self.check_trace(trace_id)
        return summary(self, trace_id=trace_id, per_trace=per_trace, limit=limit, recompute=True)

    def sql(self, query: str, params=None, *, dialect: str | None = None, batches: bool = False,
            rows: bool = False) -> "pa.Table":
        """Check and run the user's SQL on Spark, with Workspace.sql's guarantees (traceql.sqlcheck):
        a syntax error, an unknown view or column and a missing parameter are refused, and so is
        anything but one query (SELECT/WITH): the export is read, never written. It reads the
        contract views and nothing else: a table that is not one of them or a CTE (a file, a
        path, a table function) is refused. It is translated to DuckDB (from --dialect), then to
        Spark SQL by traceql.engines.transpile, which refuses what Spark cannot run the same way. All of
        this happens before the JVM starts. batches and rows are accepted for Workspace.sql's
        signature: the rows come back as one Arrow table."""
        from traceql.core.results import tidy
        from traceql.engines.transpile import check_user_sql

        text = check_user_sql(query, dialect=dialect, params=params, views=parquet.VIEWS)
        return tidy(self.execute(text, params).to_arrow_table())

    def analyze(self, rules=None, trace_id: int | None = None, **params):
        """What `traceql analyze --engine spark` finds (see Workspace.analyze): the same rules,
        their ASOF joins written as equi-joins by traceql.engines.transpile."""
        from traceql.analysis.analyze import analyze

        return analyze(self, rules, trace_id=trace_id, params=params)

    def trace_ids(self) -> list[int]:
        return [r[0] for r in self.execute("SELECT trace_id FROM trace ORDER BY trace_id").fetchall()]

    def traces(self) -> "pa.Table":
        return self.execute("SELECT * FROM trace ORDER BY trace_id").to_arrow_table()

    def check_trace(self, trace_id: int | None) -> None:
        if trace_id is not None and trace_id not in self.trace_ids():
            raise UsageError(f"--trace {trace_id}: no such trace in {self.path} "
                             f"(traces: {', '.join(map(str, self.trace_ids())) or 'none'})")


class ExportOpener:
    """Opens Parquet exports as SparkWorkspaces on one session, started at the first open (what
    `traceql diff --engine spark A/ B/` compares: traceql.analysis.diff's open_export). close()
    stops the session if this opener started it."""

    def __init__(self, master: str | None = None, conf: dict | None = None, session=None):
        self._master, self._conf = master, dict(conf or {})
        self._session, self._own = session, False

    def __call__(self, path) -> SparkWorkspace:
        if self._session is None:
            self._session, self._own = make_session(self._master, self._conf)
        return SparkWorkspace(path, session=self._session)

    def close(self) -> None:
        if self._own and self._session is not None:
            self._session.stop()
        self._session, self._own = None, False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _free_checkpoint(df) -> None:
    """Release the blocks of a DataFrame made by localCheckpoint() (its plan is one LogicalRDD over
    the checkpointed RDD); else Spark's cleaner frees them when the JVM collects the RDD."""
    try:
        df._jdf.queryExecution().analyzed().rdd().unpersist(False)
    except Exception:  # noqa: BLE001 - another plan shape, or the JVM is gone: nothing to free now
        pass


def _spark_args(params):
    """DuckDB-style parameters (a dict for $name, a list for ?) as Spark's args."""
    if params is None or len(params) == 0:
        return None
    if isinstance(params, dict):
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in params.items()}
    return list(params)


def _one_line(exc: BaseException) -> str:
    """An error of pyspark or of the JVM in one line: for a Java exception, its root cause (py4j's
    own first line only says which call failed)."""
    text = str(exc).strip()
    java = getattr(exc, "java_exception", None)
    if java is not None:
        try:
            cause = java
            while cause.getCause() is not None:
                cause = cause.getCause()
            text = str(cause.toString()).strip() or text
        except Exception:  # noqa: BLE001 - the JVM is gone: py4j's message is what there is
            pass
    first = text.splitlines()[0] if text else type(exc).__name__
    return first[:500]
