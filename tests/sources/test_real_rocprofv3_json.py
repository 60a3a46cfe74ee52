"""Cross-check traceql against an independent reading of a real rocprofv3 JSON file.

../shared/traces/rocprofv3-json-tracelens/908_results.json.gz (a third-party file, not part of
the repository: `rocprofv3 --output-format json` of a PyTorch run on MI350X, from TraceLens'
tests) is ingested once. Kernels, the kernel report and the devices are compared with figures
computed here with Python's json module straight from the document (no oracle ships with the
file: TraceLens' tests only check structure). The file records kernel dispatches only (its
hip_api, memory_copy and marker_api buffers are empty): HIP calls, copies and rocTX ranges are
checked on a cut of it with such records added in rocprofiler-sdk's layout.
"""

from __future__ import annotations

import gzip
import json
from collections import defaultdict

import pytest

import traceql
from traceql.sources.detect import detect
from traceql.core.errors import InputError

from ..util import NO_TRACES, TRACES

FILE = TRACES / "rocprofv3-json-tracelens" / "908_results.json.gz"


@pytest.fixture(scope="module")
def doc():
    if not FILE.exists():
        pytest.skip(NO_TRACES)
    with gzip.open(FILE, "rt") as fh:
        [tool] = json.load(fh)["rocprofiler-sdk-tool"]
    return tool


@pytest.fixture(scope="module")
def ws(tmp_path_factory, doc):
    db = tmp_path_factory.mktemp("rocprofv3_json") / "ws.duckdb"
    [result] = traceql.ingest([FILE], db=db)
    w = traceql.open(db)
    yield w, result
    w.close()


def expected_kernels(tool) -> list[tuple]:
    """(name, ts, dur, grid xyz, workgroup xyz, LDS, scratch, VGPRs, HIP device, pid, stream) per
    dispatch, from the JSON: the symbol's formatted_kernel_name (what rocprofv3 prints), the
    agent's logical_node_type_id (the HIP ordinal of a GPU)."""
    symbols = {s["kernel_id"]: s for s in tool["kernel_symbols"]}
    ordinal = {a["id"]["handle"]: a["logical_node_type_id"] for a in tool["agents"] if a["type"] == 2}
    pid = tool["metadata"]["pid"]
    out = []
    for r in tool["buffer_records"]["kernel_dispatch"]:
        d = r["dispatch_info"]
        s = symbols[d["kernel_id"]]
        out.append((s["formatted_kernel_name"], r["start_timestamp"], r["end_timestamp"] - r["start_timestamp"],
                    d["grid_size"]["x"], d["grid_size"]["y"], d["grid_size"]["z"],
                    d["workgroup_size"]["x"], d["workgroup_size"]["y"], d["workgroup_size"]["z"],
                    d["group_segment_size"], d["private_segment_size"], s["arch_vgpr_count"],
                    ordinal[d["agent_id"]["handle"]], pid, r["stream_id"]["handle"]))
    return out


def test_detects_rocprofv3_json():
    if not FILE.exists():
        pytest.skip(NO_TRACES)
    det = detect(FILE)
    assert (det.source_format, det.layout) == ("rocprofv3_json", "rocpd/v3")


def test_kernels_equal_json(ws, doc):
    w, result = ws
    expected = sorted(expected_kernels(doc))
    got = sorted(tuple(r.values()) for r in w.sql(
        "SELECT name, ts, dur, grid_x, grid_y, grid_z, block_x, block_y, block_z, static_shared_memory, "
        "local_memory_per_thread, registers_per_thread, device_id, pid, stream_id FROM kernel WHERE trace_id = ?",
        [result.trace_id]).to_pylist())
    assert len(got) == len(expected) == 43915
    assert got == expected


def test_report_by_kernel_equals_json_totals(ws, doc):
    """`report --by kernel`: calls and summed ns per name equal a group-by over the JSON, in the
    same order (summed time, descending), and the percentages are of the summed kernel time."""
    w, result = ws
    calls, total = defaultdict(int), defaultdict(int)
    for name, _, dur, *_ in expected_kernels(doc):
        calls[name] += 1
        total[name] += dur
    rep = w.report("kernel", trace_id=result.trace_id).to_pylist()
    assert {r["name"]: (r["calls"], r["total_ns"]) for r in rep} == {n: (calls[n], total[n]) for n in calls}
    assert [r["total_ns"] for r in rep] == sorted(total.values(), reverse=True)
    grand = sum(total.values())
    for r in rep[:5]:
        assert r["pct"] == pytest.approx(100 * total[r["name"]] / grand, abs=0.01)


