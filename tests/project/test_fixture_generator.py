"""Tests for fixtures/gen_nsys.py, the synthetic Nsight Systems export generator.

The file contents are checked with plain sqlite3 against the `expected` dict the
generator computes while generating, and the schema against real exports in
../shared/traces, next to the repository (skipped when that folder is absent).
"""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures import extract_nsys_ddl as src
from fixtures.gen_nsys import generate

from ..util import REPO, TRACES

LAYOUTS = ["2", "3"]
PID_MASK = -16777216  # 0xFFFFFFFFFF000000 as a signed 64-bit value


def _connect(path) -> sqlite3.Connection:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    con.text_factory = lambda b: b.decode("utf-8", "replace")
    return con


def _one(con, sql, *args):
    return con.execute(sql, args).fetchone()[0]


@pytest.fixture(scope="module", params=LAYOUTS)
def small(request, tmp_path_factory):
    layout = request.param
    path = tmp_path_factory.mktemp(f"nsys{layout}") / f"small{layout}.sqlite"
    exp = generate(path, layout=layout, kernels=301, seed=7)
    con = _connect(path)
    yield layout, path, exp, con
    con.close()


# ---------------------------------------------------------------------------
# expected dict <-> file
# ---------------------------------------------------------------------------

def test_counts_match_expected(small):
    layout, _, exp, con = small
    assert exp["kernels"] == 301
    q = {
        "kernels": "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL",
        "memcpy": "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY",
        "memcpy_htod": "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind = 1",
        "memcpy_dtoh": "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind = 2",
        "memset": "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMSET",
        "api_calls": "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass <> 67",
        "runtime_rows": "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME",
        "backtrace_rows": "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass = 67",
        "runtime_calls": "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass = 0",
        "driver_calls": "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass = 1",
        "nvtx_ranges": "SELECT count(*) FROM NVTX_EVENTS WHERE eventType IN (59, 60)",
        "pushpop_ranges": "SELECT count(*) FROM NVTX_EVENTS WHERE eventType = 59",
        "startend_ranges": "SELECT count(*) FROM NVTX_EVENTS WHERE eventType = 60",
        "nvtx_marks": "SELECT count(*) FROM NVTX_EVENTS WHERE eventType = 34",
        "nvtx_domain_rows": "SELECT count(*) FROM NVTX_EVENTS WHERE eventType = 75",
        "nvtx_thread_rows": "SELECT count(*) FROM NVTX_EVENTS WHERE eventType = 39",
        "nvtx_rows": "SELECT count(*) FROM NVTX_EVENTS",
        "kernel_dur_sum": 'SELECT sum("end" - start) FROM CUPTI_ACTIVITY_KIND_KERNEL',
        "memcpy_bytes_sum": "SELECT sum(bytes) FROM CUPTI_ACTIVITY_KIND_MEMCPY",
        "memcpy_dur_sum": 'SELECT sum("end" - start) FROM CUPTI_ACTIVITY_KIND_MEMCPY',
        "memset_dur_sum": 'SELECT sum("end" - start) FROM CUPTI_ACTIVITY_KIND_MEMSET',
        "memset_bytes_sum": "SELECT sum(bytes) FROM CUPTI_ACTIVITY_KIND_MEMSET",
        "processes": "SELECT count(*) FROM PROCESSES",
        "devices": "SELECT count(*) FROM TARGET_INFO_GPU",
        "string_ids": "SELECT count(*) FROM StringIds",
        "threads": """SELECT count(DISTINCT globalTid) FROM (
                        SELECT globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME
                        UNION ALL SELECT globalTid FROM NVTX_EVENTS)""",
    }
    got = {k: _one(con, sql) for k, sql in q.items()}
    assert got == {k: exp[k] for k in q}
    assert _one(con, "SELECT count(DISTINCT deviceId) FROM CUPTI_ACTIVITY_KIND_KERNEL") == 2
    assert _one(con, "SELECT count(*) FROM ThreadNames") == exp["threads"]
    assert exp["time_min"] == _one(con, "SELECT min(start) FROM NVTX_EVENTS")
    tmax = max(_one(con, f'SELECT max(coalesce("end", start)) FROM {t}')
               for t in ("NVTX_EVENTS", "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_KERNEL",
                         "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"))
    assert exp["time_max"] == tmax
    assert 5e7 < exp["time_min"] < 2e8  # session-relative, starting around 1e8


