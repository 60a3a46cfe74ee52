"""`report --by gpu-trace` and `report --by api-trace` (queries/gpu_trace.sql, api_trace.sql):
nvprof's --print-gpu-trace and --print-api-trace, one row per operation or call in time order.

kmeans (an old nsys export) comes with the `nsys nvprof --print-gpu-trace` output its author ran
on the same profile (oracle/out1.txt): every printed row's duration, correlation id, grid, block,
registers, shared memory and bytes must equal the report's row at the same position. The API
trace has one row per call of the source (counted with sqlite3), and nvprof sources keep nvprof's
own copy labels."""

import sqlite3

import pytest

import traceql

from ..util import cli
from ..util import ingested, trace_file

KMEANS = "kmeans-rtx3080-old-nsys"
NVPROF = "nvprof-gpuml-titanv/timeline.nvvp"


def _int(text):
    """A number as the oracle prints it: '.' between thousands ('8.294.400')."""
    return int(text.replace(".", ""))


def oracle_rows(path):
    """The rows of the "CUDA Kernel & Memory Operations Trace" section: dict per row."""
    lines = path.read_text(errors="replace").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("CUDA Kernel & Memory Operations Trace"))
    rows = []
    for line in lines[start + 4:]:
        if not line.strip() or line.startswith("Report file"):
            break
        f = line.split()
        device = f.index("NVIDIA")
        if "[CUDA" in f:  # a copy: start, duration, corr id, bytes, throughput, src, dst, device..., ctx, stream, name
            rows.append({"dur_ns": _int(f[1]), "correlation_id": int(f[2]), "bytes": _int(f[3]),
                         "src_kind": f[5], "dst_kind": f[6], "context_id": int(f[device + 5]),
                         "stream_id": int(f[device + 6]), "name": " ".join(f[device + 7:]),
                         "mb_per_s": _int(f[4].split(",")[0])})
        else:  # a kernel: start, duration, corr id, grid xyz, block xyz, regs, static, dynamic smem, device..., name
            rows.append({"dur_ns": _int(f[1]), "correlation_id": int(f[2]),
                         "grid": tuple(_int(x) for x in f[3:6]), "block": tuple(_int(x) for x in f[6:9]),
                         "registers": int(f[9]), "static_smem": int(f[10]), "dynamic_smem": int(f[11]),
                         "context_id": int(f[device + 5]), "stream_id": int(f[device + 6]),
                         "name": " ".join(f[device + 7:])})
    return rows


@pytest.fixture(scope="module")
def kmeans(tmp_path_factory):
    return ingested(tmp_path_factory, f"{KMEANS}/report2.sqlite"), trace_file(f"{KMEANS}/report2.sqlite")


def test_gpu_trace_equals_nsys_nvprof_row_for_row(kmeans):
    db, path = kmeans
    want = oracle_rows(path.parent / "oracle" / "out1.txt")
    with traceql.open(db) as ws:
        got = ws.report("gpu-trace").to_pylist()
    assert len(got) == len(want) == 357  # 51 kernels and 306 copies
    for i, (g, w) in enumerate(zip(got, want)):
        assert (g["dur_ns"], g["correlation_id"], g["context_id"], g["stream_id"]) == (
            w["dur_ns"], w["correlation_id"], w["context_id"], w["stream_id"]), i
        if "bytes" in w:
            assert (g["bytes"], g["src_kind"], g["dst_kind"]) == (w["bytes"], w["src_kind"], w["dst_kind"]), i
            assert g["grid"] is None and g["block"] is None and g["registers"] is None
            # the oracle prints MB/s cut to a whole number: bytes / ns * 1000
            assert int(g["gb_per_s"] * 1000) == w["mb_per_s"], i
        else:
            assert (g["grid"], g["block"]) == ("x".join(map(str, w["grid"])), "x".join(map(str, w["block"]))), i
            assert (g["registers"], g["static_smem"], g["dynamic_smem"], g["name"]) == (
                w["registers"], w["static_smem"], w["dynamic_smem"], w["name"]), i
            assert g["bytes"] is None
        assert g["device"] == "NVIDIA GeForce RTX 3080 (0)"
    # time order, from the trace's first event
    assert [g["start_ns"] for g in got] == sorted(g["start_ns"] for g in got) and got[0]["start_ns"] >= 0


def test_api_trace_one_row_per_call(kmeans):
    db, path = kmeans
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    calls = con.execute("SELECT start, end, correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME ORDER BY start").fetchall()
    con.close()
    with traceql.open(db) as ws:
        got = ws.report("api-trace").to_pylist()
        start = ws.execute("SELECT start_ts FROM trace").fetchone()[0]
    assert len(got) == len(calls) == 877
    assert sorted((start + g["start_ns"], start + g["start_ns"] + g["dur_ns"], g["correlation_id"]) for g in got) == \
        sorted(calls)
    assert [g["start_ns"] for g in got] == sorted(g["start_ns"] for g in got)
    names = {g["name"] for g in got}
    assert "cuStreamSynchronize" in names and all(g["api_kind"] == "driver" for g in got)


def test_nvprof_source_keeps_nvprof_copy_labels(tmp_path):
    path = trace_file(NVPROF)
    db = tmp_path / "ws.duckdb"
    traceql.ingest([path], db=db)
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    n_api = sum(con.execute(f"SELECT count(*) FROM CUPTI_ACTIVITY_KIND_{t}").fetchone()[0] for t in ("RUNTIME", "DRIVER"))
    kinds = dict(con.execute("SELECT copyKind, count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY GROUP BY 1").fetchall())
    n_ops = sum(con.execute(f"SELECT count(*) FROM CUPTI_ACTIVITY_KIND_{t}").fetchone()[0]
                for t in ("CONCURRENT_KERNEL", "MEMCPY", "MEMSET"))
    con.close()
    with traceql.open(db) as ws:
        gpu = ws.report("gpu-trace").to_pylist()
        api = ws.report("api-trace")
    assert api.num_rows == n_api == 2278 + 405
    assert len(gpu) == n_ops == 38 + 21 + 9
    labels = {1: "[CUDA memcpy HtoD]", 2: "[CUDA memcpy DtoH]", 8: "[CUDA memcpy DtoD]"}
    copies = [g["name"] for g in gpu if g["name"].startswith("[CUDA memcpy")]
    assert {n: copies.count(n) for n in set(copies)} == {labels[k]: n for k, n in kinds.items()}
    assert sum(g["name"] == "[CUDA memset]" for g in gpu) == 9


def test_cli_gpu_trace_csv(kmeans):
    db, _ = kmeans
    out = cli("--db", str(db), "report", "--by", "gpu-trace", "--limit", "2", "--format", "csv",
              "-c", "dur_ns,correlation_id,bytes,name")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["dur_ns,correlation_id,bytes,name",
                                       "1373032,19,8294400,[CUDA memcpy Host-to-Device]",
                                       "1332647,22,8105985,[CUDA memcpy Host-to-Device]"]
