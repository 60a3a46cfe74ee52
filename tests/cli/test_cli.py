"""The command line end to end, as a user runs it (a subprocess, stdout and exit codes)."""

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from traceql.cli import cli
from traceql.core.resources import CONTRACT_TABLES, CONTRACT_VIEWS
from traceql.core.version import __version__

from ..util import REPO, nsys_stub, trace_file
from ..util import cli as traceql

SAXPY = "pipit-saxpy-mpi-cuda-nsys2022.2/saxpy-mpi-cuda_nsys_perlmutter0.sqlite"


def test_ingest_info_sql_export(tmp_path):
    src = trace_file(SAXPY).resolve()
    db = tmp_path / "ws.duckdb"
    proc = traceql("--db", str(db), "ingest", str(src))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith(f"added trace 1: {src} (nsys 2022.2.1.31 schema 2.9.1, layout nsys/v2) in ")
    assert lines[1] == ("  kernel 5, memcpy 15, memset 0, api_call 57, nvtx_range 22, nvtx_mark 0, "
                        "thread 6, device 1")
    assert lines[-1] == f"workspace: {db}"

    again = traceql("--db", str(db), "ingest", str(src))
    assert again.stdout.startswith(f"replaced trace 1: {src}")

    info = traceql("--db", str(db), "info")
    assert info.returncode == 0
    assert info.stdout.splitlines()[:3] == [
        f"trace 1: {src}",
        "  format   nsys 2022.2.1.31, schema 2.9.1 (layout nsys/v2)",
        "  host     nid001608 (recorded)",  # the profiled node (TARGET_INFO_SYSTEM_ENV); EXPORT_HOST is login03
    ]
    assert "  GPUs     0 NVIDIA A100-SXM4-40GB" in info.stdout
    as_json = json.loads(traceql("--db", str(db), "info", "--format", "json").stdout)
    assert as_json[0]["counts"]["kernel"] == 5 and as_json[0]["gpus"] == ["0 NVIDIA A100-SXM4-40GB"]

    csv = traceql("--db", str(db), "sql", "--format", "csv",
                  "SELECT name, count(*) AS n, sum(dur) AS total FROM api_call GROUP BY 1 ORDER BY 3 DESC LIMIT 3")
    assert csv.returncode == 0, csv.stderr
    assert csv.stdout.splitlines()[0] == "name,n,total"
    assert len(csv.stdout.splitlines()) == 4

    out = tmp_path / "out"
    exp = traceql("--db", str(db), "export", "--format", "csv", "-o", str(out))
    assert exp.stdout.strip() == f"wrote {len(CONTRACT_TABLES + CONTRACT_VIEWS)} files to {out}"
    assert (out / "kernel.csv").read_text().count("\n") == 6


def test_env_var_chooses_the_workspace(tmp_path):
    db = tmp_path / "env.duckdb"
    proc = traceql("ingest", str(nsys_stub(tmp_path / "a.sqlite")), cwd=tmp_path, env={"TRACEQL_DB": str(db)})
    assert proc.returncode == 0, proc.stderr
    assert db.exists() and not (tmp_path / "traceql.duckdb").exists()


