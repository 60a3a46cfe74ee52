"""Cross-check traceql against independent computations on real Nsight Systems exports.

Every nsys SQLite export in the shared trace folder (../shared/traces/*/*.sqlite, next to
the repository checkout; third-party files, not part of the repository) is ingested once
into one workspace per test session. Each view is then compared with numbers computed
here straight from the source file with Python's sqlite3 (opened read-only), without any
of traceql's SQL: row counts, sums, minima and maxima, counts per name and per kind,
pid/tid decoding and NVTX nesting (depth and parent, computed by a brute-force
definition: the tightest enclosing push/pop range on the same thread).
"""

from __future__ import annotations

import bisect
import re
import sqlite3
from collections import Counter, defaultdict
from pathlib import Path

import pytest

import traceql

TRACE_ROOT = Path(__file__).resolve().parents[3] / "shared" / "traces"
SKIP_REASON = "../shared/traces not present (third-party traces are not part of the repository)"

NSYS_COPY_KINDS = {1: "Host-to-Device", 2: "Device-to-Host", 8: "Device-to-Device", 10: "Peer-to-Peer"}
API_KINDS = {0: "runtime", 1: "driver"}
BACKTRACE_CLASS = 67
PUSH_POP_TYPES = (59, 70)
START_END_TYPES = (60, 71)
MARK_TYPE = 34
INF = float("inf")


def _trace_files() -> list[Path]:
    if not TRACE_ROOT.is_dir():
        return []
    return sorted(p.resolve() for p in TRACE_ROOT.glob("*/*.sqlite") if p.is_file())


TRACE_FILES = _trace_files()
PARAMS = ([pytest.param(p, id=f"{p.parent.name}/{p.name}") for p in TRACE_FILES]
          or [pytest.param(None, id="no-traces", marks=pytest.mark.skip(reason=SKIP_REASON))])


# ----------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="session")
def real_ws(tmp_path_factory):
    """All shared nsys exports ingested once into one workspace: (workspace, {path: trace_id})."""
    if not TRACE_FILES:
        pytest.skip(SKIP_REASON)
    db = tmp_path_factory.mktemp("real_nsys") / "ws.duckdb"
    traceql.ingest(TRACE_FILES, db=db)
    ws = traceql.open(db)
    ids = {Path(r["path"]): r["trace_id"]
           for r in ws.sql("SELECT path, trace_id FROM trace").to_pylist()}
    return ws, ids


def _tid(real_ws, path: Path) -> int:
    _, ids = real_ws
    assert path in ids, f"{path}: not in the trace table after ingest (paths there: {sorted(map(str, ids))})"
    return ids[path]


def _q(real_ws, sql: str, params=()) -> list[dict]:
    ws, _ = real_ws
    return ws.sql(sql, list(params)).to_pylist()


# ------------------------------------------------------------------- source-side helpers

