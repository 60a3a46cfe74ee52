"""HIP's words on AMD traces, CUDA's on NVIDIA's (trace.gpu_api, schemas/derive/gpu_api.sql): a PyTorch
profiler trace of a ROCm build (kineto-hta-amd-mi250: MI250s, hipLaunchKernel) is a HIP trace like the
AMD profilers' files, its copies '[HIP memcpy ...]' and its summary's API section 'HIP API calls'; an
A100 trace of the same profiler stays CUDA. Expected names are read from the files with json/sqlite3."""

from __future__ import annotations

import gzip
import json

import pytest

import traceql
from traceql.sources.vendor import api_words

from ..util import NO_TRACES, TRACES, cli, source_rows

ROCM = TRACES / "kineto-hta-amd-mi250" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz"
A100 = TRACES / "kineto-hta-alexnet-a100" / "benchmark_result_2869224_1695835535_trace.json.gz"
ROCPROF = TRACES / "rocprofv1-hip-programming-mi300a" / "results.db"


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    if not all(p.exists() for p in (ROCM, A100, ROCPROF)):
        pytest.skip(NO_TRACES)
    db = tmp_path_factory.mktemp("amd_words") / "ws.duckdb"
    results = traceql.ingest([ROCM, A100, ROCPROF], db=db)
    w = traceql.open(db)
    yield w, {r.path: r.trace_id for r in results}, db
    w.close()


def test_gpu_api(ws):
    w, ids, _ = ws
    got = {r["trace_id"]: r["gpu_api"] for r in w.sql("SELECT trace_id, gpu_api FROM trace").to_pylist()}
    assert got == {ids[ROCM]: "HIP", ids[A100]: "CUDA", ids[ROCPROF]: "HIP"}


def test_copies_are_hip_copies_on_amd(ws):
    """gpu_op names each copy by its trace's API: the ROCm Kineto trace's two host-to-device copies
    (its gpu_memcpy events) and rocprof v1's COPY rows are '[HIP memcpy <kind>]'; the A100 trace's
    copies keep '[CUDA memcpy <kind>]'."""
    w, ids, _ = ws
    events = json.loads(gzip.decompress(ROCM.read_bytes()))["traceEvents"]
    n_rocm = sum(1 for e in events if e.get("cat") == "gpu_memcpy")
    n_rocprof = source_rows(ROCPROF, "SELECT count(*) FROM COPY")[0][0]
    rows = w.sql("SELECT trace_id, name, count(*) AS n FROM gpu_op WHERE op_kind = 'memcpy' "
                 "GROUP BY ALL ORDER BY ALL").to_pylist()
    by = {}
    for r in rows:
        by.setdefault(r["trace_id"], {})[r["name"]] = r["n"]
    assert by[ids[ROCM]] == {"[HIP memcpy Host-to-Device]": n_rocm} and n_rocm == 2
    assert sum(by[ids[ROCPROF]].values()) == n_rocprof and all(n.startswith("[HIP memcpy ") for n in by[ids[ROCPROF]])
    assert by[ids[A100]] and all(n.startswith("[CUDA memcpy ") for n in by[ids[A100]])


def test_summary_words(ws):
    """summary at 80 columns: 'HIP API calls' and '[HIP memcpy' for the ROCm PyTorch trace, with no
    'CUDA' anywhere; each trace of the workspace in its own words (traces of one job that mix
    both say 'API calls')."""
    _, ids, db = ws
    run = cli("--db", db, "summary", "--trace", str(ids[ROCM]), env={"COLUMNS": "80"})
    assert run.returncode == 0, run.stderr
    assert "all HIP API calls" in run.stdout and "[HIP memcpy Host-to-Device]" in run.stdout
    assert "CUDA" not in run.stdout and "or HIP graph running" in " ".join(run.stdout.split())
    assert max(len(ln) for ln in run.stdout.splitlines()) <= 80
    run = cli("--db", db, "summary", env={"COLUMNS": "80"})  # three unrelated traces: one overview each
    assert run.returncode == 0, run.stderr
    text = " ".join(run.stdout.split())
    assert (text.count("of all HIP API calls,"), text.count("of all CUDA API calls,")) == (2, 1)
    assert api_words(["HIP", "HIP"]) == "HIP API calls"
    assert api_words(["CUDA", None]) == "CUDA API calls"
    assert api_words(["HIP", "CUDA"]) == "API calls"


def test_timeline_names_hip_copies(ws, tmp_path):
    """The Perfetto export names the ROCm trace's copies as gpu_op does."""
    _, ids, db = ws
    out = tmp_path / "t.json"
    run = cli("--db", db, "export", "--format", "perfetto", "--trace", str(ids[ROCM]), "-o", out)
    assert run.returncode == 0, run.stderr
    names = [e.get("name") for e in json.loads(out.read_text())["traceEvents"] if e.get("cat") == "memcpy"]
    assert names == ["[HIP memcpy Host-to-Device]"] * 2
