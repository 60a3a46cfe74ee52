"""Brute-force NVTX attribution of GPU work, in plain Python over an Nsight Systems SQLite export.

An independent check of the attribution rule of DESIGN.md §4, written for tests: it reads the
file with sqlite3 only (read-only) and shares no code with traceql or with the fixture
generators. It works on any nsys export: NVTX text inline (`text`) or registered (`textId`
into StringIds), NULL range ends, eventClass 67 backtrace duplicates, missing tables and
columns (a missing table contributes nothing; a missing `endGlobalTid` or `textId` column reads
as NULL).

The rule
--------
* A GPU operation (row of CUPTI_ACTIVITY_KIND_KERNEL, _MEMCPY or _MEMSET) is launched by the CUDA
  API call (CUPTI_ACTIVITY_KIND_RUNTIME row with eventClass != 67) with the same correlationId in
  the same process (pid = globalTid >> 24 & 0xFFFFFF for calls and NVTX rows, globalPid >> 24 &
  0xFFFFFF for GPU rows).  Should several calls share (pid, correlationId) -- real exports do not,
  a damaged or synthetic one may -- the operation takes the runtime call (eventClass 0) that
  started last at or before the operation's start, else such a call of another class, else the
  earliest call of the key (runtime first); ties go to the later row.  An operation without a
  launching call is unattributed.
* It belongs to every NVTX range (eventType 59 push/pop or 60 start/end; `event_types` changes
  the set) of the same process whose interval holds the whole call: range.start <= call.start and
  call.end <= range.end, a range never closed (end NULL) being open to +infinity.  Name =
  coalesce(text, StringIds[textId]).
* It is 'own' for that range when the call's thread is the thread that opened the range (its
  globalTid), 'other' when another thread of the same process made the call.  A kernel counts
  once per range.  An operation that no range holds is unattributed.

API
---
``attribution(path) -> dict`` with
  "ranges": {(pid, tid, start, end or None, name): RangeWork(instances, own_kernel_ns,
             other_kernel_ns, own_kernels, other_kernels)}  (identical keys are merged, their
             instances and sums added),
  "unattributed": {"ops", "kernels", "kernel_ns", "memcpy_ns", "memset_ns"},
  "ops_without_launch": GPU operations with no launching call (also in "unattributed"),
  "kernels", "kernel_ns": totals over all kernel rows.
GPU rows with a NULL start or end are skipped, as are API calls with a NULL start, end,
globalTid or correlationId and NVTX rows with a NULL start or globalTid.
``by_name(result) -> {grouping name: {"instances", "own_kernel_ns", "other_kernel_ns",
  "own_kernels", "other_kernels"}}`` sums the ranges per ``grouping_name(name)``.
``grouping_name(name)`` strips PyTorch's per-instance suffixes (', seq = N', ', op_id = N',
  ', sizes = [...]', ', input_op_ids = [...]', PyTorch 1.0's ', seq=N' / ', stashed seq=N'); a
  name that PyTorch dropped (legacy record_shapes with seq < 0: ', sizes = [[...]]') groups as ''.

Cost: O((calls + ranges) log calls), memory O(calls x launching threads + ranges): a few seconds
for 200 k kernels, 225 k API calls and 600 k ranges (fixtures/gen_torch.py).
"""

from __future__ import annotations

import re
import sqlite3
from array import array
from bisect import bisect_left, bisect_right
from collections import defaultdict, namedtuple
from itertools import accumulate

__all__ = ["attribution", "by_name", "grouping_name", "RangeWork", "RANGE_EVENT_TYPES"]

RANGE_EVENT_TYPES = (59, 60)
BACKTRACE_CLASS = 67
RUNTIME_CLASS = 0
INF = (1 << 63) - 1
MASK24 = 0xFFFFFF
GPU_TABLES = (("kernel", "CUPTI_ACTIVITY_KIND_KERNEL"), ("memcpy", "CUPTI_ACTIVITY_KIND_MEMCPY"),
              ("memset", "CUPTI_ACTIVITY_KIND_MEMSET"))