def test_names_match_expected(small):
    _, _, exp, con = small
    rows = con.execute("""SELECT s.value, count(*), sum(k."end" - k.start)
                          FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName
                          GROUP BY 1""").fetchall()
    assert {r[0] for r in rows} == exp["kernel_names"]
    assert {r[0]: r[1] for r in rows} == exp["kernel_count_by_name"]
    assert {r[0]: r[2] for r in rows} == exp["kernel_dur_by_name"]
    assert any("<" in n and "," in n for n in exp["kernel_names"])  # C++ templates

    api = dict(con.execute("""SELECT s.value, count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r
                              JOIN StringIds s ON s.id = r.nameId WHERE r.eventClass <> 67
                              GROUP BY 1""").fetchall())
    assert api == exp["api_count_by_name"]

    rng = dict(con.execute("""SELECT coalesce(n.text, s.value), count(*) FROM NVTX_EVENTS n
                              LEFT JOIN StringIds s ON s.id = n.textId
                              WHERE n.eventType IN (59, 60) GROUP BY 1""").fetchall())
    assert rng == exp["nvtx_range_count_by_name"]

    # kernel short/mangled names are valid StringIds references
    assert _one(con, """SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k
                        LEFT JOIN StringIds a ON a.id = k.shortName
                        LEFT JOIN StringIds b ON b.id = k.mangledName
                        WHERE a.id IS NULL OR b.id IS NULL""") == 0
    assert _one(con, "SELECT count(*) FROM StringIds s WHERE s.value LIKE '\\_Z%' ESCAPE '\\'") \
        == len(exp["kernel_names"])


def test_per_process(small):
    _, _, exp, con = small
    kpp = dict(con.execute("""SELECT (globalPid >> 24) & 16777215, count(*)
                              FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY 1""").fetchall())
    assert kpp == exp["kernels_per_process"]
    assert sorted(kpp) == sorted(exp["pids"]) == [4242, 4343]
    assert sum(kpp.values()) == exp["kernels"]
    procs = con.execute("SELECT globalPid, pid FROM PROCESSES ORDER BY pid").fetchall()
    for gpid, pid in procs:
        d = exp["per_process"][pid]
        assert gpid == d["globalPid"] == (1 << 48) | (pid << 24)  # HW 0, VM 1, TID 0
        n_api = _one(con, """SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME
                             WHERE eventClass <> 67 AND (globalTid & ?) = ?""", PID_MASK, gpid)
        assert n_api == d["api_calls"]
        assert _one(con, "SELECT max(correlationId) FROM CUPTI_ACTIVITY_KIND_RUNTIME "
                         "WHERE (globalTid & ?) = ?", PID_MASK, gpid) == d["max_correlation_id"]
        for t, key in (("MEMCPY", "memcpy"), ("MEMSET", "memset")):
            assert _one(con, f"SELECT count(*) FROM CUPTI_ACTIVITY_KIND_{t} WHERE globalPid = ?",
                        gpid) == d[key]
        tids = {r[0] for r in con.execute(
            """SELECT DISTINCT globalTid FROM NVTX_EVENTS WHERE (globalTid & ?) = ?""",
            (PID_MASK, gpid))}
        assert tids == {d["main_globalTid"], d["loader_globalTid"]}
        assert {t & 0xFFFFFF for t in tids} == {d["main_tid"], d["loader_tid"]}
        assert {(t >> 24) & 0xFFFFFF for t in tids} == {pid}
        assert {(t >> 48) & 0xFF for t in tids} == {1}


