"""A blocking call is not the cost of the copy it carries: `pageable_memcpy` costs a copy by what
pinned memory would save (the copy's own time), and the wait of a host read (.item(): a small
device-to-host copy whose call returns only when the copy is done) is a synchronization in
`sync_calls`, named by its PyTorch op and NVTX path. Checked on a generated PyTorch profiler
trace (fixtures/gen_kineto.py: one iteration with a 64 MB pageable batch copy and a loss.item()),
against the JSON read independently, and on the hand-written nsys export of tests/analysis/test_analyze.py."""

from __future__ import annotations

import io
import sqlite3

import pytest

import traceql
from fixtures.gen_kineto import generate
from traceql.analysis.analyze import write_text

from ..sources.test_kineto import events, load, ns
from ..util import REPO, trace_file


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


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    """The JSON of TorchRec's rank 0 and of Qwen, test_kineto's workspace of every real Kineto
    trace (ingested once for the suite, its families built: tests/util.py ingested), and the
    trace ids of the two in it."""
    from ..sources.test_kineto import real_kineto, trace_ids

    folders = ["kineto-hta-torchrec-a100-rank0", "kineto-tracelens-h100-qwen0.5b"]
    files = [trace_file(f"{folders[0]}/rank0.json.gz"),
             trace_file(f"{folders[1]}/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz")]
    ws = traceql.open(real_kineto(tmp_path_factory))
    ids = trace_ids(ws)
    yield [load(f) for f in files], ws, [ids[f] for f in folders]
    ws.close()


def test_torchrec_host_reads_are_syncs_not_pageable_copies(real):
    """TorchRec's rank 0 copies KJT lengths to the host (aten::to, pageable): 30 device-to-host
    copies whose calls waited up to 147 ms for the queue. Contract 2 counted 758 ms of them as
    'recoverable by pinning'; they are synchronizations, each copy itself took microseconds."""
    (doc, _), ws, (torchrec, _) = real
    api = events(doc, "api")
    calls = {e["args"]["correlation"]: e for e in api}
    assert len(calls) == len(api)  # one CPU process: correlation ids are unique
    blocking = []
    for m in events(doc, "memcpy"):
        if "DtoH" not in m["name"]:
            continue
        c = calls.get(m["args"]["correlation"])
        if c is not None and ns(c["ts"]) < ns(m["ts"]) and ns(c["ts"]) + ns(c["dur"]) >= ns(m["ts"]) + ns(m["dur"]):
            blocking.append((ns(m["ts"]) - ns(c["ts"]), m["args"]["bytes"]))
    assert len(blocking) == 30 and max(w for w, _ in blocking) > 140_000_000
    result = ws.analyze(["sync_calls", "pageable_memcpy"], trace_id=torchrec)
    reads = [r for r in result.evidence["sync_calls"].to_pylist() if r["kind"] == "copy"]
    assert sorted(r["wait_ns"] for r in reads) == sorted(w for w, _ in blocking)
    assert {r["op"] for r in reads} == {"aten::to"}
    assert all(r["range_path"].endswith("aten::to > aten::_to_copy > aten::copy_") for r in reads)
    pageable = result.evidence["pageable_memcpy"].to_pylist()
    assert pageable and {r["copy_kind"] for r in pageable} == {"Host-to-Device"}  # the reads are not here
    assert all(r["recoverable_ns"] == min(r["copy_ns"], r["call_ns"]) for r in pageable)


def test_item_behind_a_stream_synchronize_without_sync_records(real):
    """Qwen's trace (PyTorch 2.x, no cuda_sync events): `if tensor:` runs aten::is_nonzero >
    aten::item > aten::_local_scalar_dense, a copy into pinned memory that returns at once and a
    cudaStreamSynchronize that waits: a sync finding by the call's name, naming the op."""
    (_, doc), ws, (_, qwen) = real
    assert not [e for e in doc["traceEvents"] if e.get("cat") == "cuda_sync"]
    [sync] = [e for e in events(doc, "api") if e["name"] == "cudaStreamSynchronize"]
    rows = [r for r in ws.analyze(["sync_calls"], trace_id=qwen).evidence["sync_calls"].to_pylist()
            if r["call"] == "cudaStreamSynchronize"]
    assert [(r["kind"], r["wait_ns"], r["op"], r["range_path"]) for r in rows] == [
        ("stream", ns(sync["dur"]), "aten::is_nonzero",
         "ProfilerStep#6 > aten::is_nonzero > aten::item > aten::_local_scalar_dense")]
    assert rows[0]["gpu_idle_ns"] > 0 and rows[0]["device_id"] == 0