_ZERO = (0, 0)
_ZERO4 = (0, 0, 0, 0)
RangeWork = namedtuple("RangeWork", "instances own_kernel_ns other_kernel_ns own_kernels other_kernels")

# ---------------------------------------------------------------------------
# grouping names
# ---------------------------------------------------------------------------
_TORCH10 = re.compile(r"(.*), (?:stashed )?seq=-?\d+", re.S)
_SUFFIXES = (  # the modern builder's order, stripped from the right
    (", input_op_ids = ", re.compile(r"\[(?:\(-?\d+,-?\d+\)(?:, )?)*\]")),
    (", sizes = ", re.compile(r"\[(?:\[[-\d, ]*\](?:, )?)*\]")),
    (", op_id = ", re.compile(r"\d+")),
    (", seq = ", re.compile(r"-?\d+")),
)


def grouping_name(name: str | None) -> str | None:
    """The name without PyTorch's per-instance suffixes; '' for a dropped name."""
    if name is None or ", " not in name:
        return name
    if "seq=" in name:
        m = _TORCH10.fullmatch(name)
        if m:
            return m.group(1)
    for marker, tail in _SUFFIXES:
        i = name.rfind(marker)
        if i >= 0 and tail.fullmatch(name, i + len(marker)):
            name = name[:i]
    return name


# ---------------------------------------------------------------------------
# reading
# ---------------------------------------------------------------------------

