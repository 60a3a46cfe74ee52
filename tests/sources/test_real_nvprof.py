"""Cross-check traceql against independent computations on the real nvprof databases.

Every nvprof SQLite database in the shared trace folder (../shared/traces/nvprof-*/*.nvvp and
*.sql; third-party files, not part of the repository) is ingested once into one workspace per
test session. Each view is compared with numbers computed here straight from the source file
with Python's sqlite3 (opened read-only), without any of traceql's SQL: row counts, kernel
time, thread ids, device units, copy kinds, and NVTX pairing and nesting (a brute-force
definition: a range's parent is the tightest range on its thread that encloses it).
"""

from __future__ import annotations

import ast
import sqlite3
import struct
from collections import Counter
from pathlib import Path

import pytest

import traceql

from ..util import NO_TRACES, TRACES, trace_file
from ..util import cli as served

PYTORCH = "nvprof-pytorch-emit-nvtx-lm-v100-a/net.sql"
# CUPTI enums, written out here independently of schemas/nvprof.
CUPTI_COPY_KINDS = {1: "Host-to-Device", 2: "Device-to-Host", 8: "Device-to-Device", 10: "Peer-to-Peer"}
CUPTI_MEM_KINDS = {0: "Unknown", 1: "Pageable", 2: "Pinned", 3: "Device", 5: "Managed"}


def _nvprof_files() -> list[Path]:
    if not TRACES.is_dir():
        return []
    found = []
    for p in sorted(list(TRACES.glob("nvprof-*/*.nvvp")) + list(TRACES.glob("nvprof-*/*.sql"))):
        with open(p, "rb") as fh:
            if fh.read(16) == b"SQLite format 3\x00":
                found.append(p.resolve())
    return found


FILES = _nvprof_files()
PARAMS = ([pytest.param(p, id=f"{p.parent.name}/{p.name}") for p in FILES]
          or [pytest.param(None, id="no-traces", marks=pytest.mark.skip(reason=NO_TRACES))])


@pytest.fixture(scope="session")
def nvprof_ws(tmp_path_factory):
    """All shared nvprof databases ingested once into one workspace: (workspace, {path: trace_id})."""
    if not FILES:
        pytest.skip(NO_TRACES)
    db = tmp_path_factory.mktemp("real_nvprof") / "ws.duckdb"
    results = traceql.ingest(FILES, db=db)
    ws = traceql.open(db)
    yield ws, {r.path: r.trace_id for r in results}
    ws.close()


def q(nvprof_ws, sql, params=()):
    ws, _ = nvprof_ws
    return ws.sql(sql, list(params)).to_pylist()


def one(nvprof_ws, sql, params=()):
    [row] = q(nvprof_ws, sql, params)
    return next(iter(row.values())) if len(row) == 1 else row


class Source:
    def __init__(self, path: Path):
        self.con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        self.tables = {r[0] for r in self.con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}

    def all(self, sql):
        return self.con.execute(sql).fetchall()

    def rows(self, table, cols):
        return self.all(f"SELECT {cols} FROM {table}") if table in self.tables else []


def tid_of(path, nvprof_ws):
    return nvprof_ws[1][path]


# --------------------------------------------------------------------------- the tests

@pytest.mark.parametrize("path", PARAMS)
def test_view_counts_and_kernel_time(nvprof_ws, path):
    src, t = Source(path), tid_of(path, nvprof_ws)
    kernels = (src.rows("CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL", "start, end")
               + src.rows("CUPTI_ACTIVITY_KIND_KERNEL", "start, end"))
    markers = src.rows("CUPTI_ACTIVITY_KIND_MARKER", "flags")
    expected = {
        "kernel": len(kernels),
        "memcpy": len(src.rows("CUPTI_ACTIVITY_KIND_MEMCPY", "1")) + len(src.rows("CUPTI_ACTIVITY_KIND_MEMCPY2", "1")),
        "memset": len(src.rows("CUPTI_ACTIVITY_KIND_MEMSET", "1")),
        "api_call": len(src.rows("CUPTI_ACTIVITY_KIND_RUNTIME", "1")) + len(src.rows("CUPTI_ACTIVITY_KIND_DRIVER", "1")),
        "nvtx_range": sum(1 for (f,) in markers if f == 2),
        "nvtx_mark": sum(1 for (f,) in markers if f == 1),
    }
    got = {view: one(nvprof_ws, f"SELECT count(*) AS n FROM {view} WHERE trace_id = ?", [t]) for view in expected}
    assert got == expected
    assert expected["kernel"] > 0 and expected["api_call"] > 0
    assert one(nvprof_ws, "SELECT sum(dur) AS s FROM kernel WHERE trace_id = ?", [t]) == sum(e - s for s, e in kernels)
    assert one(nvprof_ws, "SELECT count(*) AS n FROM kernel WHERE trace_id = ? AND name IS NULL", [t]) == 0


