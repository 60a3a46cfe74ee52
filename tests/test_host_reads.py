"""A blocking call is not the cost of the copy it carries: `pageable_memcpy` costs a copy by what
pinned memory would save (the copy's own time), and the wait of a host read (.item(): a small
device-to-host copy whose call returns only when the copy is done) is a synchronization in
`sync_calls`, named by its PyTorch op and NVTX path. Checked on a generated PyTorch profiler
trace (fixtures/gen_kineto.py: one iteration with a 64 MB pageable batch copy and a loss.item()),
against the JSON read independently, and on the hand-written nsys export of tests/test_analyze.py."""

from __future__ import annotations

import io
import sqlite3

import pytest

import traceql
from fixtures.gen_kineto import generate
from traceql.analyze import write_text

from .test_kineto import events, load, ns
from .util import REPO


@pytest.fixture(scope="module")
def one_step(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("host_reads")
    src = tmp / "step.json"
    expected = generate(src, kernels=25, seed=3, host_read=True, batch_bytes=64 << 20)
    traceql.ingest([src], db=tmp / "ws.duckdb")
    ws = traceql.open(tmp / "ws.duckdb")
    yield load(src), ws, expected
    ws.close()


def copies(doc):
    """Each copy event with its launching call, from the JSON."""
    calls = {e["args"]["correlation"]: e for e in events(doc, "api")}
    return [(m, calls[m["args"]["correlation"]]) for m in events(doc, "memcpy")]


def test_one_pageable_finding_costing_the_copy(one_step):
    doc, ws, expected = one_step
    assert expected["iterations"] == 1
    [(big, call)] = [(m, c) for m, c in copies(doc) if m["args"]["bytes"] == 64 << 20]
    assert big["name"] == "Memcpy HtoD (Pageable -> Device)"
    result = ws.analyze(["pageable_memcpy"])
    [row] = result.evidence["pageable_memcpy"].to_pylist()  # the 4-byte read is not one
    assert (row["bytes"], row["copy_kind"], row["call"]) == (64 << 20, "Host-to-Device", "cudaMemcpyAsync")
    assert row["copy_ns"] == ns(big["dur"]) == 1800 + (64 << 20) * 1000 // 6000
    assert row["call_ns"] == ns(call["dur"])
    assert row["recoverable_ns"] == min(ns(big["dur"]), ns(call["dur"]))
    assert row["pinned_ns"] is None  # no pinned copy in the trace to measure the bandwidth with
    assert row["range_path"] == "ProfilerStep#0 > aten::to > aten::_to_copy > aten::copy_"
    [summary] = result.findings.to_pylist()
    assert (summary["findings"], summary["recoverable_ns"]) == (1, row["recoverable_ns"])


def test_one_sync_finding_with_the_wait_of_the_item(one_step):
    doc, ws, expected = one_step
    [(read, call)] = [(m, c) for m, c in copies(doc) if m["args"]["bytes"] == 4]
    assert read["name"] == "Memcpy DtoH (Device -> Pageable)"
    [facts] = expected["host_reads"]
    wait = ns(read["ts"]) - ns(call["ts"])
    assert wait == facts["copy_ts"] - facts["call_ts"] > 0 and ns(call["dur"]) > wait + ns(read["dur"])
    result = ws.analyze(["sync_calls"])
    [row] = result.evidence["sync_calls"].to_pylist()
    assert (row["call"], row["kind"], row["wait_ns"]) == ("cudaMemcpyAsync", "copy", wait)
    assert row["op"] == "aten::item"
    assert row["range_path"] == "ProfilerStep#0 > aten::item > aten::_local_scalar_dense"
    # the GPU ran dry after the copy until the host queued the optimizer step: the next operation
    gpu = sorted((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for k in ("kernel", "memcpy", "memset")
                 for e in events(doc, k))
    end = ns(read["ts"]) + ns(read["dur"])
    after = min(s for s, _ in gpu if s >= end)
    assert row["gpu_idle_ns"] == row["recoverable_ns"] == after - end > 0
    [summary] = result.findings.to_pylist()
    assert summary["findings"] == 1 and summary["summary"].startswith("1 call, recoverable")
    # shown for people with its op and path
    out = io.StringIO()
    write_text(result, ws.sql("SELECT trace_id, path, duration FROM trace").to_pylist(), out, width=120)
    assert "aten::item" in out.getvalue() and "ProfilerStep#0 > aten::item" in out.getvalue()


def test_pinned_bandwidth_estimate(tmp_path):
    """With pinned copies in the trace, pinned_ns is the pageable copy's bytes at their bandwidth."""
    src = tmp_path / "analyze.sqlite"
    con = sqlite3.connect(src)
    con.executescript((REPO / "fixtures" / "nsys_analyze.sql").read_text())
    # a pinned host-to-device copy of 2 MB in 500 ns beside M1 (Pageable, 1 MB in 1000 ns)
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET srcKind = 1, dstKind = 2, copyKind = 1, bytes = 2097152, "
                "start = 29200, end = 29700 WHERE start = 29200")
    con.commit()
    rows = con.execute("SELECT bytes, end - start FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE srcKind = 1").fetchall()
    con.close()
    assert rows == [(2097152, 500)]
    traceql.ingest([src], db=tmp_path / "ws.duckdb")
    with traceql.open(tmp_path / "ws.duckdb") as ws:
        [row] = ws.analyze(["pageable_memcpy"]).evidence["pageable_memcpy"].to_pylist()
        assert (row["bytes"], row["copy_ns"], row["pinned_ns"], row["recoverable_ns"]) == (1048576, 1000, 250, 1000)
