"""What a person sees at 80, 120 and 200 columns: golden text of `traceql report --by kernel,
api, range, launch` and `traceql summary` on a generated trace and on three real ones
(cs336-jsun nsys 2025.1, nvfuser 8xH100 nsys 2024.6, the nvprof lm-a database), through the
CLI in-process with $COLUMNS set (UPDATE_GOLDEN=1 rewrites them). Each golden is also
checked for what it must show: no line wider than the terminal, every number of the report
whole, every name there (shortened in the middle at most). And the command-line fixes of
issue 20 that go with the tables: options after the command, --sort by what headers show,
did-you-mean for --where, numbers in JSON, help, info and export wording."""

from __future__ import annotations

import io
import json

import pyarrow as pa
import pytest
from click.testing import CliRunner

import traceql
from fixtures.gen_nsys import generate
from traceql.cli import cli
from traceql.outputs.numbers import humanize
from traceql.outputs.cells import text_width
from traceql.outputs.summary_text import render_summary
from traceql.query.reports import report_query
from traceql.core.resources import CONTRACT_TABLES, CONTRACT_VIEWS

from ..util import cli as run_cli
from ..project.test_fixtures_ingest import check_golden
from ..util import ingested, nsys_stub, trace_file

WIDTHS = (80, 120, 200)
REPORTS = ("kernel", "api", "range", "launch")
REAL = {
    "cs336": "cs336-jsun-train-fwdbwd-rtx3070ti-nsys2025.1/result.sqlite",
    "nvfuser": "nvfuser-8xh100-nsys2024.6/report1.sqlite",
    "lma": "nvprof-pytorch-emit-nvtx-lm-v100-a/net.sql",
}