@pytest.mark.parametrize("path", PARAMS)
def test_kernels_find_their_launching_call(nvprof_ws, path):
    t = tid_of(path, nvprof_ws)
    m = one(nvprof_ws, """
        SELECT count(*) AS with_corr,
               count(*) FILTER (WHERE EXISTS (SELECT 1 FROM api_call a WHERE a.trace_id = k.trace_id
                                              AND a.pid = k.pid AND a.correlation_id = k.correlation_id)) AS matched
        FROM kernel k WHERE k.trace_id = ? AND k.correlation_id IS NOT NULL""", [t])
    assert m["with_corr"] > 0
    assert m["matched"] / m["with_corr"] >= 0.99, m
    # and the launching call is a launch API (runtime cudaLaunch*, or the driver's cuLaunch*)
    names = {r["name"] for r in q(nvprof_ws, """
        SELECT DISTINCT a.name FROM kernel k JOIN api_call a
          ON a.trace_id = k.trace_id AND a.pid = k.pid AND a.correlation_id = k.correlation_id
        WHERE k.trace_id = ?""", [t])}
    assert names and all(n.startswith(("cudaLaunch", "cuLaunch")) for n in names), names


@pytest.mark.parametrize("path", PARAMS)
def test_api_calls(nvprof_ws, path):
    src, t = Source(path), tid_of(path, nvprof_ws)
    # pid and unsigned tid, independently masked
    calls = (src.rows("CUPTI_ACTIVITY_KIND_RUNTIME", "'runtime', processId, threadId & 4294967295, start, end - start, "
                      "correlationId, cbid")
             + src.rows("CUPTI_ACTIVITY_KIND_DRIVER", "'driver', processId, threadId & 4294967295, start, end - start, "
                        "correlationId, cbid"))
    got = q(nvprof_ws, "SELECT api_kind, pid, tid, ts, dur, correlation_id, name FROM api_call WHERE trace_id = ?", [t])
    assert Counter((r["api_kind"], r["pid"], r["tid"], r["ts"], r["dur"], r["correlation_id"]) for r in got) == \
        Counter(c[:6] for c in calls)
    assert all(r["tid"] >= 0 for r in got)
    # a few callback ids named by hand from the CUPTI headers
    by_hand = {("runtime", 211): "cudaLaunchKernel", ("runtime", 17): "cudaGetDevice", ("runtime", 16): "cudaSetDevice",
               ("runtime", 10): "cudaGetLastError", ("runtime", 20): "cudaMalloc", ("driver", 307): "cuLaunchKernel",
               ("driver", 276): "cuMemcpyHtoD", ("driver", 20): "cuModuleLoadDataEx"}
    want = Counter(by_hand[(c[0], c[6])] for c in calls if (c[0], c[6]) in by_hand)
    have = Counter(r["name"] for r in got if r["name"] in want)
    assert have == want
    assert not [r for r in got if r["name"].startswith("unknown")]
    # every thread that made a call is in the thread view, with the process name nvprof recorded
    threads = {(r["pid"], r["tid"]): r["process_name"]
               for r in q(nvprof_ws, "SELECT pid, tid, process_name FROM thread WHERE trace_id = ?", [t])}
    assert {(c[1], c[2]) for c in calls} <= set(threads)
    [(cmdline,)] = src.all("SELECT s.value FROM CUPTI_ACTIVITY_KIND_NAME n JOIN StringTable s ON s._id_ = n.name "
                           "WHERE n.objectKind = 1")
    assert set(threads.values()) == {cmdline}