def test_metadata_and_enums(small):
    layout, _, exp, con = small
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert tables == set(exp["tables"])
    if layout == "3":
        meta = dict(con.execute("SELECT name, value FROM META_DATA_EXPORT"))
        assert "EXPORT_META_DATA" not in tables
        assert meta["EXPORT_PRODUCT_VERSION"] == "2026.1.1.204"
        assert meta["EXPORT_SCHEMA_VERSION"] == exp["schema_version"] == "3.24.14"
        assert (meta["EXPORT_SCHEMA_VERSION_MAJOR"], meta["EXPORT_SCHEMA_VERSION_MINOR"],
                meta["EXPORT_SCHEMA_VERSION_MICRO"]) == ("3", "24", "14")
        for t in ("ENUM_CUDA_MEMCPY_OPER", "ENUM_CUDA_MEM_KIND", "ENUM_CUDA_KERNEL_LAUNCH_TYPE",
                  "ENUM_NSYS_EVENT_TYPE", "ENUM_NSYS_EVENT_CLASS"):
            assert t in tables
        assert con.execute("SELECT label FROM ENUM_CUDA_MEMCPY_OPER WHERE id IN (1, 2) ORDER BY id"
                           ).fetchall() == [("Host-to-Device",), ("Device-to-Host",)]
        assert con.execute("SELECT label FROM ENUM_CUDA_MEM_KIND WHERE id IN (0, 1, 2) ORDER BY id"
                           ).fetchall() == [("Pageable",), ("Pinned",), ("Device",)]
        assert dict(con.execute("SELECT id, name FROM ENUM_NSYS_EVENT_TYPE WHERE id IN "
                                "(34, 39, 59, 60, 75)")) == {
            34: "NvtxMark", 39: "NvtxThread", 59: "NvtxPushPopRange", 60: "NvtxStartEndRange",
            75: "NvtxDomainCreate"}
        assert _one(con, "SELECT label FROM ENUM_NSYS_EVENT_CLASS WHERE id = 67") == "CUDA backtrace"
        assert _one(con, "SELECT systemClockNs FROM TARGET_INFO_SESSION_START_TIME") is not None
    else:
        meta = dict(con.execute("SELECT name, value FROM EXPORT_META_DATA"))
        assert "META_DATA_EXPORT" not in tables
        assert not any(t.startswith("ENUM_") for t in tables)
        assert meta["EXPORT_PRODUCT_VERSION"] == "2022.1.3.3"
        assert meta["EXPORT_SCHEMA_VERSION"] == exp["schema_version"] == "2.9.1"
        assert "EXPORT_OUTUPT_FILE" in meta
    assert meta["EXPORT_PRODUCT_NAME"] == "NVIDIA Nsight Systems"
    assert meta["EXPORT_HOST"] == "fixture-host"
    assert "EXPORT_PLATFORM" in meta and "EXPORT_TIME_UTC" in meta
    gpus = con.execute("SELECT id, name, smCount, memoryBandwidth, clockRate, totalMemory, "
                       "computeMajor, computeMinor, busLocation, uuid, vmId FROM TARGET_INFO_GPU "
                       "ORDER BY id").fetchall()
    assert [g[0] for g in gpus] == [0, 1]
    assert all(v is not None for g in gpus for v in g)
    assert gpus[0][9] != gpus[1][9]
    assert all(g[10] == 1 << 48 for g in gpus)
    assert _one(con, "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME") > 1.6e18
    dur, start, stop = con.execute("SELECT duration, startTime, stopTime FROM ANALYSIS_DETAILS"
                                   ).fetchone()
    assert stop - start == dur and dur > exp["time_max"]


# ---------------------------------------------------------------------------
# correlation semantics
# ---------------------------------------------------------------------------