def test_default_workspace_is_in_the_current_directory(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TRACEQL_DB"}
    proc = subprocess.run([sys.executable, "-m", "traceql", "ingest", str(nsys_stub(tmp_path / "a.sqlite"))],
                          capture_output=True, text=True, cwd=tmp_path, env={**env, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "traceql.duckdb").exists()


def test_kernel_names_are_not_rich_markup(tmp_path):
    db = tmp_path / "ws.duckdb"
    traceql("--db", str(db), "ingest", str(nsys_stub(tmp_path / "a.sqlite")))
    out = traceql("--db", str(db), "sql", "SELECT 'void f<[with T = float]>(T*)' AS name, [1] AS l")
    assert "void f<[with T = float]>(T*)" in out.stdout


@pytest.mark.parametrize("args, code, message", [
    (["sql", "SELECT nope FROM kernel"], 2, "traceql: error: SQL: no column kernel.nope; columns of kernel: trace_id, "),
    (["sql", "SELECT 1 FROM kernel WHERE ts > AND"], 2,
     "traceql: error: SQL: syntax error at or near \"AND\" (line 1, column 33)"),
    (["sql", "DROP TABLE kernel"], 2, "traceql: error: SQL: DROP TABLE is not a query"),
    (["export", "-o", "x", "--trace", "99"], 2, "traceql: error: --trace 99: no such trace in"),
    (["schema", "kernels"], 2, "traceql: error: no view 'kernels'; did you mean kernel? views: trace, device"),
])
def test_errors_are_one_line_with_exit_codes(tmp_path, args, code, message):
    db = tmp_path / "ws.duckdb"
    traceql("--db", str(db), "ingest", str(nsys_stub(tmp_path / "a.sqlite")))
    proc = traceql("--db", str(db), *args, cwd=tmp_path)
    assert proc.returncode == code, proc.stderr
    assert proc.stderr.startswith(message), proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_missing_workspace(tmp_path):
    proc = traceql("--db", str(tmp_path / "none.duckdb"), "info")
    assert proc.returncode == 5
    assert proc.stderr == (f"traceql: error: {tmp_path / 'none.duckdb'}: no workspace here; "
                           "create one with 'traceql ingest FILE'\n")


def test_schema_prints_descriptions():
    out = traceql("schema", "kernel").stdout.splitlines()
    assert out[0] == "kernel: one row per kernel execution on a GPU."
    assert any(line.split()[:2] == ["dur", "BIGINT"] and "GPU execution time in ns" in line for line in out)


def test_start_up_loads_only_what_the_command_needs(tmp_path):
    # a report (or `import traceql`) does not load the ingest machinery, sqlglot, pyarrow
    # (a report's rows are read as Python rows: core.results.RowTable), rich (progress bars),
    # json or the summary's layout; the commands that need them import them, and traceql.ingest
    # stays the function whichever is imported first
    probe = """
import sys
import traceql.cli
from traceql.cli import main
heavy = ("traceql.store.ingest", "traceql.sources.adapters", "traceql.derive.pytorch", "traceql.query.where", "traceql.query.sqlcheck",
         "sqlglot", "pyarrow.compute", "sqlite3", "traceql.cli.analysis_cmds", "traceql.cli.export_cmd",
         "traceql.cli.mcp_cmd", "traceql.cli.sql_cmds", "traceql.cli.workspace_cmds", "rich", "json",
         "traceql.outputs.summary_text", "pyarrow")
print(sorted(m for m in heavy if m in sys.modules))
db = sys.argv[1]
for fmt in ("csv", "table"):
    sys.argv = ["traceql", "--db", db, "report", "--by", "kernel", "--format", fmt]
    try:
        main()
    except SystemExit as exc:
        assert not exc.code, exc.code
print(sorted(m for m in heavy if m in sys.modules))
from traceql.sources.adapters import raw_ddl
import traceql
print(callable(traceql.ingest), traceql.ingest.__name__, traceql.open.__name__)
"""
    db = tmp_path / "ws.duckdb"
    assert traceql("--db", str(db), "ingest", str(nsys_stub(tmp_path / "k.sqlite"))).returncode == 0
    proc = subprocess.run([sys.executable, "-c", probe, str(db)], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "[]" and lines[-2] == "[]", lines
    assert lines[-1] == "True ingest open"


def test_reports_and_summary_of_several_traces_import_no_pyarrow(tmp_path):
    # with two traces the report asks whether they are one job (query.jobs) and the summary
    # splits them: neither imports pyarrow for it (core.results.dicts, RowTable); parquet does
    probe = """
import sys
from traceql.cli import main
db = sys.argv[1]
for args in (["report", "--by", "kernel"], ["report", "--by", "api", "--format", "json"], ["summary"],
             ["summary", "--format", "csv", "--per-trace"], ["report", "--by", "kernel", "--format", "parquet",
                                                          "-o", sys.argv[2]]):
    sys.argv = ["traceql", "--db", db, *args]
    try:
        main()
    except SystemExit as exc:
        assert not exc.code, exc.code
    print(args[0], args[-1], "pyarrow" in sys.modules, file=sys.stderr)
"""
    db = tmp_path / "ws.duckdb"
    stubs = [str(nsys_stub(tmp_path / f"k{i}.sqlite")) for i in (1, 2)]
    assert traceql("--db", str(db), "ingest", *stubs).returncode == 0
    proc = subprocess.run([sys.executable, "-c", probe, str(db), str(tmp_path / "k.parquet")], capture_output=True,
                          text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    said = [ln for ln in proc.stderr.splitlines() if ln.startswith(("report ", "summary "))]
    assert said == ["report kernel False", "report json False", "summary summary False", "summary --per-trace False",
                    f"report {tmp_path / 'k.parquet'} True"], proc.stderr
    assert "k(int)" in proc.stdout


def test_version_and_help_load_no_command_nor_output_module():
    # --version prints before click and the group are imported (no command module, no table renderer,
    # no schema file reader), the very line click's version option of the group prints; --help loads
    # the commands (their help) but neither DuckDB nor pyarrow
    probe = """
import sys
from traceql.cli import main
sys.argv = ["traceql", sys.argv[1]]
try:
    main()
except SystemExit as exc:
    assert not exc.code, exc.code
print(sorted(m for m in sys.modules if m.startswith(("traceql.outputs", "traceql.cli.", "importlib.resources",
                                                      "duckdb", "pyarrow", "click"))))
"""
    loaded = {}
    for flag in ("--version", "--help"):
        proc = subprocess.run([sys.executable, "-c", probe, flag], capture_output=True, text=True, cwd=REPO,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
        assert proc.returncode == 0, proc.stderr
        loaded[flag] = json.loads(proc.stdout.splitlines()[-1].replace("'", '"'))
        if flag == "--version":
            assert proc.stdout.startswith("traceql, version "), proc.stdout
            printed = proc.stdout.splitlines()[0] + "\n"
    assert loaded["--version"] == ["traceql.cli.main"]
    assert CliRunner().invoke(cli, ["--version"]).output == printed == f"traceql, version {__version__}\n"
    assert "traceql.cli.report_cmds" in loaded["--help"]
    assert not [m for m in loaded["--help"] if m.startswith(("duckdb", "pyarrow"))]


def test_sql_of_plain_columns_imports_no_pyarrow(tmp_path):
    # `traceql sql` prints columns of numbers and text from DuckDB's Python rows: neither pyarrow
    # (nor numpy), sqlglot, rich nor the query library is imported (0.05-0.1 s of its start); a
    # column of another type (a list) is printed through Arrow as before
    probe = """
import sys
from traceql.cli import main
sys.argv = ["traceql", "--db", sys.argv[1], "sql", sys.argv[2], "--format", "csv"]
try:
    main()
except SystemExit as exc:
    assert not exc.code, exc.code
print(sorted(m for m in ("pyarrow", "numpy", "sqlglot", "rich", "traceql.query.library", "traceql.query.sqlcheck")
             if sys.modules.get(m) is not None))
"""
    db = tmp_path / "ws.duckdb"
    assert traceql("--db", str(db), "ingest", str(nsys_stub(tmp_path / "k.sqlite"))).returncode == 0
    out = {}
    for sql in ("SELECT name, count(*) AS n, sum(dur) AS total, avg(dur) AS mean FROM kernel GROUP BY name",
                "SELECT [dur, dur] AS l FROM kernel"):
        proc = subprocess.run([sys.executable, "-c", probe, str(db), sql], capture_output=True, text=True, cwd=REPO,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
        assert proc.returncode == 0, proc.stderr
        out[sql.split()[1]] = proc.stdout.splitlines()
    assert out["name,"] == ["name,n,total,mean", "k(int),1,150,150.0", "[]"]
    assert out["[dur,"] == ["l", "\"[150, 150]\"", "['pyarrow']"]


def test_each_command_is_loaded_from_the_module_that_defines_it():
    # the group imports a command's module when the command is looked up (group.COMMANDS): the
    # table names every command of the modules, each with its own module, and --help lists them all
    probe = """
import json, sys
from traceql.cli.group import COMMANDS, cli
before = sorted(m for m in sys.modules if m.startswith("traceql.cli.") and m.endswith(("_cmd", "_cmds")))
cli.load_all()
print(json.dumps([before, {name: cmd.callback.__module__ for name, cmd in cli.commands.items()}, COMMANDS]))
"""
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    before, registered, table = json.loads(proc.stdout)
    assert before == [] and registered == table and len(table) == 16
    listed = traceql("--help").stdout.split("Commands:", 1)[1].split()
    assert all(name in listed for name in table)


def test_first_family_build_loads_no_reader(tmp_path):
    # the first range report of a new workspace builds the nesting and attribution families (from
    # the workspace's tables, on a writing copy): none of the export readers, the PyTorch formulas or sqlite3 is
    # imported for that
    probe = """
import sys
import duckdb
from traceql.cli import main
db = sys.argv[1]
sys.argv = ["traceql", "--db", db, "report", "--by", "range", "--format", "csv"]
try:
    main()
except SystemExit as exc:
    assert not exc.code, exc.code
readers = ("traceql.sources.reader", "traceql.sources.detect", "traceql.sources.kineto", "traceql.sources.adapters",
           "traceql.sources.ranks", "traceql.sources.digest", "traceql.derive.pytorch", "msgspec", "sqlite3")
print(sorted(m for m in readers if m in sys.modules))
con = duckdb.connect(db, read_only=True)
print(sorted(r[0] for r in con.execute("SELECT family FROM derived_family").fetchall()))
"""
    db = tmp_path / "ws.duckdb"
    env = {"TRACEQL_DERIVE": "lazy"}
    assert traceql("--db", str(db), "ingest", str(nsys_stub(tmp_path / "k.sqlite")), env=env).returncode == 0
    proc = subprocess.run([sys.executable, "-c", probe, str(db)], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, **env, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-2:] == ["[]", "['attribution', 'ingest', 'nesting']"]


def test_one_file_ingest_starts_no_worker_machinery_nor_cxx_lookup(tmp_path):
    # one file is read in the ingesting process: multiprocessing is not imported; an nsys export
    # without mangled names never looks the C++ runtime up (find_library runs ldconfig and gcc);
    # nor does it import the JSON readers (msgspec), nor the PyTorch formulas (device_peak's GPU
    # tables are loaded when the op report first needs them)
    probe = """
import sys
from traceql.cli import main
sys.argv = ["traceql", "--db", sys.argv[1], "ingest", sys.argv[2]]
try:
    main()
except SystemExit as exc:
    assert not exc.code, exc.code
from traceql.sources import demangle
print(sorted(m for m in ("multiprocessing", "concurrent.futures", "traceql.store.parallel", "msgspec",
                         "traceql.sources.kineto", "traceql.sources.rocprof_json", "traceql.sources.gunzip",
                         "traceql.derive.pytorch", "traceql.derive.flops") if m in sys.modules),
      demangle._cxa.cache_info().currsize)
"""
    proc = subprocess.run([sys.executable, "-c", probe, str(tmp_path / "ws.duckdb"), str(nsys_stub(tmp_path / "k.sqlite"))],
                          capture_output=True, text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "[] 0"
