"""`traceql summary` and `traceql report` end to end, as a user runs them (a subprocess,
stdout, stderr and exit codes), on a generated fixture and one real trace."""

from __future__ import annotations

import csv
import io
import json
import re

import pyarrow.parquet as pq
import pytest

from fixtures.gen_nsys import generate

from ..util import cli as traceql
from ..util import ingested

CS336 = "cs336-jsun-train-fwdbwd-rtx3070ti-nsys2025.1/result.sqlite"


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cli_reports")
    generate(tmp / "small.sqlite", layout="3", kernels=40, seed=0)
    db = tmp / "ws.duckdb"
    proc = traceql("--db", str(db), "ingest", str(tmp / "small.sqlite"))
    assert proc.returncode == 0, proc.stderr
    return db


def run(db, *args):
    proc = traceql("--db", str(db), *args, cwd=db.parent)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    return proc.stdout


def cols(line: str) -> list[str]:
    """The cells of a line of a table for people (two spaces or more between cells)."""
    return re.split(r"\s{2,}", line.strip())


def rows(text, delimiter=","):
    return list(csv.DictReader(io.StringIO(text), delimiter=delimiter))


def test_summary_in_nvprof_layout(db):
    out = run(db, "summary").splitlines()
    assert out[0].startswith("trace 1: ") and out[0].endswith("small.sqlite (nsys 2026.1.1.204)")
    # times as the reports print them (issue 35: one time format; nvprof's '1.9032ms' before)
    assert out[1] == "  span: 1.9 ms from the first to the last event of any kind"
    assert out[2].startswith("  GPU 0 NVIDIA A100-SXM4-80GB: busy 1.62 ms = 84.89% of the span")
    gpu = out.index("GPU activities (Time(%) = share of the summed time of all GPU activities "
                    "(kernels, copies, memsets, graph executions), not of wall time):")
    assert out[gpu + 1].split() == ["Time(%)", "Time", "Calls", "Avg", "Min", "Max", "Name"]
    assert cols(out[gpu + 2]) == ["38.99%", "1.5 ms", "12", "125 us", "45.2 us", "351 us",
                                  "[CUDA memcpy Host-to-Device]"]
    api = out.index("API calls (Time(%) = share of the summed time of all CUDA API calls, not of wall time):")
    assert cols(out[api + 2]) == ["88.21%", "2.9 ms", "6", "483 us", "422 us", "575 us", "cudaStreamSynchronize"]

    machine = rows(run(db, "summary", "--format", "csv"))
    assert list(machine[0]) == ["section", "name", "calls", "total_ns", "pct", "avg_ns", "med_ns", "min_ns",
                                "max_ns", "stddev_ns"]
    assert {r["section"] for r in machine} == {"GPU activities", "API calls"}
    doc = json.loads(run(db, "summary", "--format", "json", "--limit", "1"))
    assert [r["section"] for r in doc["rows"]] == ["GPU activities", "API calls"]
    assert run(db, "summary", "--unit", "ms").splitlines()[1] == \
        "  span: 1.903 ms from the first to the last event of any kind"


def test_reports_and_shared_options(db, tmp_path):
    kernel = rows(run(db, "report", "--by", "kernel", "--format", "csv"))
    assert list(kernel[0]) == ["name", "calls", "total_ns", "pct", "avg_ns", "med_ns", "min_ns", "max_ns",
                               "stddev_ns"]
    assert len(kernel) == 8 and kernel[0]["name"] == "void gemm_kernel<float, 128>(float const*, float*, int)"

    picked = rows(run(db, "report", "--by", "kernel", "--where", "name LIKE '%gemm%' AND dur > 50000",
                      "--sort", "calls:asc", "--limit", "2", "-c", "name,calls,total_ns", "--format", "tsv"), "\t")
    assert [list(r) for r in picked] == [["name", "calls", "total_ns"]] * 2
    assert [(r["calls"], r["name"][:20]) for r in picked] == [("4", "void gemm_backward_k"), ("5", "void gemm_kernel<flo")]

    dims = rows(run(db, "report", "--by", "kernel", "--with-dims", "--per-trace", "--format", "csv"))
    assert list(dims[0])[:4] == ["trace_id", "name", "grid", "block"]

    memcpy = rows(run(db, "report", "--by", "memcpy", "--format", "csv"))
    assert [r["kind"] for r in memcpy] == ["Host-to-Device", "Device-to-Host"]
    assert float(memcpy[0]["gb_per_s"]) == pytest.approx(int(memcpy[0]["total_bytes"]) / int(memcpy[0]["total_ns"]))

    table = run(db, "report", "--by", "device", "--unit", "us")
    assert "Busy(%) of trace span" in table and "busy us" in table and "1,615.7" in table

    for by in ("api", "memset", "gpu", "stream", "thread", "launch", "range"):
        assert json.loads(run(db, "report", "--by", by, "--format", "json")), by

    out = tmp_path / "launch.parquet"
    run(db, "report", "--by", "launch", "--format", "parquet", "-o", str(out))
    assert pq.read_table(out).column_names[:5] == ["name", "calls", "launched", "api_calls", "api_total_ns"]
    md = tmp_path / "api.md"
    assert run(db, "report", "--by", "api", "--format", "markdown", "-o", str(md)) == ""
    assert md.read_text().startswith("| name | calls | total_ns | pct |")

    described = run(db, "reports", "kernel")
    assert described.startswith("kernel: kernels grouped by name")
    assert "pct        total_ns as a percentage of the summed execution time of all kernels" in described

    assert "pct is the row's share of the summed time of all rows of the report" in " ".join(run(db, "report", "--help").split())


