"""The report library on real traces, checked against independent computations.

Three Nsight Systems exports and one nvprof database from ../shared/traces (third-party
files, not part of the repository) are ingested into one workspace. The kernel, api and
memcpy reports (totals, counts, minima, maxima per group) are compared with numbers
computed here straight from the source files with Python's sqlite3, without any of
traceql's SQL. One more export has first-party `nsys stats` output next to it
(oracle/nsys-log.txt): there the averages, medians, standard deviations and Time(%) must
agree with NVIDIA's own numbers too.
"""

from __future__ import annotations

import re
import sqlite3
from collections import Counter, defaultdict
from pathlib import Path

import pytest

import traceql

from ..intervals import union_length
from ..util import TRACES, trace_file

NSYS = [
    "nsysai-h100-2gpu-pytorch-nsys2026.2/h100_2gpu_1s.sqlite",
    "cs336-jsun-train-fwdbwd-rtx3070ti-nsys2025.1/result.sqlite",
    "kmeans-rtx3080-old-nsys/report2.sqlite",
]
NVPROF = "nvprof-gpuml-titanv/timeline.nvvp"
ORACLE = "nvfuser-8xh100-nsys2024.6/report1.sqlite"

# Enum values written out here, independently of schemas/.
NSYS_COPY_KINDS = {1: "Host-to-Device", 2: "Device-to-Host", 8: "Device-to-Device", 10: "Peer-to-Peer"}
CUPTI_COPY_KINDS = {1: "Host-to-Device", 2: "Device-to-Host", 3: "Host-to-Array", 4: "Array-to-Host",
                    8: "Device-to-Device", 10: "Peer-to-Peer"}
BACKTRACE_CLASS = 67
VERSION_SUFFIX = re.compile(r"_v\d+$")


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    """The workspace and {relative path: trace_id}."""
    paths = [trace_file(p) for p in NSYS + [ORACLE, NVPROF]]
    db = tmp_path_factory.mktemp("reports_real") / "ws.duckdb"
    ids = {}
    # one ingest per format: each call is its own transaction
    for group in (paths[:-1], paths[-1:]):
        for r in traceql.ingest(group, db=db):
            ids[str(Path(r.path).resolve().relative_to(TRACES.resolve()))] = r.trace_id
    w = traceql.open(db)
    yield w, ids
    w.close()


def source(rel: str) -> sqlite3.Connection:
    con = sqlite3.connect(f"file:{TRACES / rel}?mode=ro", uri=True)
    con.text_factory = lambda b: b.decode("utf-8", "replace")
    return con


def tables(con) -> set[str]:
    return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def stats(rows) -> dict:
    """{key: (count, total, min, max)} from (key, duration) pairs."""
    out: dict = defaultdict(lambda: [0, 0, None, None])
    for key, d in rows:
        s = out[key]
        s[0] += 1
        s[1] += d
        s[2] = d if s[2] is None else min(s[2], d)
        s[3] = d if s[3] is None else max(s[3], d)
    return {k: tuple(v) for k, v in out.items()}


def report_stats(table, key="name") -> dict:
    return {r[key]: (r["calls"], r["total_ns"], r["min_ns"], r["max_ns"]) for r in table.to_pylist()}


def diff(expected: dict, got: dict, limit=5) -> str:
    keys = sorted({k for k in set(expected) | set(got) if expected.get(k) != got.get(k)}, key=repr)
    return "; ".join(f"{k!r}: source {expected.get(k)}, traceql {got.get(k)}" for k in keys[:limit]) \
        + (f" (+{len(keys) - limit} more)" if len(keys) > limit else "")


def check_pct(table, column="pct"):
    pcts = table.column(column).to_pylist()
    assert abs(sum(pcts) - 100.0) < 1e-6, sum(pcts)


# ---------------------------------------------------------------------- Nsight Systems

@pytest.mark.parametrize("rel", NSYS)
def test_nsys_kernel_report(ws, rel):
    w, ids = ws
    con = source(rel)
    strings = dict(con.execute("SELECT id, value FROM StringIds"))
    rows = con.execute('SELECT demangledName, "end" - start FROM CUPTI_ACTIVITY_KIND_KERNEL').fetchall()
    assert rows and all(n in strings for n, _ in rows), f"{rel}: every kernel name resolves"
    expected = stats((strings[n], d) for n, d in rows)
    got = w.report("kernel", trace_id=ids[rel])
    assert report_stats(got) == expected, diff(expected, report_stats(got))
    check_pct(got)
    # grouping by grid and block splits the rows, never the sums
    dims = w.report("kernel", trace_id=ids[rel], with_dims=True)
    assert sum(dims.column("calls").to_pylist()) == len(rows)
    assert sum(dims.column("total_ns").to_pylist()) == sum(d for _, d in rows)
    assert dims.num_rows >= got.num_rows


