"""trace.driver_version, cuda_driver_version, cuda_runtime_version and torch_version on real
traces, checked against what the source files hold (read here with sqlite3 and json): nsys
exports (dotted and digits-only driver versions, an export without TARGET_INFO_SYSTEM_ENV),
PyTorch profiler traces with and without a harness's torch_env_info, and nvprof (records none).
The diff pair that differs in them is in tests/analysis/test_diff_gate.py
(test_other_hardware_and_profiler_are_warned_about)."""

from __future__ import annotations

import gzip
import json
import sqlite3

import duckdb
import pytest

import traceql
from traceql.sources.versions import cuda_version, driver_version

from ..util import trace_file

FILES = {
    "bert": "kineto-tracelens-h100-bert-small/gaunernst_bert-small-uncased__1016001.json.gz",
    "triton": "kineto-hta-triton/triton_example.json.gz",
    "cardiac": "cardiac-old-nsys-no-activity/report1.sqlite",        # driver '4952905'
    "windows": "extrap-windows-gtx1060-nsys2022.1/con_kernel.sqlite",  # driver '42600'
    "memfusion": "memfusion-rtx3090-onnx-nvtx-nsys2023.1/report1.sqlite",  # driver '530.30.02'
    "kmeans": "kmeans-rtx3080-old-nsys/report2.sqlite",              # no TARGET_INFO_SYSTEM_ENV
    "nvprof": "nvprof-gpuml-titanv/timeline.nvvp",
}
COLUMNS = ("driver_version", "cuda_driver_version", "cuda_runtime_version", "torch_version")


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    paths = {name: trace_file(rel) for name, rel in FILES.items()}
    db = tmp_path_factory.mktemp("versions") / "ws.duckdb"
    traceql.ingest(list(paths.values()), db=db)
    con = duckdb.connect(str(db), read_only=True)
    try:
        got = {r[0]: dict(zip(COLUMNS, r[1:])) for r in con.execute(
            f"SELECT path, {', '.join(COLUMNS)} FROM trace").fetchall()}
    finally:
        con.close()
    return {name: got[str(path)] for name, path in paths.items()}, paths


def _system_env(path):
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        if not con.execute("SELECT count(*) FROM sqlite_master WHERE name = 'TARGET_INFO_SYSTEM_ENV'").fetchone()[0]:
            return {}
        return dict(con.execute("SELECT name, value FROM TARGET_INFO_SYSTEM_ENV "
                                "WHERE name IN ('NvDriverVersion', 'CudaDriverVersion')").fetchall())
    finally:
        con.close()


def _cuda(text):
    """'12.6' back to CUDA's integer 12060."""
    major, minor = text.split(".")
    return int(major) * 1000 + int(minor) * 10


@pytest.mark.parametrize("name", ["cardiac", "windows", "memfusion", "kmeans"])
def test_nsys_versions_are_the_recorded_ones(rows, name):
    got, paths = rows
    env = _system_env(paths[name])
    row = got[name]
    assert row["cuda_runtime_version"] is None and row["torch_version"] is None  # nsys never records them
    if name == "kmeans":
        assert env == {} and row["driver_version"] is None and row["cuda_driver_version"] is None
        return
    raw = env["NvDriverVersion"]
    # the dotted form as recorded; the digits-only form is the same digits with dots added
    assert row["driver_version"] == raw if "." in raw else row["driver_version"].replace(".", "") == raw
    assert _cuda(row["cuda_driver_version"]) == int(env["CudaDriverVersion"])
    expected = {"cardiac": ("495.29.05", "11.5"), "windows": ("426.00", "10.1"), "memfusion": ("530.30.02", "12.1")}
    assert (row["driver_version"], row["cuda_driver_version"]) == expected[name]


@pytest.mark.parametrize("name", ["bert", "triton"])
def test_kineto_versions_are_the_recorded_ones(rows, name):
    got, paths = rows
    with gzip.open(paths[name], "rt") as fh:
        members = {k: v for k, v in json.load(fh).items() if k != "traceEvents"}
    env = members.get("metadata", {}).get("system", {}).get("torch_env_info", {})
    row = got[name]
    assert _cuda(row["cuda_driver_version"]) == members["cuda_driver_version"]
    assert _cuda(row["cuda_runtime_version"]) == members["cuda_runtime_version"]
    assert row["torch_version"] == env.get("torch_version")
    assert row["driver_version"] == env.get("nvidia_driver_version")
    if name == "bert":  # the profiler's runtime (12.4, what PyTorch was built with), not the system's 12.8.93
        assert (row["cuda_runtime_version"], row["torch_version"], row["driver_version"]) == \
            ("12.4", "2.6.0+cu124", "575.51.03") and env["cuda_runtime_version"] == "12.8.93"
    else:
        assert row["torch_version"] is None and row["driver_version"] is None


def test_nvprof_records_no_versions(rows):
    got, _ = rows
    assert got["nvprof"] == dict.fromkeys(COLUMNS)


def test_version_forms():
    assert [driver_version(v) for v in ("560.94", "4952905", "52510517", "42600", "", None, "r535")] == \
        ["560.94", "495.29.05", "525.105.17", "426.00", None, None, "r535"]
    assert [cuda_version(v) for v in (12060, "13000", 11040, 900, "x", None)] == \
        ["12.6", "13.0", "11.4", None, None, None]