@pytest.mark.parametrize("path", PARAMS)
def test_trace_row_and_devices(nvprof_ws, path):
    src, t = Source(path), tid_of(path, nvprof_ws)
    starts = [s for (s,) in src.all("SELECT min(start) FROM CUPTI_ACTIVITY_KIND_RUNTIME UNION ALL "
                                    "SELECT min(start) FROM CUPTI_ACTIVITY_KIND_DRIVER UNION ALL "
                                    "SELECT min(start) FROM CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL UNION ALL "
                                    "SELECT min(start) FROM CUPTI_ACTIVITY_KIND_MEMCPY UNION ALL "
                                    "SELECT min(start) FROM CUPTI_ACTIVITY_KIND_MEMSET UNION ALL "
                                    "SELECT min(timestamp) FROM CUPTI_ACTIVITY_KIND_MARKER") if s is not None]
    [(version,)] = src.all("SELECT version FROM Version")
    row = one(nvprof_ws, "SELECT source_format, schema_version, layout, clock, utc_offset_ns, start_ts "
                         "FROM trace WHERE trace_id = ?", [t])
    assert row == {"source_format": "nvprof", "schema_version": str(version), "layout": "nvprof/v12",
                   "clock": "epoch", "utc_offset_ns": 0, "start_ts": min(starts)}
    devices = src.all("SELECT d.id, s.value, d.numMultiprocessors, d.globalMemoryBandwidth, d.coreClockRate, "
                      "d.globalMemorySize, d.computeCapabilityMajor, d.computeCapabilityMinor "
                      "FROM CUPTI_ACTIVITY_KIND_DEVICE d JOIN StringTable s ON s._id_ = d.name")
    got = q(nvprof_ws, "SELECT device_id, name, sm_count, memory_bandwidth, clock_rate, total_memory, compute_major, "
                       "compute_minor FROM device WHERE trace_id = ? ORDER BY device_id", [t])
    # CUPTI: bandwidth in kB/s, clock in kHz, memory in bytes; the contract: bytes/s, Hz, bytes
    assert [tuple(r.values()) for r in got] == sorted((i, n, sm, bw * 1000, clk * 1000, mem, ma, mi)
                                                      for i, n, sm, bw, clk, mem, ma, mi in devices)
    for r in got:  # sanity: every GPU here is a Pascal or Volta part with 0.5-1 TB/s and 1.4-1.6 GHz
        assert 5e11 <= r["memory_bandwidth"] <= 1e12 and 1.4e9 <= r["clock_rate"] <= 1.6e9


@pytest.mark.parametrize("path", PARAMS)
def test_copies_and_sets(nvprof_ws, path):
    src, t = Source(path), tid_of(path, nvprof_ws)
    copies = src.rows("CUPTI_ACTIVITY_KIND_MEMCPY", "copyKind, srcKind, dstKind, bytes, end - start") + \
        src.rows("CUPTI_ACTIVITY_KIND_MEMCPY2", "copyKind, srcKind, dstKind, bytes, end - start")
    got = q(nvprof_ws, "SELECT copy_kind, src_kind, dst_kind, bytes, dur FROM memcpy WHERE trace_id = ?", [t])
    assert Counter(tuple(r.values()) for r in got) == Counter(
        (CUPTI_COPY_KINDS[c], CUPTI_MEM_KINDS[s], CUPTI_MEM_KINDS[d], b, dur) for c, s, d, b, dur in copies)
    sets = src.rows("CUPTI_ACTIVITY_KIND_MEMSET", "memoryKind, bytes, end - start")
    got = q(nvprof_ws, "SELECT mem_kind, bytes, dur FROM memset WHERE trace_id = ?", [t])
    assert Counter(tuple(r.values()) for r in got) == Counter((CUPTI_MEM_KINDS[k], b, d) for k, b, d in sets)


# ------------------------------------------------------------------ the PyTorch NVTX file