@pytest.mark.parametrize("rel", NSYS)
def test_nsys_api_report(ws, rel):
    w, ids = ws
    con = source(rel)
    strings = dict(con.execute("SELECT id, value FROM StringIds"))
    rows = con.execute('SELECT nameId, "end" - start FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass <> ?',
                       [BACKTRACE_CLASS]).fetchall()
    assert rows
    expected = stats((VERSION_SUFFIX.sub("", strings[n]), d) for n, d in rows)
    got = w.report("api", trace_id=ids[rel])
    assert report_stats(got) == expected, diff(expected, report_stats(got))
    check_pct(got)


@pytest.mark.parametrize("rel", NSYS)
def test_nsys_memcpy_report(ws, rel):
    w, ids = ws
    con = source(rel)
    rows = con.execute('SELECT copyKind, "end" - start, bytes FROM CUPTI_ACTIVITY_KIND_MEMCPY').fetchall()
    assert rows
    expected = stats((NSYS_COPY_KINDS[k], d) for k, d, _ in rows)
    got = w.report("memcpy", trace_id=ids[rel])
    assert report_stats(got, "kind") == expected, diff(expected, report_stats(got, "kind"))
    by_kind = defaultdict(int)
    for k, _, b in rows:
        by_kind[NSYS_COPY_KINDS[k]] += b
    for r in got.to_pylist():
        assert r["total_bytes"] == by_kind[r["kind"]]
        assert r["gb_per_s"] == pytest.approx(r["total_bytes"] / r["total_ns"])
    check_pct(got)


@pytest.mark.parametrize("rel", NSYS)
def test_nsys_device_busy_and_gpu_report(ws, rel):
    """Busy time per GPU is the union of its kernel, copy and memset intervals."""
    w, ids = ws
    con = source(rel)
    ops = []
    for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
        if t in tables(con):
            ops += con.execute(f'SELECT deviceId, start, "end" FROM {t}').fetchall()
    per_device = defaultdict(list)
    for dev, s, e in ops:
        per_device[dev].append((s, e))
    expected = {dev: union_length(iv) for dev, iv in per_device.items()}
    got = w.report("device", trace_id=ids[rel])
    assert {r["device_id"]: r["busy_ns"] for r in got.to_pylist()} == expected
    assert {r["device_id"]: r["calls"] for r in got.to_pylist()} == {d: len(iv) for d, iv in per_device.items()}
    busy = {r["device_id"]: r["busy_ns"] for r in w.query("_internal/gpu_busy", trace_id=ids[rel]).to_pylist()}
    assert {d: b for d, b in busy.items() if d in expected} == expected
    stored = w.sql("SELECT device_id, ops, busy_ns FROM device_busy WHERE trace_id = $t", {"t": ids[rel]})
    assert {r["device_id"]: (r["ops"], r["busy_ns"]) for r in stored.to_pylist()} == \
        {d: (len(per_device[d]), b) for d, b in expected.items()}
    # the GPU activities of the summary: every operation once, shares of their summed time
    gpu = w.report("gpu", trace_id=ids[rel])
    assert sum(gpu.column("calls").to_pylist()) == len(ops)
    assert sum(gpu.column("total_ns").to_pylist()) == sum(e - s for _, s, e in ops)
    check_pct(gpu)


@pytest.mark.parametrize("rel", NSYS)
def test_nsys_launch_report(ws, rel):
    w, ids = ws
    con = source(rel)
    strings = dict(con.execute("SELECT id, value FROM StringIds"))
    launch = {r["name"]: r for r in w.report("launch", trace_id=ids[rel]).to_pylist()}
    # kernel time per name as the kernel report has it; launched kernels found by
    # correlation id and process (the launching call's globalTid without its thread bits)
    kernels = con.execute('SELECT demangledName, "end" - start, correlationId, globalPid, start '
                          'FROM CUPTI_ACTIVITY_KIND_KERNEL').fetchall()
    calls = {(c, g & ~0xFFFFFF): (s, e) for c, g, s, e in con.execute(
        'SELECT correlationId, globalTid, start, "end" FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass <> ?',
        [BACKTRACE_CLASS])}
    found = Counter(strings[n] for n, _, c, g, _ in kernels if (c, g) in calls)
    queued = Counter(strings[n] for n, _, c, g, ks in kernels if (c, g) in calls and ks >= calls[(c, g)][1])
    totals = Counter()
    for n, d, *_ in kernels:
        totals[strings[n]] += d
    assert {n: r["kernel_total_ns"] for n, r in launch.items()} == dict(totals)
    assert {n: r["launched"] for n, r in launch.items() if r["launched"]} == dict(found)
    assert {n: r["queued"] for n, r in launch.items() if r["queued"]} == dict(queued)


# ------------------------------------------------------------------------------ nvprof