def invoke(*args, width=None):
    """The command line in-process (click's runner: stdout is no terminal), $COLUMNS set to width."""
    env = {"COLUMNS": str(width) if width else None}
    result = CliRunner().invoke(cli, list(map(str, args)), env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    return result


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("widths")
    generate(tmp / "small.sqlite", layout="3", kernels=40, seed=0)
    traceql.ingest([tmp / "small.sqlite"], db=tmp / "ws.duckdb")
    return tmp / "ws.duckdb"


@pytest.fixture(scope="module", params=list(REAL))
def real(request, tmp_path_factory):
    return request.param, ingested(tmp_path_factory, REAL[request.param])


def check_shown(text: str, width: int, table: pa.Table, by: str) -> None:
    """Every line fits; every number of the report is there whole; every name is there."""
    lines = text.splitlines()
    too_wide = [line for line in lines if text_width(line) > width]
    assert not too_wide, too_wide[:3]
    human = humanize(table, labels=report_query(by).labels)
    for name, column in zip(human.column_names, human.columns):
        values = [v for v in column.to_pylist() if v is not None]
        if name == "name":
            for v in values:
                assert v[:10] in text, v
        elif human.schema.field(name).metadata or pa.types.is_integer(column.type):
            for v in values:
                assert str(v) in text, (name, v)
    assert any(line.startswith(f"{table.num_rows:,} row") for line in lines[-2:])


_REPORTS: dict = {}


def report_of(db, by: str):
    """ws.report(by) of workspace DB, computed once for the module's three widths (the command
    under test runs at each width; its rows are the same)."""
    key = (str(db), by)
    if key not in _REPORTS:
        with traceql.open(db) as ws:
            _REPORTS[key] = ws.report(by)
    return _REPORTS[key]


def report_golden(db, label: str, by: str, width: int) -> None:
    text = invoke("--db", db, "report", "--by", by, width=width).stdout
    check_shown(text, width, report_of(db, by), by)
    check_golden(f"width_{label}_{by}_{width}.txt", text)


def summary_golden(db, label: str, width: int) -> None:
    with traceql.open(db) as ws:
        result = ws.summary()
    # the file's name, not this machine's path
    paths = result.traces.column("path").to_pylist()
    result.traces = result.traces.set_column(
        result.traces.column_names.index("path"), "path", pa.array([p.rsplit("/", 1)[-1] for p in paths]))
    buf = io.StringIO()
    render_summary(result, "table", buf, width=width)
    text = buf.getvalue()
    assert all(text_width(line) <= width for line in text.splitlines()), text
    for row in result.rows.to_pylist():
        assert f"{row['pct']:.2f}%" in text and (row["name"] or "(unnamed)")[:10] in text
    check_golden(f"width_{label}_summary_{width}.txt", text)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("by", REPORTS)
def test_generated_report_at_width(generated, by, width):
    report_golden(generated, "generated", by, width)


@pytest.mark.parametrize("width", WIDTHS)
def test_generated_summary_at_width(generated, width):
    summary_golden(generated, "generated", width)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("by", REPORTS)
def test_real_report_at_width(real, by, width):
    label, db = real
    report_golden(db, label, by, width)


@pytest.mark.parametrize("width", WIDTHS)
def test_real_summary_at_width(real, width):
    label, db = real
    summary_golden(db, label, width)


def test_wide_and_pipes_print_names_whole(real):
    label, db = real
    with traceql.open(db) as ws:
        names = [n for n in ws.report("kernel").column("name").to_pylist() if n]
    assert len(names) > 1, label
    for args in (["--wide"], []):  # --wide, or no $COLUMNS and no terminal (a pipe, a file)
        text = invoke("--db", db, "report", "--by", "kernel", *args, width=80 if args else None).stdout
        assert all(n in text for n in names), label
        assert "shortened" not in text


@pytest.fixture(scope="module")
def lma(tmp_path_factory):
    return ingested(tmp_path_factory, REAL["lma"])


def test_width_option_like_pyprofs_w(lma, tmp_path):
    """--width N (PyProf's prof -w N) fits the table to N columns whatever $COLUMNS says, also in
    -o FILE; kernel-op without -c shows PyProf's default columns with fprop/bprop, and '-' in
    the cells without a value; --wide and --width together are a usage error."""
    args = ("--db", lma, "report", "--by", "kernel-op", "--limit", "90", "--width", "200")
    text = invoke(*args, width=80).stdout
    widths = [text_width(line) for line in text.splitlines()]
    assert max(widths) == 200  # one line per kernel, the params of multi_head_attention_forward cut to fit
    header = text.splitlines()[0].split()
    assert sorted(header) == sorted(["idx", "dir", "sub", "mod", "op", "kernel", "params", "Sil"])
    assert " fprop " in text and " bprop " in text and " - " in text
    check_golden("width_lma_kernel-op_200.txt", text)
    narrow = invoke(*args[:-1], "150", width=250).stdout
    assert max(text_width(line) for line in narrow.splitlines()) <= 150
    invoke(*args, "-o", tmp_path / "out.txt")
    assert (tmp_path / "out.txt").read_text() == text
    # -c all: every column of the report, here in bands of lines that fit 100 columns
    every = invoke(*args[:-1], "100", "-c", "all", width=200).stdout
    assert all(text_width(line) <= 100 for line in every.splitlines()) and "aten op" in every  # headers in words (issue 35)
    proc = run_cli(*map(str, args), "--wide")
    assert proc.returncode == 2 and proc.stderr.splitlines() == [
        "traceql: error: --wide and --width: give one (--wide: no width limit)"]


# ------------------------------------------------------------------------------ the options

def test_workspace_options_after_the_command(tmp_path):
    stub = nsys_stub(tmp_path / "a.sqlite")
    db = tmp_path / "after.duckdb"
    out = invoke("ingest", stub, "--db", db).stdout
    assert out.splitlines()[-1] == f"workspace: {db}" and db.exists()
    assert invoke("info", "--db", db).stdout.startswith("trace 1: ")
    assert invoke("sql", "SELECT count(*) AS n FROM kernel", "--format", "csv", "--db", db).stdout == "n\n1\n"
    assert invoke("report", "--by", "kernel", "--format", "csv", "--db", db, "--debug").stdout.startswith("name,")
    assert "--db PATH" in invoke("report", "--help").stdout


def test_sort_and_columns_take_what_headers_show(generated):
    def csv_rows(*args):
        return invoke("--db", generated, "report", "--by", "kernel", "--format", "csv", *args).stdout

    assert csv_rows("--sort", "avg") == csv_rows("--sort", "avg_ns")
    assert csv_rows("--sort", "avg_ms:asc") == csv_rows("--sort", "avg_ns:asc")
    assert csv_rows("--sort", "Time(%)") == csv_rows("--sort", "pct")
    assert csv_rows("--sort", "CALLS:asc") == csv_rows("--sort", "calls:asc")  # headers' case ('Sil')
    assert csv_rows("-c", "name,total,Time(%) of all kernels").splitlines()[0] == "name,total_ns,pct"
    wrong = run_cli("--db", str(generated), "report", "--by", "kernel", "--sort", "avrg")
    assert wrong.returncode == 2
    assert "--sort avrg: no column 'avrg' in this report; did you mean avg_ns? columns: name, calls" in wrong.stderr


def test_where_suggests_the_column(generated):
    wrong = run_cli("--db", str(generated), "report", "--by", "kernel", "--where", "duration > 5")
    assert wrong.returncode == 2
    assert "--where: no column 'duration' in kernel; did you mean dur? columns: trace_id" in wrong.stderr


def test_json_numbers_and_repeated_columns(generated):
    out = invoke("--db", generated, "sql", "--format", "json",
                 "SELECT sum(dur) AS total, dur, dur FROM kernel GROUP BY dur ORDER BY dur LIMIT 1").stdout
    [row] = json.loads(out)
    assert isinstance(row["total"], int) and set(row) == {"total", "dur", "dur_1"} and row["dur"] == row["dur_1"]
    with traceql.open(generated) as ws:
        t = ws.sql("SELECT sum(dur) AS s, dur, dur FROM kernel GROUP BY dur")
    assert t.schema.field("s").type == pa.int64() and t.column_names == ["s", "dur", "dur_1"]


def test_help_lists_every_view_and_both_formats():
    text = " ".join(invoke("--help").stdout.split())
    for view in CONTRACT_TABLES + CONTRACT_VIEWS:
        assert f" {view}," in text or f" {view}." in text, view
    assert "Nsight Systems" in text and "nvprof" in text


def test_info_of_an_export_without_activity(tmp_path):
    src = trace_file("cardiac-old-nsys-no-activity/report1.sqlite")
    db = tmp_path / "ws.duckdb"
    out = invoke("--db", db, "ingest", src).stdout
    assert "schema no schema version" not in out and "None" not in out
    info = invoke("--db", db, "info").stdout
    assert "None" not in info
    assert "  span     none: the export holds no event with a time" in info
    assert "(version not recorded), no schema version (layout nsys/legacy)" in info


def test_export_counts_read_as_words(tmp_path):
    db = tmp_path / "ws.duckdb"
    invoke("--db", db, "ingest", nsys_stub(tmp_path / "a.sqlite"))
    out = invoke("--db", db, "export", "--format", "perfetto", "-o", tmp_path / "t.json").stdout
    assert ": 1 kernel" in out and "1 kernels" not in out


def test_a_streamed_result_keeps_errors_and_interrupts(generated):
    """sql(..., batches=True) reads rows as they are printed: a Ctrl-C (DuckDB's interrupt) while
    they are read stays an interrupt, not an Arrow error; the rows are tidy as sql()'s."""
    import threading

    import duckdb

    with traceql.open(generated) as ws:
        reader = ws.sql("SELECT sum(dur) AS s, dur, dur FROM kernel GROUP BY dur ORDER BY dur", batches=True)
        assert reader.schema.names == ["s", "dur", "dur_1"] and reader.schema.field("s").type == pa.int64()
        assert reader.read_all().equals(ws.sql("SELECT sum(dur) AS s, dur, dur FROM kernel GROUP BY dur ORDER BY dur"))
        reader = ws.sql("SELECT i FROM range(200000000) t(i) WHERE i % 7 = 3", batches=True)
        threading.Timer(0.2, ws.con.interrupt).start()
        with pytest.raises(duckdb.InterruptException):
            for _ in reader:
                pass
