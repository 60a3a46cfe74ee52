"""Generated fixtures: ingest agrees with what the generator wrote, and golden outputs pin
every view and the range report for a small fixture (UPDATE_GOLDEN=1 rewrites them)."""

import csv
import io
import os

import pytest

import traceql
from fixtures.gen_nsys import generate
from traceql.outputs.render import render
from traceql.core.resources import CONTRACT_TABLES, CONTRACT_VIEWS, ROW_ORDER

from ..util import REPO

GOLDEN = REPO / "tests" / "golden"
VOLATILE = {"trace": ("path", "ingested_at", "traceql_version", "file_size", "file_sha256")}  # SQLite builds differ in bytes


@pytest.fixture(scope="module", params=["2", "3"])
def generated(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(f"gen{request.param}")
    expected = generate(tmp / "gen.sqlite", layout=request.param, kernels=2000, seed=3)
    traceql.ingest([tmp / "gen.sqlite"], db=tmp / "ws.duckdb")
    ws = traceql.open(tmp / "ws.duckdb")
    yield expected, ws
    ws.close()


def one(ws, sql):
    return next(iter(ws.sql(sql).to_pylist()[0].values()))


def test_counts_and_sums_match_the_generator(generated):
    exp, ws = generated
    assert one(ws, "SELECT count(*) FROM kernel") == exp["kernels"]
    assert one(ws, "SELECT sum(dur) FROM kernel") == exp["kernel_dur_sum"]
    assert one(ws, "SELECT count(*) FROM memcpy") == exp["memcpy"]
    assert one(ws, "SELECT sum(bytes) FROM memcpy") == exp["memcpy_bytes_sum"]
    assert one(ws, "SELECT sum(dur) FROM memcpy") == exp["memcpy_dur_sum"]
    assert one(ws, "SELECT count(*) FROM memcpy WHERE copy_kind = 'Host-to-Device'") == exp["memcpy_htod"]
    assert one(ws, "SELECT count(*) FROM memset") == exp["memset"]
    assert one(ws, "SELECT sum(dur) FROM memset") == exp["memset_dur_sum"]
    assert one(ws, "SELECT count(*) FROM api_call") == exp["api_calls"]
    assert one(ws, "SELECT count(*) FROM api_call WHERE api_kind = 'driver'") == exp["driver_calls"]
    assert one(ws, "SELECT count(*) FROM nvtx_range") == exp["nvtx_ranges"]
    assert one(ws, "SELECT count(*) FROM nvtx_range WHERE style = 'start/end'") == exp["startend_ranges"]
    assert one(ws, "SELECT count(*) FROM nvtx_mark") == exp["nvtx_marks"]
    assert one(ws, "SELECT max(depth) + 1 FROM nvtx_range") == exp["max_nvtx_depth"]
    assert one(ws, "SELECT value FROM ingest_stats WHERE key = 'api_call.backtrace_duplicates_dropped'") \
        == exp["backtrace_rows"]
    by_name = {r["name"]: r["n"] for r in ws.sql("SELECT name, count(*) AS n FROM kernel GROUP BY 1").to_pylist()}
    assert by_name == exp["kernel_count_by_name"]
    per_pid = {r["pid"]: r["n"] for r in ws.sql("SELECT pid, count(*) AS n FROM kernel GROUP BY 1").to_pylist()}
    assert per_pid == {int(k): v for k, v in exp["kernels_per_process"].items()}


def test_every_gpu_op_finds_its_launch_despite_reused_correlation_ids(generated):
    exp, ws = generated
    assert one(ws, "SELECT count(*) FROM launch WHERE api_id IS NULL") == 0
    assert one(ws, "SELECT count(DISTINCT api_id) FROM launch") == exp["kernels"] + exp["memcpy"] + exp["memset"]
    # each op's launch is in its own process
    assert one(ws, "SELECT count(*) FROM launch l JOIN api_call a USING (trace_id, api_id) WHERE a.pid <> l.pid") == 0


def test_all_step_work_is_inside_train_step(generated):
    exp, ws = generated
    rows = {r["name"]: r for r in ws.report("range").to_pylist()}
    assert rows["train_step"]["instances"] == exp["steps"]
    # the loader's memcpys are in the 'epoch' start/end range, all else in train_step
    assert rows["train_step"]["gpu_kernel_ns"] == exp["kernel_dur_sum"]
    assert "[unattributed]" not in rows
    assert rows["train_step"]["gpu_busy_ns"] < rows["train_step"]["gpu_kernel_ns"] \
        + rows["train_step"]["memcpy_ns"] + rows["train_step"]["memset_ns"]


def dump(ws, view):
    cols = [c for c in ws.sql(f"SELECT * FROM {view} LIMIT 0").column_names if c not in VOLATILE.get(view, ())]
    table = ws.sql(f"SELECT {', '.join(cols)} FROM {view} ORDER BY {ROW_ORDER[view]}")
    buf = io.StringIO()
    render(table, "csv", buf)
    return buf.getvalue()


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("golden")
    generate(tmp / "small.sqlite", layout="3", kernels=40, seed=0)
    traceql.ingest([tmp / "small.sqlite"], db=tmp / "ws.duckdb")
    ws = traceql.open(tmp / "ws.duckdb")
    yield ws
    ws.close()


def check_golden(name, text):
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(text)
    assert path.exists(), f"missing golden file {path}; run with UPDATE_GOLDEN=1 to create it"
    assert text == path.read_text(), f"{name} differs from its golden output"


@pytest.mark.parametrize("view", CONTRACT_TABLES + CONTRACT_VIEWS)
def test_golden_views(small, view):
    check_golden(f"view_{view}.csv", dump(small, view))


@pytest.mark.parametrize("variant, params", [
    ("name", {}),
    ("path_depth2", {"group_by": "path", "max_depth": 2}),
    ("match", {"match": ["layer", "OPT"]}),
])
def test_golden_range_report(small, variant, params):
    buf = io.StringIO()
    render(small.report("range", **params), "csv", buf)
    check_golden(f"report_range_{variant}.csv", buf.getvalue())
