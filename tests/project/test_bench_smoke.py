"""Smoke test of the benchmark harness (bench/run.py) on a 2,000-kernel generated export:
every measurement runs and yields the fields RESULTS.md is written from. No timing is
asserted, and nsys-ai is not involved (it is installed only by `make bench`)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from fixtures.gen_nsys import generate

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_run", REPO / "bench" / "run.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_run"] = mod  # dataclasses look their module up here
    spec.loader.exec_module(mod)
    yield mod
    sys.modules.pop("bench_run", None)


@pytest.fixture(scope="module")
def measured(bench, tmp_path_factory):
    data = tmp_path_factory.mktemp("bench")
    src = data / "small.sqlite"
    generate(str(src), layout="3", kernels=2000, seed=0)
    missing = bench.NsysAi(data / "no-venv", data / "no-home", problem="not installed (smoke test)")
    return bench.measure("generated tiny", src, data=data, nsysai=missing, runs=1, budget=1.0, timeout=30.0)


def test_floor_reads_the_columns_ingest_reads(bench, tmp_path):
    src = tmp_path / "x.sqlite"
    generate(str(src), layout="3", kernels=200, seed=0)
    con = bench.sqlite_open(src)
    try:
        queries = bench.floor_queries(con)
    finally:
        con.close()
    raw = bench.raw_columns()
    assert "CUPTI_ACTIVITY_KIND_KERNEL" in raw and ("start", "BIGINT") in raw["CUPTI_ACTIVITY_KIND_KERNEL"]
    kernel = next(q for q in queries if q.endswith('FROM "CUPTI_ACTIVITY_KIND_KERNEL"'))
    assert 'total("start")' in kernel and 'total("end")' in kernel
    nvtx = next(q for q in queries if q.endswith('FROM "NVTX_EVENTS"'))
    assert 'sum(length("text"))' in nvtx


def test_measure_gives_every_field(measured):
    r = measured
    assert r["counts"]["kernels"] == 2000
    assert r["floor"]["secs"] > 0 and r["floor"]["rows"] > 2000
    for op in ("kernel", "api", "summary", "nvtx_sum", "range"):
        b = r["baseline"][op]
        assert "load" in b and "timeout" in b
        assert b["secs"] is None or b["secs"] > 0
    assert r["ingest"]["secs"] > 0 and r["ingest"]["rss_mb"] > 0
    profile = r["ingest"]["profile"]
    assert profile["statements"] > 10 and profile["top"]
    phases = {p["phase"] for p in profile["phases"]}
    assert any(p.startswith("read from SQLite") for p in phases)
    assert any(p.startswith("correlation and attribution") for p in phases)
    assert sum(p["statements"] for p in profile["phases"]) == profile["statements"]
    for op in ("kernel", "api", "range", "summary"):
        assert r["inproc"][op]["secs"] > 0 and r["inproc"][op]["first"] > 0
        assert r["cli"][op]["secs"] > 0 and r["cli"][op]["rss_mb"] > 0
    assert r["cli"]["startup"]["secs"] > 0
    assert r["nsysai"] == {"problem": "not installed (smoke test)"}


def test_traceql_and_baseline_agree(bench, measured):
    for op in ("kernel", "api"):
        assert bench.check(measured, op).startswith("agrees"), bench.check(measured, op)


def test_baseline_timeout_is_recorded(bench, tmp_path):
    src = tmp_path / "x.sqlite"
    generate(str(src), layout="3", kernels=2000, seed=0)
    b = bench.measure_baseline(src, "range", timeout=0.0)
    assert b["secs"] is None and b["timeout"] == 0.0


def test_render(bench, measured):
    meta = dict(command="test", date="today", machine="m", python="3", duckdb="d", sqlite="s", nsysai="",
                nsysai_duckdb="", wait_load=1.5, wait_max=10, waited=0, runs=1, budget=1.0)
    text = bench.render([measured], meta)
    for heading in ("## Inputs", "## Ingest", "## Reports", "## End to end against nsys-ai", "## Targets",
                    "## Where ingest time goes", "## Baselines"):
        assert heading in text
    assert "| generated tiny | `report --by range` |" in text
    assert "not installed (smoke test)" in text
    assert str(REPO) not in text  # no path of this machine in RESULTS.md


def test_render_again_from_json(bench, measured, tmp_path):
    import json

    meta = dict(command="test", date="today", machine="m", python="3", duckdb="d", sqlite="s", nsysai="",
                nsysai_duckdb="", wait_load=1.5, wait_max=10, waited=10, runs=1, budget=1.0)
    saved = tmp_path / "results.json"
    saved.write_text(json.dumps(dict(meta=meta, results=[measured]), default=str))
    out = tmp_path / "RESULTS.md"
    bench.main(["--render", str(saved), "--out", str(out)])
    text = out.read_text()
    assert "| generated tiny | `summary` |" in text
    assert "did not within the cap of 10 s" in text
