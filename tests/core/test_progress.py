"""Progress bars: drawn on a terminal, absent from pipes and files; what ingest and export report."""

import os
import pty
import select
import subprocess
import sys

import pytest

import traceql
from fixtures.gen_nsys import generate
from traceql.core.progress import Progress, for_stderr

from ..util import REPO

BAR_CHARACTERS = ("\r", "━", "█", "\x1b")


@pytest.fixture(scope="module")
def export_file(tmp_path_factory):
    root = tmp_path_factory.mktemp("progress")
    generate(root / "gen.sqlite", layout="3", kernels=300, seed=3)
    return root / "gen.sqlite"


def run(*args, tty=False):
    """traceql as a user runs it: stdout a pipe, stderr a pipe or (tty=True) a terminal."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "TERM": "xterm-256color", "COLUMNS": "120"}
    env.pop("NO_COLOR", None)
    if not tty:
        proc = subprocess.run([sys.executable, "-m", "traceql", *args], capture_output=True, text=True,
                              cwd=REPO, env=env)
        return proc.returncode, proc.stdout, proc.stderr
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "traceql", *args], stdout=subprocess.PIPE, stderr=follower,
                            stdin=subprocess.DEVNULL, cwd=REPO, env=env)
    os.close(follower)
    err = b""
    while True:
        ready, _, _ = select.select([leader], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal closed: the process ended
            break
        if not chunk:
            break
        err += chunk
    out = proc.stdout.read().decode()
    proc.wait(timeout=60)
    os.close(leader)
    return proc.returncode, out, err.decode(errors="replace")


def test_no_bars_when_stderr_is_not_a_terminal(export_file, tmp_path):
    db = str(tmp_path / "ws.duckdb")
    for args in (("ingest", str(export_file)),
                 ("export", "--format", "perfetto", "-o", str(tmp_path / "t.json")),
                 ("export", "--format", "csv", "-o", str(tmp_path / "csv"))):
        code, out, err = run("--db", db, *args)
        assert code == 0, err
        assert err == ""  # nothing at all: no bars, no carriage returns, no escape codes
        assert not any(c in out for c in BAR_CHARACTERS), out


def test_bars_on_a_terminal(export_file, tmp_path):
    db = str(tmp_path / "ws.duckdb")
    code, out, err = run("--db", db, "ingest", str(export_file), tty=True)
    assert code == 0, err
    assert "━" in err and "gen.sqlite" in err  # a bar per file, named after it
    assert out.startswith("added trace 1: ") and not any(c in out for c in BAR_CHARACTERS)
    code, out, err = run("--db", db, "export", "--format", "perfetto", "-o", str(tmp_path / "t.json"), tty=True)
    assert code == 0, err
    assert "━" in err and "t.json" in err
    assert out.startswith("wrote trace 1 to ")


def test_for_stderr_is_none_off_a_terminal(monkeypatch):
    class Pipe:
        def isatty(self):
            return False

    monkeypatch.setattr(sys, "stderr", Pipe())
    assert for_stderr() is None


class Recorder(Progress):
    def __init__(self):
        self.events = []

    def start(self, label, total=None):
        self.events.append(("start", label, total))

    def update(self, completed=None, total=None, detail=None):
        self.events.append(("update", completed, total, detail))


def test_ingest_reports_each_table_with_rows(export_file, tmp_path):
    rec = Recorder()
    traceql.ingest([export_file], db=tmp_path / "ws.duckdb", progress=rec)
    assert rec.events[0] == ("start", "gen.sqlite", None)
    updates = [e for e in rec.events if e[0] == "update"]
    details = [e[3] for e in updates]
    assert any(d.startswith("reading CUPTI_ACTIVITY_KIND_KERNEL (") for d in details)
    # the ingest family is built at ingest (schemas/derive/graph.csv); op_range waits for a query
    assert any(d.startswith("building launch") for d in details)
    assert not any(d.startswith("building op_range") for d in details)
    assert details[-1] == "done"
    done = [e[1] for e in updates]
    assert done == sorted(done)  # never goes back
    total = updates[-1][2]
    assert updates[-1][1] == total and all(e[2] == total for e in updates)
    # rows read so far grow as the tables are read
    rows = [int(d.split("(")[1].split()[0].replace(",", "")) for d in details if d.startswith("reading ")]
    assert rows == sorted(rows) and rows[-1] > 300


def test_ingest_accepts_a_plain_function(export_file, tmp_path):
    seen = []
    traceql.ingest([export_file], db=tmp_path / "ws.duckdb", progress=lambda label, detail: seen.append(detail))
    assert "done" in seen and any(d.startswith("reading ") for d in seen)


def test_exports_report_progress(export_file, tmp_path):
    db = tmp_path / "ws.duckdb"
    traceql.ingest([export_file], db=db)
    with traceql.open(db) as ws:
        rec = Recorder()
        result = ws.export_perfetto(tmp_path / "t.json", progress=rec)
        start = rec.events[0]
        assert start[0] == "start" and start[1] == "writing t.json"
        rows = sum(n for kind, n in result.counts.items() if kind not in ("flow", "memory"))  # memory: counters
        assert start[2] == rows  # rows of the timeline query: one per event (flows ride on GPU rows)
        assert rec.events[-1][1] == rows
        rec = Recorder()
        files = ws.export(tmp_path / "csv", "csv", progress=rec)
        assert rec.events[0] == ("start", f"writing {tmp_path / 'csv'}", len(files))
        assert rec.events[-1] == ("update", len(files), None, "done")