def test_devices_threads_and_stats(ws, doc):
    w, result = ws
    tid = result.trace_id
    gpus = sorted((a["logical_node_type_id"], a["product_name"], a["cu_count"],
                   sum(b["size_in_bytes"] for b in a["mem_banks"]))
                  for a in doc["agents"] if a["type"] == 2)
    dev = sorted(tuple(r.values()) for r in w.sql(
        "SELECT device_id, name, sm_count, total_memory FROM device WHERE trace_id = ?", [tid]).to_pylist())
    assert dev == gpus and len(dev) == 8
    tids = {r["thread_id"] for r in doc["buffer_records"]["kernel_dispatch"]}
    assert {(r["pid"], r["tid"]) for r in w.sql("SELECT pid, tid FROM thread WHERE trace_id = ?", [tid]).to_pylist()} \
        == {(doc["metadata"]["pid"], t) for t in tids}
    stats = {r["key"]: r["value"] for r in w.sql(
        "SELECT key, value FROM ingest_stats WHERE trace_id = ?", [tid]).to_pylist()}
    # no hip_api buffer in this file: every dispatch is without its launch, and says so
    assert doc["buffer_records"]["hip_api"] == []
    assert stats["rocpd.kernel_without_launch"] == len(doc["buffer_records"]["kernel_dispatch"])
    assert w.sql("SELECT count(*) AS n FROM api_call WHERE trace_id = ?", [tid]).to_pylist() == [{"n": 0}]


def test_bad_rocprofv3_json_is_one_line_error(tmp_path, monkeypatch):
    from traceql.sources import rocprof_json

    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(gzip.compress(b'{"rocprofiler-sdk-tool": [{"metadata": {"pid": 1}, "agents": ['))
    assert detect(cut).source_format == "rocprofv3_json"
    with pytest.raises(InputError, match=r"cut\.json\.gz: not readable as rocprofv3 JSON") as exc:
        traceql.ingest([cut], db=tmp_path / "a.duckdb")
    assert "\n" not in str(exc.value)
    big = tmp_path / "big.json"
    big.write_text(json.dumps({"rocprofiler-sdk-tool": [{"metadata": {"pid": 1, "command": ["x" * 5000]}}]}))
    monkeypatch.setattr(rocprof_json, "MAX_BYTES", 4096)
    with pytest.raises(InputError, match=r"big\.json: rocprofv3 JSON larger than .*--output-format rocpd"):
        traceql.ingest([big], db=tmp_path / "b.duckdb")
    assert not (tmp_path / "b.duckdb").exists()