def test_nvprof_kernel_api_memcpy_reports(ws):
    w, ids = ws
    con = source(NVPROF)
    t = ids[NVPROF]
    have = tables(con)

    # kernels: CONCURRENT_KERNEL and KERNEL; the source holds mangled names (traceql
    # demangles them), so compare the per-name statistics as a multiset, and the totals
    kernels = []
    for table in ("CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL", "CUPTI_ACTIVITY_KIND_KERNEL"):
        if table in have:
            kernels += con.execute(f"SELECT name, end - start FROM {table}").fetchall()
    assert kernels
    got = w.report("kernel", trace_id=t)
    assert Counter(report_stats(got).values()) == Counter(stats(kernels).values())
    assert sum(got.column("calls").to_pylist()) == len(kernels)
    check_pct(got)

    # API calls: RUNTIME and DRIVER by callback id, merged by name through the
    # workspace's (api_kind, raw_name) of each call
    calls = [("runtime", cbid, d) for cbid, d in con.execute(
        "SELECT cbid, end - start FROM CUPTI_ACTIVITY_KIND_RUNTIME")]
    calls += [("driver", cbid, d) for cbid, d in con.execute(
        "SELECT cbid, end - start FROM CUPTI_ACTIVITY_KIND_DRIVER")]
    by_cbid = stats(((kind, cbid), d) for kind, cbid, d in calls)
    got = w.report("api", trace_id=t)
    assert sum(got.column("calls").to_pylist()) == len(calls)
    assert sum(got.column("total_ns").to_pylist()) == sum(d for *_, d in calls)
    assert min(got.column("min_ns").to_pylist()) == min(d for *_, d in calls)
    assert max(got.column("max_ns").to_pylist()) == max(d for *_, d in calls)
    # each name is one callback id here, so the groups match one to one
    assert Counter(report_stats(got).values()) == Counter(by_cbid.values())
    check_pct(got)

    # copies: MEMCPY and MEMCPY2 by CUPTI copy kind
    copies = []
    for table in ("CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMCPY2"):
        if table in have:
            copies += con.execute(f"SELECT copyKind, end - start FROM {table}").fetchall()
    assert copies
    expected = stats((CUPTI_COPY_KINDS[k], d) for k, d in copies)
    got = w.report("memcpy", trace_id=t)
    assert report_stats(got, "kind") == expected, diff(expected, report_stats(got, "kind"))


# ------------------------------------------------------------- first-party nsys stats

def oracle_tables(text: str) -> dict[str, list[list[str]]]:
    """The rows of each `nsys stats` report in a console log: {report: [[cell, ...], ...]}."""
    out, current, rows = {}, None, None
    for line in text.splitlines():
        m = re.match(r"\[\d+/\d+\] Executing '(\w+)' stats report", line)
        if m:
            current, rows = m.group(1), []
            out[current] = rows
        elif current and re.match(r"\s+\d+\.\d\s+\d+", line):
            rows.append(line.split(None, 8))
    return out


def test_stats_agree_with_nsys_stats_output(ws):
    """Avg, median, stddev (sample) and Time(%) as NVIDIA's own `nsys stats` printed them."""
    w, ids = ws
    log = trace_file("nvfuser-8xh100-nsys2024.6/oracle/nsys-log.txt").read_text(errors="replace")
    want = oracle_tables(log)
    t = ids[ORACLE]

    def as_cells(r):
        return [f"{r['pct']:.1f}", str(r["total_ns"]), str(r["calls"]), f"{r['avg_ns']:.1f}", f"{r['med_ns']:.1f}",
                str(r["min_ns"]), str(r["max_ns"]), f"{r['stddev_ns']:.1f}"]

    def strip(name):  # nsys strips one 4-digit suffix, traceql one suffix: compare without any
        while VERSION_SUFFIX.search(name):
            name = VERSION_SUFFIX.sub("", name)
        return name

    api = w.report("api", trace_id=t).to_pylist()
    assert sorted((strip(r[8]), r[:8]) for r in want["cuda_api_sum"]) == \
        sorted((strip(r["name"]), as_cells(r)) for r in api)

    # kernel names are cut at 100 characters there ('…'); the rows are in the same order
    kernels = w.report("kernel", trace_id=t).to_pylist()
    assert len(kernels) == len(want["cuda_gpu_kern_sum"])
    for mine, theirs in zip(kernels, want["cuda_gpu_kern_sum"]):
        assert as_cells(mine) == theirs[:8]
        assert mine["name"].startswith(theirs[8].rstrip("…"))

    mem = w.report("gpu", trace_id=t, where="op_kind <> 'kernel'").to_pylist()
    assert sorted((r["name"], as_cells(r)) for r in mem) == \
        sorted((r[8], r[:8]) for r in want["cuda_gpu_mem_time_sum"])