class Source:
    """Read-only view of one source export, with table/column existence checks."""

    def __init__(self, path: Path):
        self.path = path
        self.con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        self.con.text_factory = lambda b: b.decode("utf-8", "replace")
        self.tables = {r[0] for r in self.con.execute(
            "SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}
        self._cols: dict[str, set[str]] = {}

    def close(self):
        self.con.close()

    def has(self, table: str) -> bool:
        return table in self.tables

    def cols(self, table: str) -> set[str]:
        if table not in self._cols:
            self._cols[table] = ({r[1] for r in self.con.execute(f'PRAGMA table_info("{table}")')}
                                 if self.has(table) else set())
        return self._cols[table]

    def rows(self, sql: str, params=()) -> list[tuple]:
        return self.con.execute(sql, params).fetchall()

    def strings(self) -> dict[int, str]:
        if not self.has("StringIds"):
            return {}
        return dict(self.rows("SELECT id, value FROM StringIds"))

    def metadata(self) -> dict[str, str] | None:
        for meta in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
            if self.has(meta):
                return {str(k): v for k, v in self.rows(f"SELECT name, value FROM {meta}")}
        return None


@pytest.fixture
def src(request):
    path = request.node.callspec.params["path"]
    s = Source(path)
    yield s
    s.close()


def _pid(global_id) -> int | None:
    return None if global_id is None else (global_id >> 24) & 0xFFFFFF


def _tid_of(global_tid) -> int | None:
    return None if global_tid is None else global_tid & 0xFFFFFF


def _counter_diff(expected: Counter, got: Counter, limit: int = 8) -> str:
    keys = set(expected) | set(got)
    diffs = sorted(((k, expected.get(k, 0), got.get(k, 0)) for k in keys
                    if expected.get(k, 0) != got.get(k, 0)), key=repr)
    shown = "; ".join(f"{k!r}: expected {e}, traceql {g}" for k, e, g in diffs[:limit])
    more = f" (+{len(diffs) - limit} more)" if len(diffs) > limit else ""
    return f"{len(diffs)} differing keys: {shown}{more}"


def _assert_counter(path: Path, what: str, expected: Counter, got: Counter):
    assert expected == got, f"{path}: {what} differ: {_counter_diff(expected, got)}"


# ----------------------------------------------------------------------------- trace row

@pytest.mark.parametrize("path", PARAMS)
def test_trace_row(real_ws, src, path):
    tid = _tid(real_ws, path)
    [row] = _q(real_ws, "SELECT * FROM trace WHERE trace_id = ?", [tid])
    assert row["path"] == str(path), f"{path}: trace.path is {row['path']!r}"
    assert row["source_format"] == "nsys", f"{path}: source_format is {row['source_format']!r}, expected 'nsys'"
    meta = src.metadata()
    version = None if meta is None else meta.get("EXPORT_SCHEMA_VERSION")
    assert row["schema_version"] == version, (
        f"{path}: schema_version is {row['schema_version']!r}, file says {version!r}")
    if meta is None:
        layout = "nsys/legacy"
    else:
        major = int(str(version).split(".")[0])
        layout = {2: "nsys/v2", 3: "nsys/v3"}[major]
    assert row["layout"] == layout, f"{path}: layout is {row['layout']!r}, expected {layout!r} (schema {version})"


# -------------------------------------------------------------------------------- kernel

@pytest.mark.parametrize("path", PARAMS)
def test_kernel(real_ws, src, path):
    tid = _tid(real_ws, path)
    t = "CUPTI_ACTIVITY_KIND_KERNEL"
    if src.has(t):
        rows = src.rows(f'SELECT start, "end", globalPid, demangledName FROM {t}')
    else:
        rows = []
    [got] = _q(real_ws, "SELECT count(*) AS n, sum(dur) AS dur, min(ts) AS lo, max(ts) AS hi "
                        "FROM kernel WHERE trace_id = ?", [tid])
    assert got["n"] == len(rows), f"{path}: kernel rows: traceql {got['n']}, source {len(rows)}"
    if not rows:
        return
    exp_dur = sum(e - s for s, e, _, _ in rows)
    assert got["dur"] == exp_dur, f"{path}: kernel sum(dur): traceql {got['dur']}, source {exp_dur}"
    lo, hi = min(r[0] for r in rows), max(r[0] for r in rows)
    assert (got["lo"], got["hi"]) == (lo, hi), (
        f"{path}: kernel min/max ts: traceql {(got['lo'], got['hi'])}, source {(lo, hi)}")

    strings = src.strings()
    expected_names = Counter(strings[d] for _, _, _, d in rows if d in strings)
    got_names = Counter({r["name"]: r["n"] for r in _q(
        real_ws, "SELECT name, count(*) AS n FROM kernel WHERE trace_id = ? GROUP BY name", [tid])})
    if sum(expected_names.values()) == len(rows):
        _assert_counter(path, "kernel counts per name", expected_names, got_names)
    else:  # kernels without a resolvable demangled name may carry another name in traceql
        short = {k: (e, got_names.get(k, 0)) for k, e in expected_names.items() if got_names.get(k, 0) < e}
        assert not short, f"{path}: kernel names missing in traceql (name: (source, traceql)): {short}"

    _assert_counter(path, "kernel counts per pid", Counter(_pid(g) for _, _, g, _ in rows),
                    Counter({r["pid"]: r["n"] for r in _q(
                        real_ws, "SELECT pid, count(*) AS n FROM kernel WHERE trace_id = ? GROUP BY pid", [tid])}))


# ------------------------------------------------------------------------ memcpy, memset

@pytest.mark.parametrize("path", PARAMS)
def test_memcpy(real_ws, src, path):
    tid = _tid(real_ws, path)
    t = "CUPTI_ACTIVITY_KIND_MEMCPY"
    rows = src.rows(f'SELECT start, "end", bytes, copyKind FROM {t}') if src.has(t) else []
    [got] = _q(real_ws, "SELECT count(*) AS n, sum(dur) AS dur, sum(bytes) AS bytes "
                        "FROM memcpy WHERE trace_id = ?", [tid])
    assert got["n"] == len(rows), f"{path}: memcpy rows: traceql {got['n']}, source {len(rows)}"
    if not rows:
        return
    exp_dur = sum(e - s for s, e, _, _ in rows)
    exp_bytes = sum(b or 0 for _, _, b, _ in rows)
    assert got["dur"] == exp_dur, f"{path}: memcpy sum(dur): traceql {got['dur']}, source {exp_dur}"
    assert got["bytes"] == exp_bytes, f"{path}: memcpy sum(bytes): traceql {got['bytes']}, source {exp_bytes}"
    kinds = Counter({r["copy_kind"]: r["n"] for r in _q(
        real_ws, "SELECT copy_kind, count(*) AS n FROM memcpy WHERE trace_id = ? GROUP BY 1", [tid])})
    expected = Counter(NSYS_COPY_KINDS[k] for *_, k in rows if k in NSYS_COPY_KINDS)
    _assert_counter(path, "memcpy counts per copy_kind", expected,
                    Counter({k: n for k, n in kinds.items() if k in NSYS_COPY_KINDS.values()}))


@pytest.mark.parametrize("path", PARAMS)
def test_memset(real_ws, src, path):
    tid = _tid(real_ws, path)
    t = "CUPTI_ACTIVITY_KIND_MEMSET"
    rows = src.rows(f'SELECT start, "end" FROM {t}') if src.has(t) else []
    [got] = _q(real_ws, "SELECT count(*) AS n, sum(dur) AS dur FROM memset WHERE trace_id = ?", [tid])
    assert got["n"] == len(rows), f"{path}: memset rows: traceql {got['n']}, source {len(rows)}"
    if rows:
        exp_dur = sum(e - s for s, e in rows)
        assert got["dur"] == exp_dur, f"{path}: memset sum(dur): traceql {got['dur']}, source {exp_dur}"


# ------------------------------------------------------------------------------ api_call

@pytest.mark.parametrize("path", PARAMS)
def test_api_call(real_ws, src, path):
    tid = _tid(real_ws, path)
    t = "CUPTI_ACTIVITY_KIND_RUNTIME"
    rows = []
    if src.has(t):
        rows = [r for r in src.rows(f'SELECT start, "end", eventClass, nameId, globalTid FROM {t}')
                if r[2] != BACKTRACE_CLASS]
    [got] = _q(real_ws, "SELECT count(*) AS n, sum(dur) AS dur FROM api_call WHERE trace_id = ?", [tid])
    assert got["n"] == len(rows), (
        f"{path}: api_call rows: traceql {got['n']}, source {len(rows)} (eventClass {BACKTRACE_CLASS} left out)")
    if not rows:
        return
    exp_dur = sum(e - s for s, e, *_ in rows)
    assert got["dur"] == exp_dur, f"{path}: api_call sum(dur): traceql {got['dur']}, source {exp_dur}"

    kinds = Counter({r["api_kind"]: r["n"] for r in _q(
        real_ws, "SELECT api_kind, count(*) AS n FROM api_call WHERE trace_id = ? GROUP BY 1", [tid])})
    _assert_counter(path, "api_call counts per api_kind",
                    Counter(API_KINDS[c] for _, _, c, _, _ in rows if c in API_KINDS),
                    Counter({k: n for k, n in kinds.items() if k in API_KINDS.values()}))

    strings = src.strings()
    strip = re.compile(r"_v\d+$")
    expected_names = Counter(None if n not in strings else strip.sub("", strings[n]) for _, _, _, n, _ in rows)
    _assert_counter(path, "api_call counts per name", expected_names, Counter({r["name"]: r["n"] for r in _q(
        real_ws, "SELECT name, count(*) AS n FROM api_call WHERE trace_id = ? GROUP BY name", [tid])}))

    _assert_counter(path, "api_call counts per (pid, tid)",
                    Counter((_pid(g), _tid_of(g)) for *_, g in rows),
                    Counter({(r["pid"], r["tid"]): r["n"] for r in _q(
                        real_ws, "SELECT pid, tid, count(*) AS n FROM api_call WHERE trace_id = ? GROUP BY 1, 2",
                        [tid])}))


# ---------------------------------------------------------------------------------- NVTX

def _nvtx_events(src: Source, types) -> list[dict]:
    """NVTX_EVENTS rows of the given eventTypes with their text resolved, as dicts."""
    t = "NVTX_EVENTS"
    if not src.has(t):
        return []
    cols = src.cols(t)
    opt = {c: (f'"{c}"' if c in cols else "NULL") for c in ("text", "textId", "endGlobalTid", "domainId")}
    sql = (f'SELECT rowid, start, "end", eventType, globalTid, {opt["text"]}, {opt["textId"]}, '
           f'{opt["endGlobalTid"]}, {opt["domainId"]} FROM {t} '
           f'WHERE eventType IN ({", ".join(str(int(x)) for x in types)})')
    strings = src.strings()
    out = []
    for rowid, s, e, et, g, text, text_id, end_g, dom in src.rows(sql):
        out.append(dict(rowid=rowid, start=s, end=e, type=et, gtid=g, end_gtid=end_g, domain_id=dom,
                        name=text if text is not None else strings.get(text_id)))
    return out


def _style(event_type: int) -> str:
    return "push/pop" if event_type in PUSH_POP_TYPES else "start/end"


@pytest.mark.parametrize("path", PARAMS)
def test_nvtx_range(real_ws, src, path):
    tid = _tid(real_ws, path)
    ev = _nvtx_events(src, PUSH_POP_TYPES + START_END_TYPES)
    got = _q(real_ws, "SELECT pid, tid, ts, dur, name, domain, style FROM nvtx_range WHERE trace_id = ?", [tid])
    assert len(got) == len(ev), f"{path}: nvtx_range rows: traceql {len(got)}, source {len(ev)}"
    if not ev:
        return
    _assert_counter(path, "nvtx_range counts per style", Counter(_style(e["type"]) for e in ev),
                    Counter(r["style"] for r in got))
    _assert_counter(path, "nvtx_range counts per name", Counter(e["name"] for e in ev),
                    Counter(r["name"] for r in got))
    exp_dur = sum(e["end"] - e["start"] for e in ev if e["end"] is not None)
    got_dur = sum(r["dur"] for r in got if r["dur"] is not None)
    assert got_dur == exp_dur, f"{path}: nvtx_range sum(dur): traceql {got_dur}, source {exp_dur}"
    _assert_counter(path, "nvtx_range (pid, tid, ts, dur, name, style) rows",
                    Counter((_pid(e["gtid"]), _tid_of(e["gtid"]), e["start"],
                             None if e["end"] is None else e["end"] - e["start"], e["name"], _style(e["type"]))
                            for e in ev),
                    Counter((r["pid"], r["tid"], r["ts"], r["dur"], r["name"], r["style"]) for r in got))
    _assert_counter(path, "nvtx_range default-domain ('') counts",
                    Counter(not e["domain_id"] for e in ev), Counter(r["domain"] == "" for r in got))


class _SuffixMin:
    """Fenwick tree over positions 1..n: point 'lower to value', prefix minimum."""

    def __init__(self, n: int):
        self.n = n
        self.tree = [None] * (n + 1)

    def update(self, i: int, value):
        while i <= self.n:
            if self.tree[i] is None or value < self.tree[i]:
                self.tree[i] = value
            i += i & -i

    def query(self, i: int):
        best = None
        while i > 0:
            if self.tree[i] is not None and (best is None or self.tree[i] < best):
                best = self.tree[i]
            i -= i & -i
        return best


def _nest(ranges: list[dict]) -> None:
    """Set 'depth' and 'parent' (an index into `ranges`) on the push/pop ranges of ONE thread.

    Definition: the parent of a range c is the tightest range p != c on the same thread with
    p.start <= c.start and c.end <= p.end, i.e. minimal (c.start - p.start) + (p.end - c.end),
    which for a fixed c is the p of minimal length; of two identical ranges the earlier in
    (start, -end, rowid) order is the parent of the later (so a parent always precedes its
    child in that order, and among equally tight candidates the latest one, the deepest,
    wins). An unclosed range (NULL end) counts as open forever. depth = number of ancestors.

    O(n log n): walk the ranges in (start, -end, rowid) order; every earlier range has a
    start <= this start, so the candidates are the earlier ranges with end >= this end, a
    prefix when ends are ranked in descending order; a Fenwick tree keeps the minimal
    (length, -order) of each prefix."""
    order = sorted(range(len(ranges)),
                   key=lambda i: (ranges[i]["start"], -ranges[i]["e"], ranges[i]["rowid"]))
    ends_desc = sorted({-r["e"] for r in ranges})  # ascending -end == descending end
    fen = _SuffixMin(len(ends_desc))
    for pos, i in enumerate(order):
        r = ranges[i]
        rank = bisect.bisect_left(ends_desc, -r["e"]) + 1  # ends >= r.end occupy ranks 1..rank
        best = fen.query(rank)
        if best is None:
            r["parent"], r["depth"] = None, 0
        else:
            parent = best[2]
            r["parent"], r["depth"] = parent, ranges[parent]["depth"] + 1
        fen.update(rank, (r["e"] - r["start"], -pos, i))


@pytest.mark.parametrize("path", PARAMS)
def test_nvtx_nesting(real_ws, src, path):
    tid = _tid(real_ws, path)
    ev = _nvtx_events(src, PUSH_POP_TYPES)
    by_thread = defaultdict(list)
    for e in ev:
        e["e"] = INF if e["end"] is None else e["end"]
        by_thread[e["gtid"]].append(e)
    for ranges in by_thread.values():
        _nest(ranges)

    expected = Counter()
    for ranges in by_thread.values():
        for r in ranges:
            p = None if r["parent"] is None else ranges[r["parent"]]
            expected[(_pid(r["gtid"]), _tid_of(r["gtid"]), r["start"],
                      None if r["end"] is None else r["end"] - r["start"], r["name"], r["depth"],
                      None if p is None else p["start"], None if p is None else p["name"])] += 1
    got = _q(real_ws, """
        SELECT r.pid, r.tid, r.ts, r.dur, r.name, r.depth, p.ts AS parent_ts, p.name AS parent_name
        FROM nvtx_range r
        LEFT JOIN nvtx_range p ON p.trace_id = r.trace_id AND p.range_id = r.parent_range_id
        WHERE r.trace_id = ? AND r.style = 'push/pop'""", [tid])
    got_c = Counter((r["pid"], r["tid"], r["ts"], r["dur"], r["name"], r["depth"], r["parent_ts"],
                     r["parent_name"]) for r in got)
    assert sum(got_c.values()) == sum(expected.values()), (
        f"{path}: push/pop ranges: traceql {sum(got_c.values())}, source {sum(expected.values())}")
    max_depth = max((k[5] for k in expected), default=0)
    assert expected == got_c, (
        f"{path}: push/pop depth/parent differ (keys are (pid, tid, ts, dur, name, depth, parent ts, "
        f"parent name); brute-force max depth {max_depth}): {_counter_diff(expected, got_c, limit=4)}")

    flat = _q(real_ws, "SELECT count(*) AS n FROM nvtx_range WHERE trace_id = ? AND style = 'start/end' "
                       "AND (depth <> 0 OR parent_range_id IS NOT NULL)", [tid])[0]["n"]
    assert flat == 0, f"{path}: {flat} start/end ranges with a depth or parent (they are not stacked)"


@pytest.mark.parametrize("path", PARAMS)
def test_nvtx_mark(real_ws, src, path):
    tid = _tid(real_ws, path)
    ev = _nvtx_events(src, (MARK_TYPE,))
    got = _q(real_ws, "SELECT pid, tid, ts, name FROM nvtx_mark WHERE trace_id = ?", [tid])
    assert len(got) == len(ev), f"{path}: nvtx_mark rows: traceql {len(got)}, source {len(ev)}"
    _assert_counter(path, "nvtx_mark (pid, tid, ts, name) rows",
                    Counter((_pid(e["gtid"]), _tid_of(e["gtid"]), e["start"], e["name"]) for e in ev),
                    Counter((r["pid"], r["tid"], r["ts"], r["name"]) for r in got))