def with_calls_copies_markers(tool: dict, n: int = 200) -> tuple[dict, dict]:
    """The real document cut to its first N dispatches, plus the records rocprofv3 writes for a
    traced program's HIP calls, copies and rocTX ranges (empty in this file), in the layout of
    rocprofiler-sdk's own schema and tests (source/docs/rocprofv3-schema.json,
    tests/rocprofv3/tracing/validate.py): `kind` indexes strings.buffer_records and `operation`
    its operations (this file's own tables), the internal correlation id ties a call to its
    dispatch, and a rocTX range's message is strings.marker_api's value under its correlation id.
    Made physical: each hipLaunchKernel ends 1 us before its kernel starts, on the dispatch's
    thread; a host-to-device copy (with its hipMemcpyAsync call) 2 us before every 50th kernel;
    one roctxRangePushA range around each run of 50 launches. Returns the document and what it
    holds, for the checks."""
    names = tool["strings"]["buffer_records"]
    kind = {b["kind"]: i for i, b in enumerate(names)}

    def op(k, name):
        return names[kind[k]]["operations"].index(name)

    doc = {**tool, "buffer_records": {k: [] for k in tool["buffer_records"]},
           "strings": {**tool["strings"], "marker_api": []}}
    records = doc["buffer_records"]
    records["kernel_dispatch"] = tool["buffer_records"]["kernel_dispatch"][:n]
    corr = max(r["correlation_id"]["internal"] for r in records["kernel_dispatch"]) + 1
    gpu = next(a["id"]["handle"] for a in tool["agents"] if a["type"] == 2)
    cpu = next(a["id"]["handle"] for a in tool["agents"] if a["type"] == 1)
    launches, copies, ranges = [], [], []
    for i, k in enumerate(records["kernel_dispatch"]):
        c = k["correlation_id"]
        rec = {"size": 48, "kind": kind["HIP_RUNTIME_API_EXT"], "operation": op("HIP_RUNTIME_API_EXT", "hipLaunchKernel"),
               "thread_id": k["thread_id"], "correlation_id": dict(c),
               "start_timestamp": k["start_timestamp"] - 4000, "end_timestamp": k["start_timestamp"] - 1000}
        records["hip_api"].append(rec)
        launches.append((k["start_timestamp"], "hipLaunchKernel", rec["start_timestamp"]))
        if i % 50 == 0:
            t = k["start_timestamp"] - 2000 - 600
            cid = {"internal": corr, "external": 0}
            corr += 1
            records["hip_api"].append({
                "size": 48, "kind": kind["HIP_RUNTIME_API_EXT"], "operation": op("HIP_RUNTIME_API_EXT", "hipMemcpyAsync"),
                "thread_id": k["thread_id"], "correlation_id": cid, "start_timestamp": t - 900, "end_timestamp": t - 100})
            records["memory_copy"].append({
                "size": 64, "kind": kind["MEMORY_COPY"], "operation": op("MEMORY_COPY", "MEMORY_COPY_HOST_TO_DEVICE"),
                "thread_id": k["thread_id"], "correlation_id": cid, "start_timestamp": t, "end_timestamp": t + 500,
                "dst_agent_id": {"handle": gpu}, "src_agent_id": {"handle": cpu}, "bytes": 4096 * (i + 1)})
            copies.append((t, 500, 4096 * (i + 1), "Host-to-Device", "hipMemcpyAsync"))
            block = records["kernel_dispatch"][i:i + 50]
            cid = {"internal": corr, "external": 0}
            corr += 1
            start, end = t - 2000, block[-1]["start_timestamp"] - 500
            records["marker_api"].append({
                "size": 48, "kind": kind["MARKER_CORE_API"], "operation": op("MARKER_CORE_API", "roctxRangePushA"),
                "thread_id": k["thread_id"], "correlation_id": cid, "start_timestamp": start, "end_timestamp": end})
            doc["strings"]["marker_api"].append({"key": cid["internal"], "value": f"step {i // 50}"})
            ranges.append((f"step {i // 50}", start, end - start, len(block)))
    return {"rocprofiler-sdk-tool": [doc]}, {"launches": launches, "copies": copies, "ranges": ranges}


def test_calls_copies_and_rocTX_ranges(tmp_path, doc):
    """HIP calls, copies and rocTX ranges in rocprofv3's JSON layout (with_calls_copies_markers):
    every kernel has its hipLaunchKernel (the call's start), every copy is a memcpy row with its
    kind, bytes and hipMemcpyAsync call, every range an NVTX range that holds its 50 kernels."""
    made, want = with_calls_copies_markers(doc)
    path = tmp_path / "calls_results.json"
    path.write_text(json.dumps(made))
    [res] = traceql.ingest([path], db=tmp_path / "ws.duckdb")
    with traceql.open(tmp_path / "ws.duckdb") as w:
        got = sorted(tuple(r.values()) for r in w.sql(
            "SELECT k.ts, l.api_name, l.api_ts FROM launch l JOIN kernel k "
            "ON k.trace_id = l.trace_id AND k.kernel_id = l.op_id AND l.op_kind = 'kernel'").to_pylist())
        assert got == sorted(want["launches"]) and len(got) == 200
        got = sorted(tuple(r.values()) for r in w.sql(
            "SELECT m.ts, m.dur, m.bytes, m.copy_kind, l.api_name FROM memcpy m "
            "LEFT JOIN launch l ON l.trace_id = m.trace_id AND l.op_id = m.memcpy_id").to_pylist())
        assert got == sorted(want["copies"]) and len(got) == 4
        rep = {r["name"]: r for r in w.report("range").to_pylist()}
        assert sorted((k, r["instances"], r["kernels"]) for k, r in rep.items()) == \
            sorted((name, 1, n) for name, _, _, n in want["ranges"])
        got = sorted(tuple(r.values()) for r in w.sql("SELECT name, ts, dur FROM nvtx_range").to_pylist())
        assert got == sorted((name, ts, dur) for name, ts, dur, _ in want["ranges"])
        stats = {r["key"] for r in w.sql("SELECT key FROM ingest_stats").to_pylist()}
        assert "rocpd.kernel_without_launch" not in stats
    assert res.counts["api_call"] == 204 and res.gpu_api == "HIP"