def test_backtrace_rows_duplicate_class0(small):
    _, _, exp, con = small
    assert exp["backtrace_rows"] > 0
    rows = con.execute("""
        SELECT b.correlationId, b.start, b."end", r.start, r."end", sb.value, sr.value,
               b.callchainId, r.callchainId
        FROM CUPTI_ACTIVITY_KIND_RUNTIME b
        JOIN StringIds sb ON sb.id = b.nameId
        LEFT JOIN CUPTI_ACTIVITY_KIND_RUNTIME r
               ON r.correlationId = b.correlationId AND r.globalTid = b.globalTid
              AND r.eventClass = 0
        LEFT JOIN StringIds sr ON sr.id = r.nameId
        WHERE b.eventClass = 67""").fetchall()
    assert len(rows) == exp["backtrace_rows"]
    for corr, bs, be, rs, re_, bname, rname, bcc, rcc in rows:
        assert rs is not None, f"backtrace row {corr} has no class-0 twin"
        assert bs < rs and be > re_  # slightly wider
        assert rname == "cudaLaunchKernel_v7000" and bname == "cudaLaunchKernel"
        assert bcc is not None and rcc is None
    # a naive join doubles kernels; filtering eventClass restores the count
    naive = _one(con, """SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k
                         JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId
                          AND k.globalPid = (r.globalTid & ?)""", PID_MASK)
    assert naive == exp["kernels"] + exp["backtrace_rows"]


def test_processes_reuse_correlation_ids(small):
    _, _, exp, con = small
    per = {}
    for gpid, corr in con.execute("""SELECT globalTid & ?, correlationId
                                     FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass <> 67""",
                                  (PID_MASK,)):
        per.setdefault(gpid, set()).add(corr)
    assert len(per) == 2
    a, b = per.values()
    assert len(a & b) >= min(len(a), len(b)) - 1  # both sequences start at 1
    assert min(a) == min(b) == 1
    # correlationId alone is ambiguous; with the globalPid mask every GPU op
    # matches exactly one class 0/1 API row of its own process
    for table in ("KERNEL", "MEMCPY", "MEMSET"):
        ambiguous = _one(con, f"""SELECT count(*) FROM CUPTI_ACTIVITY_KIND_{table} g
                                  JOIN CUPTI_ACTIVITY_KIND_RUNTIME r
                                    ON r.correlationId = g.correlationId AND r.eventClass <> 67""")
        assert ambiguous > _one(con, f"SELECT count(*) FROM CUPTI_ACTIVITY_KIND_{table}")
        bad = _one(con, f"""SELECT count(*) FROM CUPTI_ACTIVITY_KIND_{table} g WHERE (
                              SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r
                              WHERE r.correlationId = g.correlationId AND r.eventClass IN (0, 1)
                                AND (r.globalTid & ?) = g.globalPid
                                AND r.start < g.start) <> 1""", PID_MASK)
        assert bad == 0, f"{table}: GPU rows without exactly one earlier launching API row"
    # (globalPid, correlationId) is unique across GPU tables
    dup = _one(con, """SELECT count(*) FROM (
                         SELECT globalPid, correlationId FROM (
                           SELECT globalPid, correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL
                           UNION ALL SELECT globalPid, correlationId FROM CUPTI_ACTIVITY_KIND_MEMCPY
                           UNION ALL SELECT globalPid, correlationId FROM CUPTI_ACTIVITY_KIND_MEMSET)
                         GROUP BY 1, 2 HAVING count(*) > 1)""")
    assert dup == 0


def test_gpu_timing_and_streams(small):
    _, _, exp, con = small
    assert _one(con, 'SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE "end" <= start') == 0
    streams = con.execute("""SELECT globalPid, count(DISTINCT streamId)
                             FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY 1""").fetchall()
    assert [s[1] for s in streams] == [2, 2]
    # some kernels overlap on one device (two streams)
    overlaps = _one(con, """SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL a
                            JOIN CUPTI_ACTIVITY_KIND_KERNEL b
                              ON a.deviceId = b.deviceId AND a.streamId < b.streamId
                             AND a.start < b."end" AND b.start < a."end" """)
    assert overlaps > 0
    # kernels on the same stream never overlap
    assert _one(con, """SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL a
                        JOIN CUPTI_ACTIVITY_KIND_KERNEL b
                          ON a.globalPid = b.globalPid AND a.streamId = b.streamId
                         AND a.rowid < b.rowid AND a.start < b."end" AND b.start < a."end" """) == 0
    kinds = set(con.execute("SELECT copyKind, srcKind, dstKind FROM CUPTI_ACTIVITY_KIND_MEMCPY"))
    assert kinds == {(1, 0, 2), (1, 1, 2), (2, 2, 0)}