def _connect(path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def _replacing(b: bytes) -> str:
    return b.decode("utf-8", "replace")


def _columns(con, table: str) -> set[str]:
    return {r[1] for r in con.execute(f'PRAGMA table_info("{table}")')}


def _col(cols: set[str], name: str) -> str:
    return f'"{name}"' if name in cols else "NULL"


def _nvtx_table(tables: set[str]) -> str | None:
    if "NVTX_EVENTS" in tables:
        return "NVTX_EVENTS"
    versioned = sorted(t for t in tables if re.fullmatch(r"NVTX_EVENTS_V\d+", t))
    return versioned[-1] if versioned else None


class _SharedKey:
    """Several calls (start, end, gtid, cls, rowid) of one (pid, correlationId): the rule's pick."""

    def __init__(self, cands: list):
        self.groups = []
        for runtime in (True, False):
            g = sorted((c for c in cands if (c[3] == RUNTIME_CLASS) == runtime), key=lambda c: (c[0], c[4]))
            self.groups.append(([c[0] for c in g], g))
        self.fallback = min(cands, key=lambda c: (c[3] != RUNTIME_CLASS, c[0], c[4]))

    def pick(self, op_start: int):
        for starts, calls in self.groups:
            i = bisect_right(starts, op_start)
            if i:
                return calls[i - 1]
        return self.fallback


class _Calls:
    """The launching calls of one process sorted by start, with prefix sums of their kernel
    time and count: over all calls, and per thread (aligned with the process's order)."""

    __slots__ = ("starts", "ends", "gtids", "ns", "n", "thread", "maxdur")

    def __init__(self, rows):  # rows: (start, end, gtid, kernel_ns, kernels)
        rows.sort()
        self.starts = [r[0] for r in rows]
        self.ends = [r[1] for r in rows]
        self.gtids = [r[2] for r in rows]
        self.ns = array("q", [0, *accumulate(r[3] for r in rows)])
        self.n = array("q", [0, *accumulate(r[4] for r in rows)])
        self.thread = {}
        for g in set(self.gtids):
            self.thread[g] = (array("q", [0, *accumulate(r[3] if r[2] == g else 0 for r in rows)]),
                              array("q", [0, *accumulate(r[4] if r[2] == g else 0 for r in rows)]))
        self.maxdur = max((r[1] - r[0] for r in rows), default=0)

    def inside(self, rs: int, re_: int, gtid: int):
        """(kernel ns, kernels, of them those of thread gtid: ns, kernels) of the calls with
        rs <= start and end <= re_."""
        starts = self.starts
        lo = bisect_left(starts, rs)
        hi = len(starts) if re_ == INF else bisect_right(starts, re_, lo)
        if hi <= lo:
            return _ZERO4
        ns, n = self.ns, self.n
        tot_ns, tot_n = ns[hi] - ns[lo], n[hi] - n[lo]
        if not tot_n:
            return _ZERO4
        th = self.thread.get(gtid)
        own_ns, own_n = (th[0][hi] - th[0][lo], th[1][hi] - th[1][lo]) if th else _ZERO
        if re_ != INF:  # calls that start inside but end after the range
            ends, gtids, floor = self.ends, self.gtids, re_ - self.maxdur
            j = hi - 1
            while j >= lo and starts[j] >= floor:
                if ends[j] > re_:
                    d_ns, d_n = ns[j + 1] - ns[j], n[j + 1] - n[j]
                    tot_ns -= d_ns
                    tot_n -= d_n
                    if gtids[j] == gtid:
                        own_ns -= d_ns
                        own_n -= d_n
                j -= 1
        return tot_ns, tot_n, own_ns, own_n


def attribution(path, event_types=RANGE_EVENT_TYPES) -> dict:
    """Per NVTX range its own/other kernel work, and the unattributed totals (module doc)."""
    con = _connect(path)
    try:
        try:  # sqlite3's own decoding is fast; invalid UTF-8 makes it raise
            return _attribution(con, tuple(event_types))
        except sqlite3.OperationalError as e:
            if "decode" not in str(e):
                raise
        con.text_factory = _replacing
        return _attribution(con, tuple(event_types))
    finally:
        con.close()


def _attribution(con, event_types) -> dict:
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}

    # GPU operations: (kind, start, end, pid, corr)
    ops = []
    for kind, table in GPU_TABLES:
        if table not in tables:
            continue
        cols = _columns(con, table)
        ops.extend(con.execute(
            f'SELECT ?, start, "end", ({_col(cols, "globalPid")} >> 24) & {MASK24}, {_col(cols, "correlationId")} '
            f'FROM {table} WHERE start IS NOT NULL AND "end" IS NOT NULL', (kind,)))
    kernels = sum(1 for o in ops if o[0] == "kernel")
    kernel_ns = sum(o[2] - o[1] for o in ops if o[0] == "kernel")
    keys = {(o[3], o[4]) for o in ops if o[3] is not None and o[4] is not None}

    # the call of each (pid, corr) some operation uses; several calls of one key go to `shared`
    single: dict = {}  # key -> (start, end, gtid, eventClass, rowid)
    shared: dict = {}  # key -> [those tuples], then _SharedKey
    if "CUPTI_ACTIVITY_KIND_RUNTIME" in tables:
        cols = _columns(con, "CUPTI_ACTIVITY_KIND_RUNTIME")
        cls = _col(cols, "eventClass")
        for pid, corr, s, e, gtid, c, rowid in con.execute(
                f'SELECT (globalTid >> 24) & {MASK24}, correlationId, start, "end", globalTid, {cls}, rowid '
                f"FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE {cls} IS NOT {BACKTRACE_CLASS} "
                'AND start IS NOT NULL AND "end" IS NOT NULL AND globalTid IS NOT NULL '
                "AND correlationId IS NOT NULL"):
            key = (pid, corr)
            if key in keys:
                call = (s, e, gtid, c, rowid)
                first = single.setdefault(key, call)
                if first is not call:
                    shared.setdefault(key, [first]).append(call)
    shared = {key: _SharedKey(cs) for key, cs in shared.items()}

    # each operation to its call; per call its kernel work
    unattributed = {"ops": 0, "kernels": 0, "kernel_ns": 0, "memcpy_ns": 0, "memset_ns": 0}
    without_launch = 0
    used: dict = {}      # rowid -> call
    work: dict = {}      # rowid -> (kernel ns, kernels)
    op_call = []         # per operation, its call's rowid or None
    for op in ops:
        kind, s, e, pid, corr = op
        key = (pid, corr)
        call = single.get(key)
        if call is None:
            without_launch += 1
            op_call.append(None)
            continue
        if key in shared:
            call = shared[key].pick(s)
        rowid = call[4]
        used[rowid] = call
        op_call.append(rowid)
        if kind == "kernel":
            ns, n = work.get(rowid, _ZERO)
            work[rowid] = (ns + e - s, n + 1)

    by_proc = defaultdict(list)
    for rowid, (s, e, gtid, _, _) in used.items():
        by_proc[(gtid >> 24) & MASK24].append((s, e, gtid, *work.get(rowid, _ZERO)))
    proc_calls = {pid: _Calls(rows) for pid, rows in by_proc.items()}

    # ranges
    ranges: dict = {}
    nvtx = _nvtx_table(tables)
    if nvtx is not None and event_types:
        cols = _columns(con, nvtx)
        text = 'n."text"' if "text" in cols else "NULL"
        if "StringIds" in tables and "textId" in cols:
            name, join = f"coalesce({text}, s.value)", 'LEFT JOIN StringIds s ON s.id = n."textId"'
        else:
            name, join = text, ""
        marks = ", ".join("?" * len(event_types))
        empty = RangeWork(1, 0, 0, 0, 0)
        get_proc, setdefault, make = proc_calls.get, ranges.setdefault, tuple.__new__
        for s, e, gtid, pid, tid, nm in con.execute(
                f'SELECT n.start, n."end", n.globalTid, (n.globalTid >> 24) & {MASK24}, n.globalTid & {MASK24}, '
                f"{name} FROM {nvtx} n {join} "
                f"WHERE n.eventType IN ({marks}) AND n.start IS NOT NULL AND n.globalTid IS NOT NULL",
                event_types):
            calls = get_proc(pid)
            new = empty
            if calls is not None:
                tot_ns, tot_n, own_ns, own_n = calls.inside(s, INF if e is None else e, gtid)
                if tot_n:  # (tuple.__new__ skips namedtuple's Python-level constructor)
                    new = make(RangeWork, (1, own_ns, tot_ns - own_ns, own_n, tot_n - own_n))
            key = (pid, tid, s, e, nm)
            old = setdefault(key, new)
            if old is not new:  # the same key again: merge
                ranges[key] = RangeWork(*(a + b for a, b in zip(old, new)))

    # calls no range of their process holds: their operations are unattributed
    by_pid = defaultdict(list)
    for pid, _, s, e, _ in ranges:
        by_pid[pid].append((s, INF if e is None else e))
    spans = {}  # pid -> (starts, running max of ends) of its ranges, by start
    for pid, lst in by_pid.items():
        lst.sort()
        spans[pid] = ([r[0] for r in lst], list(accumulate((r[1] for r in lst), max)))
    held = set()
    for rowid, (s, e, gtid, _, _) in used.items():
        sp = spans.get((gtid >> 24) & MASK24)
        if sp is not None:
            i = bisect_right(sp[0], s)
            if i and sp[1][i - 1] >= e:
                held.add(rowid)
    for op, rowid in zip(ops, op_call):
        if rowid not in held:
            _add_unattributed(unattributed, op)
    return {"ranges": ranges, "unattributed": unattributed, "ops_without_launch": without_launch,
            "kernels": kernels, "kernel_ns": kernel_ns}


def _add_unattributed(acc: dict, op) -> None:
    kind, s, e = op[0], op[1], op[2]
    acc["ops"] += 1
    if kind == "kernel":
        acc["kernels"] += 1
    acc[f"{kind}_ns"] += e - s


def by_name(result: dict, grouping=grouping_name) -> dict:
    """Sum ``result["ranges"]`` per grouping name (module doc)."""
    out: dict = {}
    cache: dict = {}
    for key, w in result["ranges"].items():
        name = key[4]
        g = cache.get(name)
        if g is None:
            g = cache[name] = grouping(name) if name is not None else None
        a = out.get(g)
        if a is None:
            out[g] = list(w)
        else:
            for i, v in enumerate(w):
                a[i] += v
    return {g: dict(zip(RangeWork._fields, a)) for g, a in out.items()}