@pytest.mark.parametrize("args, message", [
    (["report", "--by", "api", "--sort", "bogus"],
     "traceql: error: --sort bogus: no column 'bogus' in this report; columns: name, calls, total_ns, pct,"),
    (["report", "--by", "kernel", "--where", "1=1; DROP TABLE kernel"],
     "traceql: error: --where: ';' is not allowed: give one expression, not statements"),
    (["report", "--by", "kernel", "--where", "(SELECT 1)"],
     "traceql: error: --where: subqueries are not allowed in a filter expression"),
    (["report", "--by", "kernel", "--where", "dur > 1 -- and more"],
     "traceql: error: --where: comments are not allowed in a filter expression"),
    (["report", "--by", "api", "--where", "DROP TABLE kernel"],
     "traceql: error: --where: a DROP statement is not allowed: give one boolean expression over the columns "
     "of api_call"),
    (["report", "--by", "memcpy", "--where", "nope = 1"], "traceql: error: --where: no column 'nope' in memcpy;"),
    (["report", "--by", "gpu", "--where", "name + 1 > 0"], "traceql: error: --where 'name + 1 > 0': SQL: "),
    (["report", "--by", "gpu", "--where", "name + 1"], "traceql: error: --where name + 1: not a condition; "),
    (["report", "--by", "kernel", "-c", "name,nope"], "traceql: error: -c name,nope: no column 'nope'"),
    (["report", "--by", "kernel", "--unit", "ms", "--format", "csv"],
     "traceql: error: --unit applies to --format table and markdown; csv gives times in ns"),
    (["report", "--by", "api", "--with-dims"], "traceql: error: --with-dims applies to --by kernel only"),
    (["report", "--by", "kernel", "--match", "x"], "traceql: error: --match applies to --by range only"),
    (["report", "--by", "kernel", "--format", "parquet"], "traceql: error: --format parquet needs -o FILE"),
    (["report", "--by", "kernel", "--trace", "7"], "traceql: error: --trace 7: no such trace in"),
    (["summary", "--trace", "7"], "traceql: error: --trace 7: no such trace in"),
])
def test_errors_are_one_line_with_exit_code_2(db, args, message):
    proc = traceql("--db", str(db), *args, cwd=db.parent)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(message), proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stdout == ""


def test_summary_of_a_real_trace(tmp_path_factory):
    db = ingested(tmp_path_factory, CS336)
    out = run(db, "summary").splitlines()
    assert out[1] == "  span: 3.36 s from the first to the last event of any kind"
    assert out[2].startswith("  GPU 0 NVIDIA GeForce RTX 3070 Ti: busy 1.8 s = 53.53% of the span")
    first = out[out.index(next(line for line in out if line.startswith("GPU activities"))) + 2]
    assert cols(first) == ["28.95%", "521 ms", "1,275", "409 us", "171 us", "2.26 ms", "ampere_sgemm_128x64_tn"]
    api = out.index(next(line for line in out if line.startswith("API calls")))
    assert cols(out[api + 2]) == ["45.65%", "813 ms", "15", "54.2 ms", "6.72 ms", "107 ms", "cudaDeviceSynchronize"]


def test_op_report_without_pytorch_ranges_says_so(db):
    """A trace without PyTorch op ranges: `report --by op` prints no rows (it used to print all
    kernel time as a '[no op]' row of forward time) and says why on stderr, exit 0."""
    proc = traceql("--db", str(db), "report", "--by", "op", "--format", "csv", cwd=db.parent)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["op,calls,fwd_ns,bwd_ns,recompute_ns,comm_ns,total_ns,pct,kernels_per_call,"
                                        "flops,bytes,tflops,ideal_ns,efficiency_pct,collectives,comm_bytes"]
    assert proc.stderr.startswith("traceql: no PyTorch op ranges in this workspace: --by op needs the NVTX ranges of "
                                  "torch.autograd.profiler.emit_nvtx()")
    assert "traceql report --by range" in proc.stderr