def test_nvtx_structure(small):
    _, _, exp, con = small
    # text xor textId on every range/mark
    assert _one(con, """SELECT count(*) FROM NVTX_EVENTS WHERE eventType IN (34, 59, 60)
                        AND (text IS NULL) = (textId IS NULL)""") == 0
    assert _one(con, "SELECT count(*) FROM NVTX_EVENTS WHERE eventType = 59 AND text IS NOT NULL") > 0
    assert _one(con, "SELECT count(*) FROM NVTX_EVENTS WHERE eventType = 59 AND textId IS NOT NULL") > 0
    dom = con.execute("""SELECT DISTINCT text, domainId, "end" FROM NVTX_EVENTS
                         WHERE eventType = 75""").fetchall()
    assert dom == [("fixture.domain", 1, None)]
    assert exp["domains"] == {1: "fixture.domain"}
    assert _one(con, "SELECT count(*) FROM NVTX_EVENTS WHERE eventType = 59 AND domainId = 1") > 0
    assert _one(con, """SELECT count(*) FROM NVTX_EVENTS WHERE eventType IN (34, 39, 75)
                        AND "end" IS NOT NULL""") == 0
    # start/end ranges: one per process on the loader thread, enclosing that thread's API calls
    se = con.execute("""SELECT globalTid, start, "end", rangeId, endGlobalTid FROM NVTX_EVENTS
                        WHERE eventType = 60""").fetchall()
    assert len(se) == 2
    for tid, s, e, rid, etid in se:
        assert rid == 1 and etid is None
        assert (tid & 0xFFFFFF) in {d["loader_tid"] for d in exp["per_process"].values()}
        assert _one(con, """SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME
                            WHERE globalTid = ? AND (start < ? OR "end" > ?)""", tid, s, e) == 0
    # nesting depth: push/pop ranges per thread are properly nested
    maxd = 0
    for (tid,) in con.execute("SELECT DISTINCT globalTid FROM NVTX_EVENTS WHERE eventType = 59"):
        stack: list[int] = []
        for s, e in con.execute("""SELECT start, "end" FROM NVTX_EVENTS
                                   WHERE eventType = 59 AND globalTid = ?
                                   ORDER BY start, "end" DESC""", (tid,)):
            while stack and stack[-1] <= s:
                stack.pop()
            assert not stack or e <= stack[-1], "push/pop ranges must nest"
            stack.append(e)
            maxd = max(maxd, len(stack))
    assert maxd == exp["max_nvtx_depth"] == 3
    # every kernel-launch API call lies inside a train_step range of its thread
    outside = _one(con, """SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r
                           JOIN StringIds s ON s.id = r.nameId
                           WHERE s.value IN ('cudaLaunchKernel_v7000', 'cuLaunchKernel')
                             AND NOT EXISTS (SELECT 1 FROM NVTX_EVENTS n
                               WHERE n.eventType = 59 AND n.text = 'train_step'
                                 AND n.globalTid = r.globalTid
                                 AND n.start <= r.start AND n."end" >= r."end")""")
    assert outside == 0


# ---------------------------------------------------------------------------
# schema fidelity against real exports
# ---------------------------------------------------------------------------

NON_NSYS_COLUMNS = {"name", "cuda_name", "kernel_name", "long_kernel_name"}


def _real_table_info(path: Path, table: str):
    con = _connect(path)
    try:
        if con.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?",
                       (table,)).fetchone() is None:
            return None
        info = [tuple(r[1:6]) for r in con.execute(f"PRAGMA table_info({table})")]
    finally:
        con.close()
    if table.startswith("CUPTI_ACTIVITY_KIND_"):
        info = [c for c in info if c[0] not in NON_NSYS_COLUMNS]  # pipit / DLProf additions
    return info


