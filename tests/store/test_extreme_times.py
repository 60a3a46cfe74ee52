"""Timestamps near the limits and other extreme integers in nsys SQLite and Kineto JSON inputs
(issue 37): ingest and the reports give exact results or one clear error line, never a wrong or
blank number, never an internal error and never an error labelled "SQL:" for traceql's own SQL.
The inputs are written here (self-made exports: a one-table nsys stub, a minimal Kineto file);
every expected figure is computed in Python from the values written.

The rule (docs/errors.md, "Times and durations"): every ts, ts + dur and UTC time of a trace lies
within +-2**62 ns (exclusive) and its durations, as absolute values, add up to less than 2**62 ns;
a file outside it is refused at ingest (exit 3, one line naming the file and the value). Within it
every report and rule computes exactly, up to the edges."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import pytest

import traceql

from ..util import nsys_stub
from ..util import cli as served

M = 2 ** 63
L = 2 ** 62  # the limit of times and of one trace's summed durations (traceql.core.settings.TIME_LIMIT_NS)


def _beyond(src: Path, what: str) -> str:
    """The one line ingest prints for a time beyond the limit."""
    return (f"traceql: error: {src}: {what} ns is beyond traceql's time limit of +-2**62 ns "
            f"(+-4611686018427387904: headroom for 64-bit arithmetic, see docs/errors.md)\n")


def _sum_beyond(src: Path, total: int) -> str:
    return (f"traceql: error: {src}: its durations add up to {total} ns (abs(dur), every table), beyond traceql's "
            "limit of 2**62 ns (4611686018427387904) for one trace (headroom for 64-bit sums, see docs/errors.md)\n")


def _refused(db: Path, src: Path, expected: str) -> None:
    """Ingest of SRC into DB: exit 3, exactly EXPECTED on stderr, nothing on stdout, no workspace."""
    proc = _ingest(db, src)
    assert (proc.returncode, proc.stderr, proc.stdout) == (3, expected, "")
    assert not db.exists()


def _nsys(path: Path, kernels: list[tuple[int, int]]) -> Path:
    """The nsys stub with KERNELS (start, end) on device 0, stream 7."""
    nsys_stub(path)
    con = sqlite3.connect(path)
    con.execute("DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL")
    con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, 0, 1, 7, ?, 281546145660928, 1, 2)",
                    [(s, e, i + 5) for i, (s, e) in enumerate(kernels)])
    con.commit()
    con.close()
    return path


def _kineto(path: Path, base: int | None, kernels: list[tuple]) -> Path:
    """A Kineto trace of KERNELS (ts, dur in microseconds, as the profiler writes them)."""
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "G", "totalGlobalMem": 1}],
           "traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": ts, "dur": dur,
                            "args": {"device": 0, "stream": 7, "correlation": i + 1}}
                           for i, (ts, dur) in enumerate(kernels)]}
    if base is not None:
        doc["baseTimeNanoseconds"] = base
    path.write_text(json.dumps(doc))
    return path


def _ingest(db: Path, src: Path) -> subprocess.CompletedProcess:
    return served("--db", db, "ingest", src, timeout=300)


def _check_exact(db: Path, durs: list[int], starts: list[int]) -> None:
    """report --by kernel and --by gpu, summary, analyze and info over DB: the kernel totals
    exactly the sum of DURS, the kernel table exactly STARTS and DURS, nothing raises."""
    with traceql.open(db) as ws:
        rows = ws.report("kernel").to_pylist()
        assert [(r["calls"], r["total_ns"], r["min_ns"], r["max_ns"]) for r in rows] == [
            (len(durs), sum(durs), min(durs), max(durs))]
        assert [(r["calls"], r["total_ns"]) for r in ws.report("gpu").to_pylist()] == [(len(durs), sum(durs))]
        assert ws.sql("SELECT ts AS start, dur FROM kernel ORDER BY ts, dur").to_pylist() == [
            {"start": s, "dur": d} for s, d in sorted(zip(starts, durs))]
        ws.summary()
        ws.analyze()
        assert ws.info()[0]["counts"]["kernel"] == len(durs)


NSYS_EXACT = {  # name: kernels (start, end) in ns, each within the limit
    "top": [(L - 1000, L - 1)],
    "bottom": [(-L + 1, -L + 500)],
    "top_two": [(L - 5000, L - 4000), (L - 3000, L - 1)],  # their midpoint, their sum: within 64 bits
    "zero_and_top": [(0, 10), (L - 20, L - 1)],
    "widest": [(-L + 1, -L + 10), (L - 10, L - 1)],  # a span of 2**63 - 2 ns, cut into chunks by analyze
    "sum_below": [(0, 2 ** 61), (0, 2 ** 61 - 1)],  # durations adding up to 2**62 - 1
}


@pytest.mark.parametrize("case", sorted(NSYS_EXACT))
def test_nsys_times_within_the_limit_are_exact(tmp_path, case):
    kernels = NSYS_EXACT[case]
    src, db = _nsys(tmp_path / "x.sqlite", kernels), tmp_path / "ws.duckdb"
    proc = _ingest(db, src)
    assert proc.returncode == 0, proc.stderr
    _check_exact(db, [e - s for s, e in kernels], [s for s, _ in kernels])


NSYS_REFUSED = {  # name: (kernels (start, end) in ns, what the error names)
    "end_at_limit": ([(L - 10, L)], f"kernel.ts + dur = {L}"),
    "start_at_minus_limit": ([(-L, -L + 500)], f"kernel.ts = {-L}"),
    "end_at_int64_max": ([(M - 1000, M - 1)], f"kernel.ts + dur = {M - 1}"),
    "two_near_int64_max": ([(M - 5000, M - 4000), (M - 3000, M - 1)], f"kernel.ts + dur = {M - 1}"),
    "span_over_2_63": ([(-M, -M + 10), (M - 10, M - 1)], f"kernel.ts = {-M}"),  # furthest out first
    "sum_2_62": ([(0, 2 ** 61), (0, 2 ** 61)], None),  # each within, their sum not
    "sum_of_three_over_2_63": ([(0, 2 ** 61 + 1)] * 3, None),
}


@pytest.mark.parametrize("case", sorted(NSYS_REFUSED))
def test_nsys_times_beyond_the_limit_are_refused(tmp_path, case):
    """Exit 3, one line naming the file and the value; no workspace. Before the limit, two kernels
    near 2**63 ingested and then failed summary and analyze with 'SQL: Out of Range Error', and a
    sum past 2**63 was printed as an empty total_ns."""
    kernels, what = NSYS_REFUSED[case]
    src, db = _nsys(tmp_path / "x.sqlite", kernels), tmp_path / "ws.duckdb"
    expected = _beyond(src, what) if what else _sum_beyond(src, sum(e - s for s, e in kernels))
    _refused(db, src, expected)


@pytest.mark.parametrize("kernels", [[(-M, M - 1)], [(-1, M - 1)]], ids=["one_kernel_over_2_63", "duration_2_63"])
def test_nsys_duration_beyond_bigint_is_one_error(tmp_path, kernels):
    """A duration that does not fit in 64 bits at all: refused while it is read (DuckDB's reason)."""
    src, db = _nsys(tmp_path / "x.sqlite", kernels), tmp_path / "ws.duckdb"
    proc = _ingest(db, src)
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith(f"traceql: error: {src}: holds values traceql "
                                                                   "cannot store (Out of Range Error")
    assert not db.exists()


KINETO_EXACT = {  # name: (baseTimeNanoseconds, kernels (ts, dur) in microseconds)
    "top": (None, [(L // 1000 - 1, 1)]),               # ts * 1000 + dur = 2**62 - 904 ns
    "bottom": (None, [(-(L // 1000), 1)]),
    "base_near_top": (L - 10_000, [(1, 2), (3, 4)]),  # base + 7 us stays below 2**62
    "fractions": (None, [(L // 1000 - 2, 0.001), (L // 1000 - 3, 1.5)]),
}


@pytest.mark.parametrize("case", sorted(KINETO_EXACT))
def test_kineto_times_within_the_limit_are_exact(tmp_path, case):
    base, kernels = KINETO_EXACT[case]
    src, db = _kineto(tmp_path / "x.json", base, kernels), tmp_path / "ws.duckdb"
    proc = _ingest(db, src)
    assert proc.returncode == 0, proc.stderr
    ns = [round(d * 1000) for _, d in kernels]
    starts = [ts * 1000 for ts, _ in kernels]  # kernel.ts is on the trace clock: baseTimeNanoseconds aside
    _check_exact(db, ns, starts)


def test_kineto_ts_beyond_bigint_is_one_error(tmp_path):
    src, db = _kineto(tmp_path / "x.json", None, [(M // 1000 + 1, 1)]), tmp_path / "ws.duckdb"
    proc = _ingest(db, src)
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith(f"traceql: error: {src}: holds values traceql "
                                                                   "cannot store (Out of Range Error")
    assert not db.exists()


def test_kineto_ts_beyond_the_limit_is_refused(tmp_path):
    src, db = _kineto(tmp_path / "x.json", None, [(L // 1000 + 1, 1)]), tmp_path / "ws.duckdb"
    _refused(db, src, _beyond(src, f"kernel.ts + dur = {(L // 1000 + 1) * 1000 + 1000}"))


def test_kineto_ts_as_huge_float_is_left_out_with_a_warning(tmp_path):
    """ts = 1e300: not a time; the event is left out and info says so."""
    src, db = _kineto(tmp_path / "x.json", None, [(1e300, 1), (5, 2)]), tmp_path / "ws.duckdb"
    proc = _ingest(db, src)
    assert proc.returncode == 0, proc.stderr
    _check_exact(db, [2000], [5000])
    with traceql.open(db) as ws:
        assert any("without a readable ts or dur" in w for w in ws.info()[0]["warnings"])


def test_kineto_sum_of_durations_beyond_the_limit_is_refused(tmp_path):
    """Three kernels of about 2**62 / 1000 us: each fits, their sum (3 * 2**62 ns) does not. Before
    the limit, report --by kernel printed an empty total_ns and analyze failed with 'SQL: Out of
    Range Error' (exit 2)."""
    kernels = [(0, L // 1000)] * 3
    src, db = _kineto(tmp_path / "x.json", None, kernels), tmp_path / "ws.duckdb"
    _refused(db, src, _sum_beyond(src, 3 * (L // 1000) * 1000))


@pytest.mark.parametrize("base, kernels, what", [
    (M - 10, [(1, 2)], f"the UTC time of kernel.ts + dur (utc_offset_ns {M - 10} + 3000) = {M - 10 + 3000}"),
    (L - 10_000, [(5, 6)], f"the UTC time of kernel.ts + dur (utc_offset_ns {L - 10_000} + 11000) = {L + 1000}"),
    (-L, [(1, 1)], f"the UTC start of its session (start_utc_ns) = {-L}"),
], ids=["base_near_2_63", "base_plus_ts_over_limit", "base_at_minus_limit"])
def test_kineto_base_plus_ts_beyond_the_limit_is_refused(tmp_path, base, kernels, what):
    """baseTimeNanoseconds + ts beyond the limit: refused at ingest. Before, the file was ingested
    and every report then failed with 'SQL: Out of Range Error: Overflow in addition of INT64'."""
    src, db = _kineto(tmp_path / "x.json", base, kernels), tmp_path / "ws.duckdb"
    _refused(db, src, _beyond(src, what))


def test_overflow_in_traceqls_own_sql_is_a_data_error(tmp_path):
    """Rows moved beyond the limit after ingest (sql --write): traceql's own SQL overflows. That is
    the data's fault, not a query's: exit 3, one line naming the workspace, never 'SQL:'. The same
    overflow in the user's own query stays a SQL error (exit 2)."""
    src, db = _nsys(tmp_path / "x.sqlite", [(100, 250)]), tmp_path / "ws.duckdb"
    assert _ingest(db, src).returncode == 0
    moved = served("--db", db, "sql", "--write", f"UPDATE kernel SET ts = {M - 100}", timeout=300)
    assert moved.returncode == 0, moved.stderr
    proc = served("--db", db, "analyze", timeout=300)
    assert (proc.returncode, proc.stdout) == (3, "")
    assert proc.stderr == (
        f"traceql: error: {db}: holds values too large for traceql's 64-bit arithmetic (Out of Range Error: "
        f"Overflow in addition of INT64 ({M - 100} + 150)!); ingest refuses times and durations beyond +-2**62 ns "
        "(docs/errors.md), so rows changed with sql --write or sizes this large are the cause\n")
    user = served("--db", db, "sql", "SELECT ts + dur FROM kernel", timeout=300)
    assert (user.returncode, user.stderr) == (
        2, f"traceql: error: SQL: Out of Range Error: Overflow in addition of INT64 ({M - 100} + 150)!\n")


def _workspace_sum_beyond(src: Path, traces: int, total: int) -> str:
    return (f"traceql: error: {src}: with it the durations of the workspace's {traces} traces add up to {total} ns "
            "(abs(dur), every table), beyond traceql's limit of 2**62 ns (4611686018427387904) for one workspace "
            "(headroom for 64-bit sums across traces, see docs/errors.md); ingest it into another workspace\n")


def test_sums_across_traces_are_exact_or_refused(tmp_path):
    """Durations summed across the traces of a workspace: exact up to 2**62 - 1 (report --by kernel
    and --by gpu over two traces), and a file that would take the workspace's sum to 2**62 is
    refused at ingest, exit 3, the workspace byte for byte as before. Before, each trace passed its
    own limit and the cross-trace total_ns was printed blank (TRY_CAST to BIGINT: NULL)."""
    from ..util import sha256

    a = _nsys(tmp_path / "a.sqlite", [(0, 2 ** 61)])
    b = _nsys(tmp_path / "b.sqlite", [(10, 10 + 2 ** 61 - 1)])
    c = _nsys(tmp_path / "c.sqlite", [(5, 6)])
    db = tmp_path / "ws.duckdb"
    for src in (a, b):
        proc = _ingest(db, src)
        assert proc.returncode == 0, proc.stderr
    with traceql.open(db) as ws:
        assert [(r["calls"], r["total_ns"]) for r in ws.report("kernel").to_pylist()] == [(2, L - 1)]
        assert [(r["calls"], r["total_ns"]) for r in ws.report("gpu").to_pylist()] == [(2, L - 1)]
    before = sha256(db)
    proc = _ingest(db, c)
    assert (proc.returncode, proc.stderr, proc.stdout) == (3, _workspace_sum_beyond(c, 3, L), "")
    assert sha256(db) == before
    # three files in one command, each within its own limit (the case): the second is named
    many = tmp_path / "many.duckdb"
    big = [_nsys(tmp_path / f"big{i}.sqlite", [(0, L - 1000)]) for i in range(3)]
    proc = served("--db", many, "ingest", "-j", "1", *big, timeout=300)
    assert (proc.returncode, proc.stderr, proc.stdout) == (3, _workspace_sum_beyond(big[1], 2, 2 * (L - 1000)), "")
    assert not many.exists()


def test_spans_across_traces_fit_64_bits_or_are_refused(tmp_path):
    """report --by device sums the traces' spans: a trace spanning 2**63 - 2 ns (the widest one
    within the limit) and a second trace of any span would pass 2**63; the second is refused."""
    wide = _nsys(tmp_path / "wide.sqlite", NSYS_EXACT["widest"])
    small = _nsys(tmp_path / "small.sqlite", [(100, 103)])
    db = tmp_path / "ws.duckdb"
    assert _ingest(db, wide).returncode == 0
    proc = _ingest(db, small)
    assert (proc.returncode, proc.stdout) == (3, "")
    assert proc.stderr == (f"traceql: error: {small}: with it the spans of the workspace's 2 traces add up to "
                           f"{M - 2 + 3} ns (trace.duration), beyond 2**63-1, the largest 64-bit sum (see "
                           "docs/errors.md); ingest it into another workspace\n")
