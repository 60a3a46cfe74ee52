"""Nsight Systems reports (.nsys-rep, .qdrep) ingested through `nsys export` (traceql.nsys_export).

No real nsys here: a stand-in `nsys` script on PATH (or named by $TRACEQL_NSYS) does what
`nsys export --type sqlite --output OUT REPORT` does for these tests, copying a known export (a
fixture from fixtures/gen_torch.py) to OUT, and logs each call. The ingest through it must equal
a direct ingest of that export, the export is cached beside the workspace and reused while the
report is unchanged, and a failing nsys is a one-line input error with nothing written."""

from __future__ import annotations

import os
import stat
import sys

import pytest

import traceql
from traceql.core.errors import InputError

from ..util import cli

STAND_IN = """#!{python}
import shutil, sys
args = sys.argv[1:]
with open({log!r}, "a") as fh:
    fh.write(" ".join(args) + "\\n")
if {fail!r}:
    sys.stderr.write("Error: {fail}\\n")
    sys.exit(1)
assert args[:3] == ["export", "--type", "sqlite"], args
out = args[args.index("--output") + 1]
shutil.copyfile({source!r}, out)
"""


def stand_in(folder, source, fail: str = ""):
    """A folder holding an executable `nsys` that exports SOURCE (or fails saying FAIL), and its log."""
    folder.mkdir(exist_ok=True)
    log = folder / "calls.log"
    script = folder / "nsys"
    script.write_text(STAND_IN.format(python=sys.executable, log=str(log), fail=fail, source=str(source)))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return folder, log


def calls(log) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    from fixtures.gen_torch import generate

    path = tmp_path_factory.mktemp("export") / "known.sqlite"
    generate(path, kernels=120, seed=3)
    return path


@pytest.fixture
def env(monkeypatch):
    monkeypatch.delenv("TRACEQL_NSYS", raising=False)
    monkeypatch.delenv("TRACEQL_NSYS_CACHE", raising=False)
    return monkeypatch


def rows(db, view, order):
    with traceql.open(db) as ws:
        return ws.execute(f"SELECT * EXCLUDE (trace_id) FROM {view} ORDER BY {order}").fetchall()


def test_report_ingests_as_its_export(tmp_path, export, env):
    bin_dir, log = stand_in(tmp_path / "bin", export)
    env.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    reports = tmp_path / "reports"
    reports.mkdir()
    report = reports / "run_rank3.nsys-rep"
    report.write_bytes(b"a report nsys reads; traceql never does")
    work = tmp_path / "work"
    work.mkdir()
    db, direct = work / "ws.duckdb", tmp_path / "direct.duckdb"
    [r] = traceql.ingest([report], db=db)
    traceql.ingest([export], db=direct)
    # the export was written beside the workspace, nothing beside the report
    assert sorted(p.name for p in reports.iterdir()) == ["run_rank3.nsys-rep"]
    cached = r.path
    assert cached.name == "run_rank3.nsys-rep.sqlite" and work / ".traceql-cache" / "nsys" in cached.parents
    assert r.detected.exported_from == report.resolve()
    assert r.identity.value("rank") == 3  # the report's name still gives the rank
    [call] = calls(log)
    assert call.startswith("export --type sqlite ") and call.endswith(str(report))
    for view, order in (("kernel", "kernel_id"), ("api_call", "api_id"), ("nvtx_range", "range_id"),
                        ("memcpy", "memcpy_id"), ("op_range", "op_id, range_id"), ("torch_op", "ALL")):
        assert rows(db, view, order) == rows(direct, view, order), view
    with traceql.open(db) as ws, traceql.open(direct) as other:
        assert ws.report("kernel").equals(other.report("kernel"))
        stats = dict(ws.execute("SELECT key, detail FROM ingest_stats").fetchall())
    assert str(report.resolve()) in stats["source.exported_from"]

    # unchanged: the cached export is read again, nsys is not run; the trace is replaced
    [again] = traceql.ingest([report], db=db)
    assert len(calls(log)) == 1 and again.replaced and again.trace_id == r.trace_id
    # changed: exported again into the same file, still one trace
    report.write_bytes(b"another profile")
    [changed] = traceql.ingest([report], db=db)
    assert len(calls(log)) == 2 and changed.replaced and changed.path == cached
    with traceql.open(db) as ws:
        assert ws.execute("SELECT count(*) FROM trace").fetchone()[0] == 1


def test_traceql_nsys_names_the_program_and_the_cli_says_so(tmp_path, export, env):
    bin_dir, log = stand_in(tmp_path / "bin", export)
    env.setenv("TRACEQL_NSYS", str(bin_dir / "nsys"))
    report = tmp_path / "old.qdrep"
    report.write_bytes(b"qdrep")
    db = tmp_path / "ws.duckdb"
    proc = cli("--db", str(db), "ingest", str(report))
    assert proc.returncode == 0, proc.stderr
    assert f"  exported from {report} by nsys export" in proc.stdout.splitlines()
    assert len(calls(log)) == 1


def test_failing_nsys_is_one_line_and_writes_nothing(tmp_path, export, env):
    bin_dir, log = stand_in(tmp_path / "bin", export, fail="file is corrupt or truncated")
    env.setenv("TRACEQL_NSYS", str(bin_dir / "nsys"))
    report = tmp_path / "broken.nsys-rep"
    report.write_bytes(b"\x00garbage")
    db = tmp_path / "ws.duckdb"
    proc = cli("--db", str(db), "ingest", str(report))
    assert proc.returncode == 3
    assert proc.stderr.splitlines() == [
        f"traceql: error: {report}: nsys export failed (exit status 1): Error: file is corrupt or truncated"]
    assert not db.exists()
    cache = tmp_path / ".traceql-cache" / "nsys"
    assert [p for p in cache.rglob("*") if p.is_file()] == []  # no half-written export
    with pytest.raises(InputError, match="nsys export failed"):
        traceql.ingest([report], db=db)


def test_without_nsys_the_report_is_refused_with_what_to_do(tmp_path, env):
    env.setenv("PATH", str(tmp_path))  # no nsys there
    report = tmp_path / "run.nsys-rep"
    report.write_bytes(b"report")
    proc = cli("--db", str(tmp_path / "ws.duckdb"), "ingest", str(report))
    assert proc.returncode == 3
    assert "an Nsight Systems report, not its SQLite export, and no nsys was found" in proc.stderr
    assert "nsys export --type sqlite run.nsys-rep" in proc.stderr
    env.setenv("TRACEQL_NSYS", str(tmp_path / "missing-nsys"))
    proc = cli("--db", str(tmp_path / "ws.duckdb"), "ingest", str(report))
    assert proc.returncode == 3 and "TRACEQL_NSYS=" in proc.stderr and "no such program" in proc.stderr