def brute_force_ranges(path: Path) -> dict[tuple[int, int], dict]:
    """Ranges of a marker table paired by id, with depth and parent name by the enclosure definition."""
    src = Source(path)
    names = dict(src.all("SELECT _id_, value FROM StringTable"))
    recs = src.all("SELECT flags, timestamp, id, objectId, name FROM CUPTI_ACTIVITY_KIND_MARKER")
    starts = {i: (ts, struct.unpack("<II", bytes(obj[:8])), names[n]) for f, ts, i, obj, n in recs if f == 2}
    ends = {i: (ts, struct.unpack("<II", bytes(obj[:8]))) for f, ts, i, obj, n in recs if f == 4}
    assert len(starts) == len(ends) == sum(1 for r in recs if r[0] == 2)
    ranges = []
    for i, (ts, (pid, tid), name) in starts.items():
        end_ts, end_thread = ends[i]
        assert end_thread == (pid, tid)
        ranges.append((pid, tid, ts, end_ts, name))
    out = {}
    for pid, tid, ts, end_ts, name in ranges:
        enclosing = [r for r in ranges if r[:2] == (pid, tid) and r[2] <= ts and r[3] >= end_ts
                     and (r[2], r[3]) != (ts, end_ts)]
        parent = max(enclosing, key=lambda r: (r[2], -r[3]), default=None)
        key = (tid, ts)
        assert key not in out
        out[key] = {"name": name, "dur": end_ts - ts, "depth": len(enclosing),
                    "parent": None if parent is None else parent[4]}
    return out


def test_pytorch_nvtx_ranges_nest_like_the_brute_force(nvprof_ws):
    path = trace_file(PYTORCH).resolve()
    t = tid_of(path, nvprof_ws)
    expected = brute_force_ranges(path)
    got = q(nvprof_ws, """
        SELECT r.tid, r.ts, r.name, r.dur, r.depth, r.style, p.name AS parent
        FROM nvtx_range r LEFT JOIN nvtx_range p ON p.trace_id = r.trace_id AND p.range_id = r.parent_range_id
        WHERE r.trace_id = ?""", [t])
    assert len(got) == len(expected) == 1195
    assert {r["style"] for r in got} == {"push/pop"}
    assert {(r["tid"], r["ts"]): {"name": r["name"], "dur": r["dur"], "depth": r["depth"], "parent": r["parent"]}
            for r in got} == expected


def test_pytorch_nvtx_ranges_picked_by_hand(nvprof_ws):
    path = trace_file(PYTORCH).resolve()
    t = tid_of(path, nvprof_ws)

    def at(name, ts):
        return one(nvprof_ws, """
            SELECT r.tid, r.depth, p.name AS parent, r.path, r.style
            FROM nvtx_range r LEFT JOIN nvtx_range p ON p.trace_id = r.trace_id AND p.range_id = r.parent_range_id
            WHERE r.trace_id = ? AND r.name = ? AND r.ts = ?""", [t, name, ts])

    backward_thread = 0xD5FFB700  # the autograd engine thread (-704661760 in RUNTIME.threadId)
    # a backward op range inside its autograd Node range, on the backward thread
    assert at("mm, seq = 0", 1583975501728206232) == {
        "tid": backward_thread, "depth": 1, "parent": "MmBackward, seq = 222",
        "path": "MmBackward > mm", "style": "push/pop"}  # paths of grouping names
    # two levels down: ViewBackward > reshape > view
    assert at("view, seq = 0", 1583975501727903582) == {
        "tid": backward_thread, "depth": 2, "parent": "reshape, seq = 0",
        "path": "ViewBackward > reshape > view", "style": "push/pop"}
    # a Node range is a root on its thread
    assert at("NllLossBackward, seq = 228", 1583975501727354776)["depth"] == 0
    # forward: mm inside matmul, seven levels under the apex.pyprof markers on the main thread
    fwd = at("mm, seq = 122", one(nvprof_ws, "SELECT min(ts) AS ts FROM nvtx_range WHERE trace_id = ? "
                                             "AND name = 'mm, seq = 122'", [t]))
    assert (fwd["tid"], fwd["depth"], fwd["parent"]) == (1290573632, 7, "matmul, seq = 121")
    # the path names the PyProf markers by their grouping names ('traceMarker <innermost frame>', 'module.op')
    assert fwd["path"].startswith("traceMarker ") and fwd["path"].endswith(" > Tensor.matmul > matmul > mm")
    assert len(fwd["path"].split(" > ")) == 8