REAL_FILES = {
    "3": [src.MOCK_3_24_14, src.CS336_3_17_2],
    "2": [src.PIPIT_2_9_1, src.DLPROF_2_9_1],
}


@pytest.mark.skipif(not TRACES.is_dir(), reason=f"real nsys exports not available at {TRACES}")
def test_ddl_matches_real_exports(small):
    layout, _, exp, con = small
    primary = dict(src.SOURCES[layout])
    checked = 0
    for table in exp["tables"]:
        ours = [tuple(r[1:6]) for r in con.execute(f"PRAGMA table_info({table})")]
        # the file the DDL was taken from must match exactly (names, types, NOT NULL, PK)
        ref = _real_table_info(TRACES / primary[table], table)
        assert ref is not None, f"{table} missing from {primary[table]}"
        assert ours == ref, f"{table} differs from {primary[table]}"
        real_sql = src.read_ddl(TRACES / primary[table], table)
        assert _one(con, "SELECT sql FROM sqlite_master WHERE name = ?", table) == real_sql
        checked += 1
        if layout == "2":
            # both 2.9.1 files agree once tool-added columns are dropped
            for f in REAL_FILES["2"]:
                assert _real_table_info(TRACES / f, table) in (None, ours), (table, f)
    assert checked == len(exp["tables"])
    if layout == "3":
        # 3.24.14 columns that 3.17.2 lacks really are the documented additions
        k = {r[1] for r in con.execute("PRAGMA table_info(CUPTI_ACTIVITY_KIND_KERNEL)")}
        old = {c[0] for c in _real_table_info(TRACES / src.CS336_3_17_2,
                                              "CUPTI_ACTIVITY_KIND_KERNEL")}
        assert k - old == {"qmdBulkReleaseDone", "qmdPreexitDone", "qmdLastCtaDone", "graphId",
                           "clusterX", "clusterY", "clusterZ", "clusterSchedulingPolicy",
                           "maxPotentialClusterSize", "maxActiveClusters",
                           "sharedMemoryRequestedPercentage"}


