"""Output a person reads, second pass (issue 35), seen as a person sees it: the CLI run in a
pseudo-terminal of 80, 100 and 120 columns (no $COLUMNS: the terminal's own width), on shared
real traces.

- traces that are not one job are never pooled silently: `report` warns naming the traces and
  --per-trace/--trace, `summary` gives one overview per trace, `export --format perfetto` starts
  each job at time 0 (never a span of days); the ranks of one job still pool without a word;
- `summary` prints times as the reports do ('38.1 s', '17 us');
- no lock file is left behind (tests/cli/test_bad_input.py has the lock's own tests).
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
import threading

import msgspec
import pytest

import traceql

from ..cli_server import cli as served
from ..util import REPO, TRACES, cli, ingested, trace_file

WIDTHS = (80, 100, 120)
UNRELATED = ("nvfuser-8xh100-nsys2024.6/report1.sqlite",
             "nsysai-mock-rtx3080-nsys2026.1/mock.sqlite",
             "kineto-hta-alexnet-a100/benchmark_result_2869224_1695835535_trace.json.gz")
NCCL = "nccl-ring-2nodes-3gpus-nsys2024.5"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def in_terminal(cols: int, *args, rows: int = 50) -> tuple[int, str]:
    """traceql ARGS run in a pseudo-terminal COLS wide (stdout and stderr both the terminal, as a
    person runs it); (exit code, what the terminal got, colours taken off, CR-LF as LF). The
    command is forked off the warm CLI server (tests/cli_server.py), which opens the terminal by
    its name; this process reads it meanwhile (a full terminal would stop the command)."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR")}
    done = {}

    def run():
        try:
            done["proc"] = served(*args, env=env, tty=os.ttyname(slave), timeout=120)
        except BaseException as exc:  # noqa: BLE001 - raised below, in the test's thread
            done["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    chunks, closed = [], False
    while True:
        ready, _, _ = select.select([master], [], [], 0.05 if not closed else 120)
        if not ready:
            if closed:
                raise AssertionError("the terminal gave nothing for 120 s after the command ended")
            if not thread.is_alive():  # the command ended: what it wrote is read up to EIO, as before
                os.close(slave)
                closed = True
            continue
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the other end closed
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    thread.join()
    if "error" in done:
        raise done["error"]
    return done["proc"].returncode, _ANSI.sub("", b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n"))


def too_wide(text: str, cols: int) -> list[str]:
    from traceql.outputs.cells import text_width

    return [line for line in text.splitlines() if text_width(line) > cols]


@pytest.fixture(scope="module")
def unrelated(tmp_path_factory):
    files = [trace_file(rel) for rel in UNRELATED]
    db = tmp_path_factory.mktemp("unrelated") / "ws.duckdb"
    traceql.ingest(files, db=db)
    return db


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    return ingested(tmp_path_factory, *(f"{NCCL}/{p.name}" for p in sorted(trace_file(NCCL).glob("*.sqlite"))))


def utc_spans(db) -> dict[int, tuple[int, int]]:
    with traceql.open(db) as ws:
        rows = ws.sql("SELECT trace_id, start_ts + utc_offset_ns AS s, end_ts + utc_offset_ns AS e FROM trace")
    return {r["trace_id"]: (r["s"], r["e"]) for r in rows.to_pylist()}


# ------------------------------------------------------------------------------ jobs

def test_jobs_of_unrelated_traces_and_of_one_job(unrelated, job):
    from traceql.query.jobs import jobs

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
    from traceql.query.jobs import jobs

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


# ------------------------------------------------------------------------------ shortened names

class _Event(msgspec.Struct):
    name: object = None
    cat: object = None


class _Events(msgspec.Struct):
    traceEvents: list[_Event] = []


def source_kernel_names(path) -> list[str]:
    """The distinct kernel names of a shared trace, read from the file itself (sqlite3, or msgspec
    decoding each JSON event's name and cat only), not through traceql. (json.load built every
    event of the 22 JSON files whole: 3.6 CPU s, msgspec 0.6, the same names.)"""
    import sqlite3

    if path.name.endswith((".json", ".json.gz")):
        opener = gzip.open if path.name.endswith(".gz") else open
        with opener(path, "rb") as fh:
            data = fh.read()
        try:
            events = msgspec.json.decode(data, type=_Events).traceEvents
        except msgspec.ValidationError:  # a file that is a list of events
            events = msgspec.json.decode(data, type=list[_Event])
        return sorted({e.name for e in events if str(e.cat or "").lower() == "kernel" and isinstance(e.name, str)})
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    con.text_factory = lambda b: b.decode("utf-8", "replace")
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "CUPTI_ACTIVITY_KIND_KERNEL" not in tables:
            return []
        cols = {r[1] for r in con.execute("PRAGMA table_info(CUPTI_ACTIVITY_KIND_KERNEL)")}
        strings = "StringIds" if "StringIds" in tables else "StringTable"
        key = "id" if strings == "StringIds" else "_id_"
        text = "value" if strings == "StringIds" else "value"
        column = next(c for c in ("demangledName", "name", "shortName") if c in cols)
        return sorted({r[0] for r in con.execute(
            f"SELECT DISTINCT s.{text} FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN {strings} s ON s.{key} = k.{column}")
            if r[0]})
    finally:
        con.close()


def shared_traces() -> list:
    if not TRACES.exists():
        return []
    return sorted(p for p in TRACES.rglob("*") if p.is_file() and p.name.endswith(
        (".sqlite", ".nvvp", ".sql", ".json", ".json.gz")) and "negative" not in p.parts[-2])


@pytest.mark.skipif(not TRACES.exists(), reason="../shared/traces not present (third-party traces are not part "
                                                "of the repository)")
def test_shortened_names_stay_distinct_on_every_shared_trace():
    """Issue 35: at 80 and 100 columns three different vectorized_elementwise_kernel names of the
    TorchRec trace printed alike. On every shared trace, the kernel names shortened to any room a
    table at 80, 100 or 120 columns gives them (20 columns up) stay as many as the names, each
    within the room."""
    from traceql.outputs.cells import shorten_distinct, text_width

    checked = 0
    for path in shared_traces():
        try:
            names = source_kernel_names(path)
        except (ValueError, OSError, UnicodeError, Exception) as exc:  # noqa: BLE001 - a file of another shape
            if "sqlite" in type(exc).__module__ or isinstance(exc, (ValueError, OSError, UnicodeError)):
                continue
            raise
        if len(names) < 2:
            continue
        checked += 1
        for room in range(20, max(WIDTHS) + 1):
            out = shorten_distinct(names, room)
            assert all(text_width(o) <= room for o in out), (path.name, room)
            assert len(set(out)) == len(names), (path.name, room, sorted(
                o for o in out if out.count(o) > 1)[:2])
    assert checked >= 15, checked


@pytest.mark.parametrize("cols", WIDTHS)
def test_kernel_report_names_apart_in_a_terminal(cols, tmp_path_factory):
    """The TorchRec trace's kernel report as a person sees it: every kernel a line of its own
    name, no two alike, nothing wider than the terminal."""
    src = trace_file("kineto-hta-torchrec-a100-rank0/rank0.json.gz")
    db = tmp_path_factory.getbasetemp() / "torchrec.duckdb"
    if not db.exists():
        traceql.ingest([src], db=db)
    with traceql.open(db) as ws:
        names = [n for n in ws.report("kernel").column("name").to_pylist() if n]
    code, text = in_terminal(cols, "--db", db, "report", "--by", "kernel")
    assert code == 0, text
    assert not too_wide(text, cols)
    lines = text.splitlines()
    shown = [line for line in lines if line and not line.startswith(" ") and line not in ("name",)
             and not line.startswith(("-", f"{len(names)} rows"))]
    if len(shown) != len(names):  # names inline, after the numbers
        shown = [re.split(r"\s{2,}", line.strip())[-1] for line in lines[2:2 + len(names)]]
    assert len(shown) == len(names) and len(set(shown)) == len(names)


# ------------------------------------------------------------------------------ help, queries, schema, info

COMMANDS = ("", "ingest", "report", "summary", "sql", "query", "queries", "schema", "info", "export", "analyze",
            "diff", "plot", "reports", "rm", "upgrade")


@pytest.mark.parametrize("cols", WIDTHS)
def test_help_fits_the_terminal(cols):
    """Every command's --help is wrapped by click at the terminal's width (no pre-wrapped text
    broken mid-word), and `report --help` lists every --by value on a line of its own."""
    from traceql.query.reports import REPORTS

    for command in COMMANDS:
        code, text = in_terminal(cols, *([command] if command else []), "--help")
        assert code == 0, (command, text)
        assert not too_wide(text, cols), (command, too_wide(text, cols)[:2])
    code, text = in_terminal(cols, "report", "--help")
    listed = [line.split()[1] for line in text.splitlines() if line.startswith("  --by ") and len(line.split()) > 2
              and line.split()[1] in REPORTS]
    assert listed == list(REPORTS)
    if cols >= 100:  # wider than click's 80 by default: the paragraphs use the room
        assert max(len(line) for line in text.splitlines()) > 90


@pytest.mark.parametrize("cols", WIDTHS)
def test_queries_schema_info_reports_wrap(unrelated, cols):
    for args in (["queries"], ["schema"], ["schema", "kernel"], ["--db", unrelated, "info"], ["reports", "op"],
                 ["query", "jobs", "--db", unrelated]):
        code, text = in_terminal(cols, *args)
        assert code == 0, (args, text)
        assert not too_wide(text, cols), (args, too_wide(text, cols)[:2])
    code, text = in_terminal(cols, "--db", unrelated, "info")
    assert "  GPUs     0-7 NVIDIA H100 80GB HBM3 (8)" in text  # nvfuser's eight GPUs on one line
    assert "format   PyTorch profiler (Kineto), " in text  # not 'kineto PyTorch profiler (Kineto)'
    # wrapped lines keep a count with its view: 'nvtx_range 639' never split
    rows = " ".join(" ".join(text.split("  rows     ")[1].split("\n")[0:3]).split())
    assert "nvtx_range 639," in rows or "nvtx_range 0," in rows


def test_pipes_get_lines_whole(unrelated):
    """Into a pipe (no terminal, no $COLUMNS) nothing is wrapped: one line per column of schema."""
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    out = subprocess.run([sys.executable, "-m", "traceql", "schema", "kernel"], capture_output=True, text=True,
                         cwd=REPO, env={**env, "PYTHONPATH": str(REPO)}).stdout
    from traceql.core.resources import contract_docs

    assert len(out.strip().splitlines()) == 1 + len(contract_docs()["kernel"].columns)


# ------------------------------------------------------------------------------ tables

QWEN = "kineto-tracelens-h100-qwen0.5b/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
CS336 = "cs336-jsun-train-fwdbwd-rtx3070ti-nsys2025.1/result.sqlite"


@pytest.fixture(scope="module")
def qwen(tmp_path_factory):
    return ingested(tmp_path_factory, QWEN)


@pytest.fixture(scope="module")
def cs336(tmp_path_factory):
    return ingested(tmp_path_factory, CS336)


def header_cells(lines: list[str]) -> list[tuple[int, int]]:
    """(start, end) of each word group of a line: the cells of a table line (2+ spaces apart)."""
    return [(m.start(), m.end()) for m in re.finditer(r"\S+(?: \S+)*", lines)]


@pytest.mark.parametrize("cols", WIDTHS)
def test_op_report_scales_flops_and_bytes(qwen, cols):
    """`report --by op` printed 'flops 1,929,646,350,336'; tables scale FLOPs and bytes like
    copies ('5.52 TFLOP', '9.08 GB'), csv keeps the exact integers."""
    from traceql.outputs.numbers import human_bytes, human_flops

    with traceql.open(qwen) as ws:
        rows = ws.report("op").to_pylist()
    costed = [r for r in rows if r["flops"]]
    assert costed
    code, text = in_terminal(cols, "--db", qwen, "report", "--by", "op")
    assert code == 0, text
    assert not too_wide(text, cols)
    for r in costed:
        assert human_flops(r["flops"]) in text and human_bytes(r["bytes"]) in text
        assert f"{r['flops']:,}" not in text
    assert re.search(r"\d(\.\d+)? TFLOP", text) and re.search(r"\d(\.\d+)? GB", text)
    csv_text = cli("--db", qwen, "report", "--by", "op", "--format", "csv").stdout
    assert str(costed[0]["flops"]) in csv_text  # exact, for machines
    header = text.split("---")[0].split()
    assert "flops" in header and {"kernels", "per", "call"} <= set(header)
    assert "kernels_per_call" not in text  # headers are words


@pytest.mark.parametrize("cols", WIDTHS)
def test_range_rows_stand_under_their_headers(cs336, qwen, cols):
    """`report --by range` at 80 columns split a row's numbers onto a second line under a second
    header line, not in the places of the first; the [unattributed] row's empty cells put its
    numbers under the wrong headers. The lines of numbers now form a grid: every number ends
    where a header word ends, the k-th number of a row's second line under the k-th of its
    first, and no place is empty (a missing number is '-')."""
    for db in (cs336, qwen):
        with traceql.open(db) as ws:
            columns = len(ws.report("range").column_names) - 1  # the numbers: every column but the name
        code, text = in_terminal(cols, "--db", db, "report", "--by", "range")
        assert code == 0, text
        assert not too_wide(text, cols)
        lines = text.splitlines()
        rule = next(i for i, line in enumerate(lines) if line.startswith("---"))
        if lines[0].startswith("name"):  # one line per row: every row has every number
            continue
        head_ends = {e for line in lines[1:rule] for _, e in header_cells(line)}
        rows, row = [], None
        for line in lines[rule + 1:-1]:
            if not line.startswith(" "):
                row = []
                rows.append(row)
            elif row is not None:
                row.append([e for _, e in header_cells(line)])
        assert rows
        for numbers in rows:
            assert sum(len(band) for band in numbers) == columns, numbers  # no empty place
            for band in numbers:
                assert set(band) <= head_ends  # each number under a header word
                assert band == numbers[0][:len(band)]  # the grid: same places as the first line


def test_unattributed_row_shows_dashes(qwen):
    code, text = in_terminal(120, "--db", qwen, "report", "--by", "range")
    line = next(line for line in text.splitlines() if line.startswith("[unattributed]")
                or "[unattributed]" in line)
    assert code == 0
    with traceql.open(qwen) as ws:
        row = next(r for r in ws.report("range").to_pylist() if r["name"] == "[unattributed]")
    missing = sum(v is None for k, v in row.items() if k != "name")
    assert missing and (line + " ").count(" - ") >= missing or text.split("[unattributed]")[1].count(" -") >= missing


# ------------------------------------------------------------------------------ small things, continued

def test_summary_prints_times_as_reports_do(qwen):
    """summary printed '4.0084ms' and '17.000us' (nvprof's five digits) for microsecond Kineto
    values where report printed '4.01 ms': both print the report's way now."""
    from traceql.outputs.numbers import human_ns

    with traceql.open(qwen) as ws:
        s = ws.summary(limit=3)
        kernels = {r["name"]: r for r in ws.report("gpu").to_pylist()}
    code, text = in_terminal(120, "--db", qwen, "summary", "--limit", "3")
    assert code == 0, text
    assert not re.search(r"\d(ms|us|ns|s)\b", text)  # never '4.0084ms': a space before the unit
    for r in s.rows.to_pylist():
        for key in ("total_ns", "avg_ns", "min_ns", "max_ns"):
            assert human_ns(r[key]) in text
        if r["name"] in kernels:
            assert human_ns(kernels[r["name"]]["total_ns"]) in text


def test_ingest_says_what_a_capture_without_cuda_missed(tmp_path):
    srcs = [trace_file("centerformer-tensorrt-nvtx-only-nsys2022.4/poolformer.sqlite"),
            trace_file("cudaq-vqe-8xh100-nsys2023.4/report1.sqlite"),
            trace_file(UNRELATED[1])]
    code, text = in_terminal(120, "--db", tmp_path / "ws.duckdb", "ingest", *srcs)
    assert code == 0, text
    blocks = re.split(r"\n(?=(?:added|replaced) trace )", text)
    assert "note: no CUDA API calls and no GPU work: the file was captured without CUDA tracing" in \
        " ".join(blocks[0].split()) and "nsys profile -t cuda,nvtx" in blocks[0]
    assert "note: CUDA API calls but no kernel, copy or memset" in " ".join(blocks[1].split())
    assert "note:" not in blocks[2]  # the mock export has kernels


def test_demo_ends_on_summary_and_a_report():
    recipe = (REPO / "Makefile").read_text().split("\ndemo:", 1)[1].split("\n\n", 1)[0]
    commands = [line.strip() for line in recipe.splitlines()[1:] if line.strip()]
    assert " summary" in commands[-2] and " report --by " in commands[-1]