def test_pytorch_kernel_names_match_pyprof(nvprof_ws):
    """The PyProf output committed next to net.sql (oracle/net.dict) names every kernel; its
    short names must match ours exactly. Its long names come from a 2020 cxxfilt that garbles
    three names with nested substitutions (e.g. 'at::cuda::detail<float, at::cuda::detail::TensorInfo>'
    for 'at::cuda::detail::TensorInfo<float, unsigned int>'); all others must match too."""
    from traceql.sources import demangle

    if not demangle.available():
        pytest.skip("no C++ runtime with __cxa_demangle")
    path = trace_file(PYTORCH).resolve()
    oracle = [ast.literal_eval(line) for line in (path.parent / "oracle" / "net.dict").read_text().splitlines()]
    got = q(nvprof_ws, "SELECT short_name, name FROM kernel WHERE trace_id = ?", [tid_of(path, nvprof_ws)])
    assert Counter(r["short_name"] for r in got) == Counter(d["kShortName"] for d in oracle)
    ours, theirs = {r["name"] for r in got}, {d["kLongName"] for d in oracle}
    assert len(ours - theirs) == len(theirs - ours) <= 3
    pointwise = [n for n in ours - theirs if "kernelPointwiseApply3" in n]
    assert pointwise and "at::cuda::detail::TensorInfo<unsigned char, unsigned int>" in pointwise[0]


def test_fallback_reader_reads_the_real_file_the_same(nvprof_ws, tmp_path, monkeypatch):
    path = trace_file(PYTORCH).resolve()
    monkeypatch.setenv("TRACEQL_READER", "sqlite3")
    db = tmp_path / "fallback.duckdb"
    traceql.ingest([path], db=db)
    with traceql.open(db) as ws:
        for view in ("kernel", "api_call", "nvtx_range", "thread", "device", "memcpy"):
            sql = f"SELECT * EXCLUDE (trace_id) FROM {view} WHERE trace_id = ? ORDER BY ALL"
            assert ws.sql(sql, [1]).to_pylist() == q(nvprof_ws, sql, [tid_of(path, nvprof_ws)]), view


# --------------------------------------------------------------------------- the CLI

def cli(*args):
    return served(*args)


def test_cli_on_an_nvprof_workspace(tmp_path):
    src = trace_file(PYTORCH).resolve()
    db = tmp_path / "ws.duckdb"
    proc = cli("--db", str(db), "ingest", str(src))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[1] == ("  kernel 284, memcpy 35, memset 12, api_call 3,439, nvtx_range 1,195, "
                                           "nvtx_mark 0, thread 3, device 1")

    info = cli("--db", str(db), "info")
    assert info.returncode == 0, info.stderr
    assert "(layout nvprof/v12)" in info.stdout and "0 Tesla V100-SXM2-16GB" in info.stdout
    assert "(epoch clock)" in info.stdout

    top = cli("--db", str(db), "sql", "--format", "csv",
              "SELECT short_name, count(*) AS n FROM kernel GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 2")
    assert top.returncode == 0, top.stderr
    # the same counts as PyProf's oracle/lm.csv 'Kernel' column
    assert top.stdout.splitlines() == ["short_name,n", "elementwise_kernel,137", "reduce_kernel,40"]

    out = tmp_path / "out"
    exp = cli("--db", str(db), "export", "--format", "csv", "-o", str(out))
    assert exp.returncode == 0, exp.stderr
    assert (out / "kernel.csv").read_text().count("\n") == 285
    assert (out / "nvtx_range.csv").read_text().count("\n") >= 1196  # names may hold newlines

    rep = cli("--db", str(db), "report", "--by", "range", "--format", "csv", "--match", "MmBackward")
    assert rep.returncode == 0, rep.stderr
    assert rep.stdout.splitlines()[0].startswith("name,instances,")
    assert len(rep.stdout.splitlines()) >= 2