def test_layout_column_differences(tmp_path):
    cols = {}
    for layout in LAYOUTS:
        p = tmp_path / f"l{layout}.sqlite"
        generate(p, layout=layout, kernels=10)
        con = _connect(p)
        cols[layout] = {t: [r[1] for r in con.execute(f"PRAGMA table_info({t})")]
                        for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        con.close()
    assert "greenContextId" in cols["3"]["CUPTI_ACTIVITY_KIND_KERNEL"]
    assert "greenContextId" not in cols["2"]["CUPTI_ACTIVITY_KIND_KERNEL"]
    assert "binaryData" in cols["3"]["NVTX_EVENTS"] and "binaryData" not in cols["2"]["NVTX_EVENTS"]
    assert "copyCount" in cols["3"]["CUPTI_ACTIVITY_KIND_MEMCPY"]
    assert "copyCount" not in cols["2"]["CUPTI_ACTIVITY_KIND_MEMCPY"]
    for layout in LAYOUTS:
        assert len(cols[layout]["TARGET_INFO_GPU"]) == 41
        assert "name" not in cols[layout]["CUPTI_ACTIVITY_KIND_RUNTIME"]
        assert "kernel_name" not in cols[layout]["CUPTI_ACTIVITY_KIND_KERNEL"]


# ---------------------------------------------------------------------------
# scaling options, determinism, CLI
# ---------------------------------------------------------------------------

def _digest(path) -> str:
    con = _connect(path)
    h = hashlib.sha256()
    for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name"):
        for row in con.execute(f"SELECT * FROM {t} ORDER BY rowid"):
            h.update(repr(row).encode())
    con.close()
    return h.hexdigest()


def test_deterministic(tmp_path):
    a = generate(tmp_path / "a.sqlite", kernels=57, seed=3)
    b = generate(tmp_path / "b.sqlite", kernels=57, seed=3)
    c = generate(tmp_path / "c.sqlite", kernels=57, seed=4)
    assert a == b
    assert _digest(tmp_path / "a.sqlite") == _digest(tmp_path / "b.sqlite")
    assert a["kernel_dur_sum"] != c["kernel_dur_sum"]
    assert _digest(tmp_path / "a.sqlite") != _digest(tmp_path / "c.sqlite")


@pytest.mark.parametrize("n", [0, 1, 13, 1000])
def test_exact_kernel_count(tmp_path, n):
    exp = generate(tmp_path / "k.sqlite", layout="2", kernels=n, seed=1)
    con = _connect(tmp_path / "k.sqlite")
    assert _one(con, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL") == n == exp["kernels"]
    assert sum(exp["kernels_per_process"].values()) == n
    assert _one(con, "SELECT count(*) FROM NVTX_EVENTS WHERE eventType IN (59, 60)") \
        == exp["nvtx_ranges"]
    con.close()


def test_scaling_options(tmp_path):
    base = generate(tmp_path / "base.sqlite", kernels=800, seed=2)
    assert 1.4 <= base["api_calls"] / 800 <= 1.8
    exp = generate(tmp_path / "big.sqlite", kernels=800, seed=2, nvtx_per_kernel=8,
                   api_per_kernel=3.5)
    assert exp["kernels"] == 800
    assert abs(exp["nvtx_ranges"] / 800 - 8) < 0.1
    assert abs(exp["api_calls"] / 800 - 3.5) < 0.1
    con = _connect(tmp_path / "big.sqlite")
    assert _one(con, "SELECT count(*) FROM NVTX_EVENTS WHERE eventType IN (59, 60)") \
        == exp["nvtx_ranges"]
    assert _one(con, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass <> 67") \
        == exp["api_calls"]
    assert _one(con, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL") == 800
    assert exp["max_nvtx_depth"] == 3
    con.close()


def test_refuses_overwrite(tmp_path):
    p = tmp_path / "x.sqlite"
    generate(p, kernels=5)
    with pytest.raises(FileExistsError):
        generate(p, kernels=5)
    assert generate(p, kernels=7, force=True)["kernels"] == 7


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "fixtures.gen_nsys", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=120)


def test_cli(tmp_path):
    out = tmp_path / "cli.sqlite"
    r = _cli("--layout", "3", "--kernels", "40", "-o", str(out), "--seed", "5",
             "--expected-json", str(tmp_path / "exp.json"))
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""
    assert len(r.stderr.splitlines()) <= 1
    assert out.exists() and (tmp_path / "exp.json").exists()
    con = _connect(out)
    assert _one(con, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL") == 40
    con.close()
    before = out.stat().st_mtime_ns
    r = _cli("--layout", "3", "--kernels", "41", "-o", str(out))
    assert r.returncode != 0 and r.stdout == "" and "exists" in r.stderr
    assert out.stat().st_mtime_ns == before
    r = _cli("--layout", "2", "--kernels", "41", "-o", str(out), "--force", "-q")
    assert r.returncode == 0 and r.stdout == "" and r.stderr == ""
    con = _connect(out)
    assert _one(con, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL") == 41
    assert _one(con, "SELECT value FROM EXPORT_META_DATA WHERE name = 'EXPORT_SCHEMA_VERSION'") \
        == "2.9.1"
    con.close()


def test_rows_sorted_by_start(small):
    _, _, _, con = small
    for t in ("NVTX_EVENTS", "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_KERNEL",
              "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
        starts = [r[0] for r in con.execute(f"SELECT start FROM {t} ORDER BY rowid")]
        assert starts == sorted(starts), f"{t} is not in start order"


def test_expected_json(tmp_path):
    import json
    out, js = tmp_path / "j.sqlite", tmp_path / "j.json"
    r = _cli("--kernels", "25", "-o", str(out), "--expected-json", str(js), "-q")
    assert r.returncode == 0 and r.stderr == ""
    data = json.loads(js.read_text())
    direct = generate(tmp_path / "d.sqlite", kernels=25)
    assert data["kernels"] == 25 and data["api_calls"] == direct["api_calls"]
    assert data["kernel_names"] == sorted(direct["kernel_names"])
    assert data["kernels_per_process"] == {"4242": 13, "4343": 12}
