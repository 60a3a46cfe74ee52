"""Output a person reads, second pass (issue 35), seen as a person sees it: the CLI run in a
pseudo-terminal of 80, 100 and 120 columns (no $COLUMNS: the terminal's own width), on shared
real traces.

- traces that are not one job are never pooled silently: `report` warns naming the traces and
  --per-trace/--trace, `summary` gives one overview per trace, `export --format perfetto` starts
  each job at time 0 (never a span of days); the ranks of one job still pool without a word;
- `summary` prints times as the reports do ('38.1 s', '17 us');
- no lock file is left behind (tests/test_bad_input.py has the lock's own tests).
"""

from __future__ import annotations

import fcntl
import gzip
import json
import os
import re
import select
import struct
import subprocess
import sys
import termios

import pytest

import traceql

from .util import REPO, TRACES, trace_file

WIDTHS = (80, 100, 120)
UNRELATED = ("nvfuser-8xh100-nsys2024.6/report1.sqlite",
             "nsysai-mock-rtx3080-nsys2026.1/mock.sqlite",
             "kineto-hta-alexnet-a100/benchmark_result_2869224_1695835535_trace.json.gz")
NCCL = "nccl-ring-2nodes-3gpus-nsys2024.5"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def in_terminal(cols: int, *args, rows: int = 50) -> tuple[int, str]:
    """traceql ARGS run in a pseudo-terminal COLS wide (stdout and stderr both the terminal, as a
    person runs it); (exit code, what the terminal got, colours taken off, CR-LF as LF)."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR")}
    env["PYTHONPATH"] = str(REPO)
    proc = subprocess.Popen([sys.executable, "-m", "traceql", *map(str, args)], stdin=slave, stdout=slave,
                            stderr=slave, cwd=REPO, env=env, close_fds=True)
    os.close(slave)
    chunks = []
    while True:
        ready, _, _ = select.select([master], [], [], 120)
        if not ready:
            proc.kill()
            raise AssertionError("traceql printed nothing for 120 s")
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the other end closed
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    code = proc.wait(60)
    return code, _ANSI.sub("", b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n"))


def too_wide(text: str, cols: int) -> list[str]:
    from traceql.render import text_width

    return [line for line in text.splitlines() if text_width(line) > cols]


@pytest.fixture(scope="module")
def unrelated(tmp_path_factory):
    files = [trace_file(rel) for rel in UNRELATED]
    db = tmp_path_factory.mktemp("unrelated") / "ws.duckdb"
    traceql.ingest(files, db=db)
    return db


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    files = sorted(trace_file(NCCL).glob("*.sqlite"))
    db = tmp_path_factory.mktemp("job") / "ws.duckdb"
    traceql.ingest(files, db=db)
    return db


def utc_spans(db) -> dict[int, tuple[int, int]]:
    with traceql.open(db) as ws:
        rows = ws.sql("SELECT trace_id, start_ts + utc_offset_ns AS s, end_ts + utc_offset_ns AS e FROM trace")
    return {r["trace_id"]: (r["s"], r["e"]) for r in rows.to_pylist()}


# ------------------------------------------------------------------------------ jobs

def test_jobs_of_unrelated_traces_and_of_one_job(unrelated, job):
    from traceql.jobs import jobs

    with traceql.open(unrelated) as ws:
        found = jobs(ws)
    spans = utc_spans(unrelated)
    assert sorted(len(j.trace_ids) for j in found) == [1, 1, 1]  # three files of three different years
    order = sorted(spans, key=lambda t: spans[t][0])
    for before, after in zip(order, order[1:]):
        gap = spans[after][0] - spans[before][1]
        assert gap > 86_400e9  # days apart: the rule's 60 s is far from deciding it
        [j] = [j for j in found if after in j.trace_ids]
        assert j.gap_ns == spans[after][0] - max(spans[t][1] for t in order[:order.index(after)])
    with traceql.open(job) as ws:
        [one] = jobs(ws)
        ranks = {r["trace_id"]: r["rank"] for r in ws.sql("SELECT trace_id, rank FROM trace").to_pylist()}
    assert sorted(one.trace_ids) == sorted(ranks) and sorted(ranks.values()) == list(range(6))
    spans = utc_spans(job)
    assert max(s for s, _ in spans.values()) < min(e for _, e in spans.values())  # they overlap: one run


def test_a_rank_recorded_twice_is_not_one_job(tmp_path):
    """Two rank files of one run (they overlap in time) both said to be rank 0 (ingest --rank):
    they contradict one job, so neither is pooled; the other four ranks of the run stay one job."""
    from traceql.jobs import jobs

    files = sorted(trace_file(NCCL).glob("*.sqlite"))
    db = tmp_path / "ws.duckdb"
    traceql.ingest(files[:1], db=db, rank=0)
    traceql.ingest(files[1:2], db=db, rank=0)
    with traceql.open(db) as ws:
        found = jobs(ws)
        rows = ws.query("jobs").to_pylist()
    assert sorted(j.trace_ids for j in found) == [[1], [2]]
    assert {r["reason"] for r in rows} == {"a rank appears in more than one trace of the same time"}


@pytest.mark.parametrize("cols", WIDTHS)
def test_report_warns_when_it_pools_unrelated_traces(unrelated, job, cols):
    code, text = in_terminal(cols, "--db", unrelated, "report", "--by", "kernel", "--limit", "3")
    assert code == 0, text
    assert "traceql: warning: traces 1, 2, 3 are not one job (each trace is a job of its own: they ran up to " \
        in " ".join(text.split()), text
    assert "--per-trace splits them by trace, --trace ID shows one" in " ".join(text.split())
    code, text = in_terminal(cols, "--db", job, "report", "--by", "kernel")
    assert code == 0 and "not one job" not in text and "warning" not in text
    for args in (["--per-trace"], ["--trace", "2"]):  # split or one: nothing pooled, nothing said
        code, text = in_terminal(cols, "--db", unrelated, "report", "--by", "kernel", *args)
        assert code == 0 and "not one job" not in text


@pytest.mark.parametrize("cols", WIDTHS)
def test_summary_gives_one_overview_per_job(unrelated, job, cols):
    code, text = in_terminal(cols, "--db", unrelated, "summary", "--limit", "2")
    assert code == 0, text
    assert "one overview per trace" in " ".join(text.split())
    assert "Sections below" not in text
    assert text.count("GPU activities (Time(%)") == 3 and text.count("API calls (Time(%)") == 3
    assert not too_wide(text, cols)
    code, text = in_terminal(cols, "--db", job, "summary", "--limit", "2")
    assert code == 0 and "not one job" not in text
    assert "Sections below: the 6 traces of one job together (--per-trace splits them)" in " ".join(text.split())
    assert text.count("GPU activities (Time(%)") == 1
    assert not too_wide(text, cols)


def test_perfetto_of_unrelated_traces_starts_each_job_at_zero(unrelated, job, tmp_path):
    spans = utc_spans(unrelated)
    out = tmp_path / "unrelated.json"
    code, text = in_terminal(100, "--db", unrelated, "export", "--format", "perfetto", "-o", out)
    assert code == 0, text
    assert "each job starts at time 0 of the timeline, on its own clock" in " ".join(text.split())
    doc = json.loads(out.read_text())
    by_group: dict[int, list[float]] = {}
    for e in doc["traceEvents"]:
        if "ts" in e:
            by_group.setdefault(e["pid"], []).append(e["ts"] + e.get("dur", 0))
            by_group[e["pid"]].append(e["ts"])
    assert len(by_group) == 3
    longest_us = max(e - s for s, e in spans.values()) / 1e3
    for times in by_group.values():
        assert min(times) == pytest.approx(0, abs=1e-3)  # each job from its own first event
    assert max(max(t) for t in by_group.values()) <= longest_us + 1e-3  # never the days between them
    assert sorted(j["trace_ids"] for j in doc["otherData"]["jobs"]) == [[1], [2], [3]]
    # the ranks of one job stay on one clock: the first event of all is 0, the others after it
    out = tmp_path / "job.json"
    code, text = in_terminal(100, "--db", job, "export", "--format", "perfetto", "-o", out)
    assert code == 0 and "not one job" not in text
    doc = json.loads(out.read_text())
    spans = utc_spans(job)
    first = min(s for s, _ in spans.values())
    starts: dict[int, float] = {}
    for e in doc["traceEvents"]:
        if "ts" in e:
            starts[e["pid"]] = min(starts.get(e["pid"], e["ts"]), e["ts"])
    assert min(starts.values()) == pytest.approx(0, abs=1e-3)
    assert sorted(starts.values()) == pytest.approx(sorted((s - first) / 1e3 for s, _ in spans.values()), abs=1e-3)


# ------------------------------------------------------------------------------ small things

def test_no_lock_file_left_behind(tmp_path):
    src = trace_file(UNRELATED[1])
    db = tmp_path / "ws.duckdb"
    code, text = in_terminal(100, "--db", db, "ingest", src)
    assert code == 0, text
    code, text = in_terminal(100, "--db", db, "sql", "--write", "CREATE TABLE notes AS SELECT 1 AS x")
    assert code == 0, text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ws.duckdb"]
