"""Tests for fixtures/gen_torch.py (PyTorch-shaped synthetic nsys exports) and for the
brute-force attribution check in tests/brute_attribution.py.

The generator's expected attribution, accumulated while generating, must equal the brute force
over the written file, for every PyTorch NVTX generation and every pathological kind; the file's
shape (threads, correlation ids, start/end ranges, row order, seq pairing, strings) is checked
with plain sqlite3."""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import subprocess
import sys
from collections import defaultdict

import pytest

from fixtures.gen_torch import (GENERATIONS, PATHOLOGIES, STEP_KERNELS, _count_kernels, _model, generate,
                                pathological)

from ..brute_attribution import attribution, by_name, grouping_name
from ..util import REPO

MASK = 0xFFFFFF


def _connect(path) -> sqlite3.Connection:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    con.text_factory = lambda b: b.decode("utf-8", "replace")
    return con


def _one(con, sql, *args):
    return con.execute(sql, args).fetchone()[0]


def _ranges(con):
    """(start, end, eventType, name, pid, tid, end_tid) of every NVTX range."""
    return con.execute("""
        SELECT n.start, n."end", n.eventType, coalesce(n.text, s.value), (n.globalTid >> 24) & 16777215,
               n.globalTid & 16777215, n.endGlobalTid & 16777215
        FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId
        WHERE n.eventType IN (59, 60) ORDER BY n.start""").fetchall()


@pytest.fixture(scope="module", params=GENERATIONS)
def torch_file(request, tmp_path_factory):
    gen = request.param
    path = tmp_path_factory.mktemp("torch") / f"{gen}.sqlite"
    exp = generate(path, kernels=2503, seed=11, generation=gen)
    con = _connect(path)
    yield gen, path, exp, con
    con.close()


@pytest.fixture(scope="module", params=PATHOLOGIES)
def patho_file(request, tmp_path_factory):
    kind = request.param
    path = tmp_path_factory.mktemp("patho") / f"{kind}.sqlite"
    exp = pathological(path, kind, seed=5)
    yield kind, path, exp


# ---------------------------------------------------------------------------
# expected attribution == brute force over the file
# ---------------------------------------------------------------------------

def _check_attribution(path, exp):
    brute = attribution(path)
    got = by_name(brute)
    want = exp["attribution"]["by_name"]
    assert set(got) == set(want)
    for name in want:
        assert got[name] == want[name], name
    assert brute["unattributed"] == exp["attribution"]["unattributed"]
    assert brute["ops_without_launch"] == 0
    assert brute["kernels"] == exp["kernels"]
    assert brute["kernel_ns"] == exp["kernel_dur_sum"]
    assert sum(w.instances for w in brute["ranges"].values()) == exp["nvtx_ranges"]
    return brute, got


def test_attribution_matches_brute_force(torch_file):
    gen, path, exp, _ = torch_file
    _, got = _check_attribution(path, exp)
    bw = got["Backward"]
    assert exp["attribution"]["backward_kernel_ns"] == bw["own_kernel_ns"] + bw["other_kernel_ns"] > 0
    # the autograd thread launches the backward kernels: 26 of a step's 27 are 'other'
    assert bw["other_kernels"] > 20 * bw["own_kernels"] > 0
    assert bw["other_kernel_ns"] > 5 * bw["own_kernel_ns"]
    # work of every thread lands in the unclosed 'training' range: all but the 6 init kernels
    tr = got["training"]
    assert (tr["instances"], tr["own_kernels"] + tr["other_kernels"]) == (2, exp["kernels"] - 6)
    assert exp["attribution"]["unattributed"]["kernels"] == 6
    # data_wait (loader thread) holds only other threads' kernels
    assert got["data_wait"]["own_kernels"] == 0 < got["data_wait"]["other_kernels"]


def test_pathological_attribution_matches_brute_force(patho_file):
    kind, path, exp = patho_file
    brute, got = _check_attribution(path, exp)
    assert exp["kernels"] == 3000
    if kind == "deep_nesting":
        assert exp["pushpop_ranges"] == 20_000
        assert max(d for p in exp["per_process"].values() for d in p["max_pushpop_depth"].values()) == 20_000
        deepest = max(brute["ranges"], key=lambda k: k[2])  # the last push holds the deepest-level work
        assert brute["ranges"][deepest].own_kernels > 1000
        assert all(w.other_kernels == 100 for w in brute["ranges"].values())
    elif kind == "unclosed":
        assert exp["unclosed_ranges"] == exp["pushpop_ranges"] == 5_000
        assert all(k[3] is None for k in brute["ranges"])
        assert got["open"]["other_kernels"] > 0
    else:
        con = _connect(path)
        for table in ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY"):
            assert con.execute(f"SELECT DISTINCT correlationId FROM {table}").fetchall() == [(1,)]
        assert _one(con, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass = 67") > 0
        con.close()
        assert exp["attribution"]["unattributed"]["kernels"] > 0
    con = _connect(path)
    size = _one(con, "PRAGMA page_count") * _one(con, "PRAGMA page_size")
    con.close()
    assert size < 4_000_000


# ---------------------------------------------------------------------------
# the file's shape
# ---------------------------------------------------------------------------

def test_exact_counts(torch_file):
    _, _, exp, con = torch_file
    assert exp["kernels"] == 2503
    q = {
        "kernels": "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL",
        "memcpy": "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY",
        "memset": "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMSET",
        "api_calls": "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass <> 67",
        "runtime_rows": "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME",
        "backtrace_rows": "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass = 67",
        "driver_calls": "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass = 1",
        "nvtx_rows": "SELECT count(*) FROM NVTX_EVENTS",
        "pushpop_ranges": "SELECT count(*) FROM NVTX_EVENTS WHERE eventType = 59",
        "startend_ranges": "SELECT count(*) FROM NVTX_EVENTS WHERE eventType = 60",
        "unclosed_ranges": 'SELECT count(*) FROM NVTX_EVENTS WHERE "end" IS NULL',
        "cross_thread_ranges": "SELECT count(*) FROM NVTX_EVENTS WHERE endGlobalTid IS NOT NULL "
                               "AND endGlobalTid <> globalTid",
        "kernel_dur_sum": 'SELECT sum("end" - start) FROM CUPTI_ACTIVITY_KIND_KERNEL',
        "memcpy_dur_sum": 'SELECT sum("end" - start) FROM CUPTI_ACTIVITY_KIND_MEMCPY',
        "memset_bytes_sum": "SELECT sum(bytes) FROM CUPTI_ACTIVITY_KIND_MEMSET",
        "processes": "SELECT count(*) FROM PROCESSES",
        "string_ids": "SELECT count(*) FROM StringIds",
    }
    assert {k: _one(con, sql) for k, sql in q.items()} == {k: exp[k] for k in q}
    assert exp["cross_thread_ranges"] == exp["steps"] + 2  # one data_wait per step, plus the first batch's
    assert exp["unclosed_ranges"] == 2
    got = dict(con.execute("""SELECT s.value, count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k
                              JOIN StringIds s ON s.id = k.demangledName GROUP BY 1"""))
    assert got == exp["kernel_count_by_name"]
    got = dict(con.execute("""SELECT s.value, count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r
                              JOIN StringIds s ON s.id = r.nameId WHERE eventClass <> 67 GROUP BY 1"""))
    assert got == exp["api_count_by_name"]
    for pid, pp in exp["per_process"].items():
        assert _one(con, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE (globalPid >> 24) & 16777215 = ?",
                    pid) == pp["kernels"]


@pytest.mark.parametrize("n", [0, 1, STEP_KERNELS, STEP_KERNELS + 1, 2 * STEP_KERNELS + 13])
def test_exact_kernel_count_small(tmp_path, n):
    path = tmp_path / "k.sqlite"
    exp = generate(path, kernels=n, seed=n, generation="legacy")
    con = _connect(path)
    assert _one(con, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL") == exp["kernels"] == n
    con.close()
    _check_attribution(path, exp)


def test_step_kernels():
    fwd, bwd, seed_grad, opt, item = _model()
    counts = (_count_kernels(fwd), _count_kernels([seed_grad]), sum(_count_kernels(n[3]) for n in bwd),
              _count_kernels(opt), _count_kernels([item]))
    assert counts == (10, 1, 26, 4, 0) and sum(counts) == STEP_KERNELS


def test_threads_and_processes(torch_file):
    _, _, exp, con = torch_file
    names = con.execute("""SELECT (t.globalTid >> 24) & 16777215, t.globalTid & 16777215, s.value
                           FROM ThreadNames t JOIN StringIds s ON s.id = t.nameId ORDER BY 1, 2""").fetchall()
    assert names == [(5151, 5151, "python3"), (5151, 5158, "pt_autograd_0"), (5151, 5162, "pt_data_loader"),
                     (5252, 5252, "python3"), (5252, 5259, "pt_autograd_0"), (5252, 5263, "pt_data_loader")]
    assert [(t["pid"], t["tid"], t["name"]) for t in exp["threads"]] == names
    assert _one(con, "SELECT count(*) FROM ThreadNames t JOIN StringIds s ON s.id = t.nameId "
                     "WHERE s.value = 'pt_autograd_0'") == 2
    # every thread of the file has API calls and NVTX ranges
    for table in ("CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS"):
        assert {r[0] for r in con.execute(f"SELECT DISTINCT globalTid FROM {table}")} == \
            {t["globalTid"] for t in exp["threads"]}


def test_correlation_ids_restart_per_process(torch_file):
    _, _, exp, con = torch_file
    per = defaultdict(list)
    for gtid, corr in con.execute("SELECT globalTid, correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME "
                                  "WHERE eventClass <> 67"):
        per[(gtid >> 24) & MASK].append(corr)
    assert set(per) == {5151, 5252}
    for pid, ids in per.items():
        assert sorted(ids) == list(range(1, len(ids) + 1))  # unique and dense within a process
        assert exp["per_process"][pid]["max_correlation_id"] == len(ids)
    reused = set(per[5151]) & set(per[5252])
    assert len(reused) == min(len(per[5151]), len(per[5252]))
    # GPU rows use the same ids, each with a launching call of its own process
    for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
        assert _one(con, f"""SELECT count(*) FROM {table} g WHERE NOT EXISTS (
                SELECT 1 FROM CUPTI_ACTIVITY_KIND_RUNTIME r WHERE r.correlationId = g.correlationId
                AND (r.globalTid >> 24) & 16777215 = (g.globalPid >> 24) & 16777215 AND r.eventClass <> 67)""") == 0


def test_start_end_ranges_cross_threads_and_overlap(torch_file):
    _, _, exp, con = torch_file
    rows = _ranges(con)
    waits = [r for r in rows if r[3] == "data_wait"]
    steps = [r for r in rows if r[3] == "train_step"]
    assert len(waits) == exp["steps"] + 2
    for s, e, et, _, pid, tid, end_tid in waits:
        assert (et, tid, end_tid) == (60, pid + 11, pid)  # started by the loader, ended by the main thread
    # each step's data_wait starts inside one train_step and ends inside the next one
    by_pid = defaultdict(list)
    for r in steps:
        by_pid[r[4]].append(r)
    starts_inside = sum(1 for w in waits for st in by_pid[w[4]] if st[0] < w[0] < st[1] < w[1])
    ends_inside = sum(1 for w in waits for st in by_pid[w[4]] if w[0] < st[0] < w[1] < st[1])
    assert starts_inside == ends_inside == exp["steps"]
    # the loader starts data_wait while a launch call of the main thread is in flight
    straddled = _one(con, """SELECT count(*) FROM NVTX_EVENTS n JOIN StringIds s ON s.id = n.textId
        JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON (r.globalTid >> 24) = (n.globalTid >> 24) AND r.eventClass <> 67
        AND r.start < n.start AND n.start < r."end" WHERE s.value = 'data_wait'""")
    assert straddled == exp["steps"] + 2
    assert _one(con, "SELECT count(*) FROM NVTX_EVENTS WHERE eventType = 60 AND endGlobalTid IS NULL") > 0


def test_rows_in_start_order(tmp_path):
    path = tmp_path / "order.sqlite"
    generate(path, kernels=30_000, seed=2)  # > 256 steps per process: many partial flushes
    con = _connect(path)
    for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_MEMCPY",
                  "CUPTI_ACTIVITY_KIND_MEMSET", "NVTX_EVENTS"):
        assert _one(con, f"""SELECT count(*) FROM (SELECT start, lag(start) OVER (ORDER BY rowid) AS prev
                              FROM {table}) WHERE start < prev""") == 0, table
    con.close()


def test_autograd_work_inside_backward_window(torch_file):
    gen, _, exp, con = torch_file
    rows = _ranges(con)
    windows = defaultdict(list)
    for s, e, et, name, pid, tid, _ in rows:
        if name == "Backward":
            windows[pid].append((s, e))
    calls = con.execute("""SELECT (globalTid >> 24) & 16777215, globalTid & 16777215, start, "end"
                           FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass <> 67""").fetchall()
    auto = [c for c in calls if c[1] == c[0] + 7]
    assert len(auto) > 20 * exp["steps"]
    assert all(any(s <= c[2] and c[3] <= e for s, e in windows[c[0]]) for c in auto)
    # inside Backward the main thread launches only the seed gradient's fill kernel (none in a
    # process's last step when its kernel budget ran out before it)
    main_in_bwd = sum(1 for c in calls if c[1] == c[0] and any(s <= c[2] and c[3] <= e for s, e in windows[c[0]]))
    n_windows = sum(len(w) for w in windows.values())
    assert n_windows == exp["steps"]
    assert n_windows - 2 <= main_in_bwd <= n_windows
    # the fill_ range starts and ends exactly with its launch call, and holds it
    tight = _one(con, """SELECT count(*) FROM NVTX_EVENTS n JOIN CUPTI_ACTIVITY_KIND_RUNTIME r
        ON r.globalTid = n.globalTid AND r.start = n.start AND r."end" = n."end" AND r.eventClass <> 67
        WHERE n.eventType = 59""")
    assert tight == main_in_bwd
    fill = "fill_" if gen == "1.0" else "aten::fill_"
    assert exp["attribution"]["by_name"][fill]["own_kernels"] == main_in_bwd


SEQ = {"1.0": (re.compile(r"^(?P<name>\w+), seq=(?P<seq>\d+)$"),
               re.compile(r"^(?P<name>\w+Backward), stashed seq=(?P<seq>\d+)$")),
       "legacy": (re.compile(r"^aten::(?P<name>\w+), seq = (?P<seq>\d+)(?:, sizes = .*)?$"),
                  re.compile(r"^(?P<name>\w+Backward0), seq = (?P<seq>\d+)(?:, sizes = .*)?$")),
       "observer": (re.compile(r"^aten::(?P<name>\w+), seq = (?P<seq>\d+), op_id = \d+(?:, sizes = .*)?$"),
                    re.compile(r"^(?P<name>\w+Backward0), seq = (?P<seq>\d+), op_id = \d+(?:, sizes = .*)?$"))}


def test_backward_nodes_repeat_forward_seq(torch_file):
    gen, _, exp, con = torch_file
    fwd_re, node_re = SEQ[gen.split("-")[0]]
    fwd, nodes = defaultdict(set), defaultdict(list)
    for s, e, et, name, pid, tid, _ in _ranges(con):
        m = node_re.match(name)
        if m:
            assert tid == pid + 7
            nodes[pid].append(int(m["seq"]))
            continue
        m = fwd_re.match(name)
        if m and tid == pid:
            fwd[pid].add(int(m["seq"]))
    for pid in (5151, 5252):
        assert len(nodes[pid]) >= 12 * (exp["steps"] // 2 - 1)
        assert set(nodes[pid]) <= fwd[pid]


def test_generation_strings(torch_file):
    gen, _, exp, con = torch_file
    names = [r[3] for r in _ranges(con)]
    text = "\n".join(names)
    users = {"train_step", "Forward", "Backward", "Optimizer", "fwd_bwd", "data_wait", "pin_memory", "training"}
    assert users <= set(names)
    if gen == "1.0":
        assert "addmm, seq=1" in names and re.search(r"^AddmmBackward, stashed seq=\d+$", text, re.M)
        assert "mm, seq=0" in names and "aten::" not in text and "evaluate_function" not in text
    else:
        assert "autograd::engine::evaluate_function: AddmmBackward0" in {grouping_name(n) for n in names}
    if gen == "legacy":
        assert "aten::addmm, seq = 1" in names and "aten::mm" in names and "op_id" not in text
    if gen == "legacy-shapes":
        assert "aten::addmm, seq = 1, sizes = [[120], [32, 400], [400, 120], [], []]" in names
        dropped = [n for n in names if n.startswith(", sizes = [")]
        assert dropped and ", sizes = [[], []]" in dropped  # _foreach ops: lists printed as []
        assert exp["attribution"]["by_name"][""]["instances"] == len(dropped)
    if gen.startswith("observer"):
        assert "op_id = " in text and "seq=" not in text
        assert re.search(r"^aten::mm, op_id = \d+(, sizes = .*)?$", text, re.M)
        assert re.search(r"^FSDP::post_forward \(encoder\.block\.0\), op_id = \d+$", text, re.M)
        for pid in (5151, 5252):  # op_id: process-unique, increasing in start order
            ids = [int(m.group(1)) for s, e, et, n, p, *_ in _ranges(con) if p == pid
                   for m in [re.search(r", op_id = (\d+)", n)] if m]
            assert ids == sorted(ids) and len(set(ids)) == len(ids) and ids[0] == 1
    if gen == "observer-shapes":
        assert re.search(r", sizes = \[\[120\], \[32, 400\], \[400, 120\], \[\], \[\]\], "
                         r"input_op_ids = \[\(\d+,0\)(, \(0,-1\)){4}\]$", text, re.M)
    # one row per operator after grouping
    groups = set(exp["attribution"]["by_name"])
    assert {grouping_name(n) for n in names} == groups
    assert len(groups) < 80


def test_deterministic(tmp_path):
    digest = []
    for i, seed in enumerate((4, 4, 5)):
        path = tmp_path / f"d{i}.sqlite"
        exp = generate(path, kernels=700, seed=seed, generation="observer-shapes")
        digest.append((hashlib.sha256(path.read_bytes()).hexdigest(), json.dumps(exp, sort_keys=True, default=str)))
    assert digest[0] == digest[1] != digest[2]


def test_layout_2(tmp_path):
    path = tmp_path / "v2.sqlite"
    exp = generate(path, kernels=500, layout="2", generation="legacy")
    con = _connect(path)
    assert _one(con, "SELECT count(*) FROM sqlite_master WHERE name = 'EXPORT_META_DATA'") == 1
    con.close()
    _check_attribution(path, exp)


def test_cli(tmp_path):
    out, js = tmp_path / "cli.sqlite", tmp_path / "cli.json"

    def run(*args):
        return subprocess.run([sys.executable, "-m", "fixtures.gen_torch", *args], cwd=REPO,
                              capture_output=True, text=True, timeout=120)

    r = run("--kernels", "300", "-o", str(out), "--generation", "legacy-shapes", "--expected-json", str(js))
    assert r.returncode == 0, r.stderr
    assert "300 kernels" in r.stderr
    exp = json.loads(js.read_text())
    assert exp["kernels"] == 300 and exp["generation"] == "legacy-shapes"
    assert by_name(attribution(out)) == exp["attribution"]["by_name"]
    r = run("--kernels", "300", "-o", str(out))
    assert r.returncode == 1 and "exists" in r.stderr
    r = run("--pathological", "unclosed", "-o", str(out), "--force", "-q", "--expected-json", str(js))
    assert r.returncode == 0 and r.stderr == ""
    assert json.loads(js.read_text())["unclosed_ranges"] == 5000
    assert run("--generation", "2.0", "-o", str(tmp_path / "x.sqlite")).returncode == 2


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError):
        generate(tmp_path / "a.sqlite", generation="0.4")
    with pytest.raises(ValueError):
        pathological(tmp_path / "a.sqlite", "nope")
    with pytest.raises(ValueError):
        generate(tmp_path / "a.sqlite", kernels=-1)
    generate(tmp_path / "a.sqlite", kernels=5)
    with pytest.raises(FileExistsError):
        generate(tmp_path / "a.sqlite", kernels=5)
    assert [p.name for p in tmp_path.iterdir()] == ["a.sqlite"]


# ---------------------------------------------------------------------------
# the brute force itself, on files written by hand
# ---------------------------------------------------------------------------

def G(pid, tid=None):
    return (1 << 48) | (pid << 24) | (pid if tid is None else tid)


def test_grouping_name():
    cases = {
        "aten::addmm, seq = 5, op_id = 17": "aten::addmm",
        "addmm, seq=5": "addmm",
        "AddmmBackward, stashed seq=5": "AddmmBackward",
        ", sizes = [[32, 400], [400, 120]]": "",
        "aten::addmm, seq = 5, sizes = [[32, 400], [400, 120]]": "aten::addmm",
        "aten::mm, op_id = 18": "aten::mm",
        "FSDP::post_forward (encoder.block.0), op_id = 7": "FSDP::post_forward (encoder.block.0)",
        "aten::addmm, seq = 5, op_id = 17, sizes = [[120], [], []], input_op_ids = [(12,0), (0,-1)]": "aten::addmm",
        "aten::cat, op_id = 3, sizes = [[2, 3], [2, 3]], input_op_ids = []": "aten::cat",
        "train, step 3": "train, step 3",
        "x, seq = y": "x, seq = y",
        "Forward": "Forward",
    }
    assert {k: grouping_name(k) for k in cases} == cases
    assert grouping_name(None) is None


def test_brute_force_rules(tmp_path):
    """Text vs textId, NULL end, eventClass 67, a call straddling a range end, shared keys,
    another process, an op without a call, missing MEMCPY/MEMSET tables and endGlobalTid."""
    path = tmp_path / "hand.sqlite"
    con = sqlite3.connect(path)
    con.executescript(f"""
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT);
        INSERT INTO StringIds VALUES (1, 'reg');
        CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INT, "end" INT, eventClass INT, globalTid INT,
            correlationId INT, nameId INT);
        INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES
            (100, 110, 0, {G(1)}, 1, 0),  (90, 200, 67, {G(1)}, 1, 0),
            (300, 310, 0, {G(1, 2)}, 2, 0),
            (490, 510, 0, {G(1)}, 3, 0),
            (600, 610, 1, {G(1)}, 4, 0), (620, 630, 0, {G(1)}, 4, 0), (700, 710, 0, {G(1)}, 4, 0),
            (100, 110, 0, {G(2)}, 1, 0);
        CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT, "end" INT, globalPid INT, correlationId INT);
        INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES
            (120, 130, {G(1, 0)}, 1), (320, 350, {G(1, 0)}, 2), (520, 600, {G(1, 0)}, 3),
            (615, 616, {G(1, 0)}, 4), (640, 642, {G(1, 0)}, 4), (720, 724, {G(1, 0)}, 4),
            (130, 135, {G(2, 0)}, 1), (900, 999, {G(1, 0)}, 99);
        CREATE TABLE NVTX_EVENTS (start INT, "end" INT, eventType INT, text TEXT, globalTid INT, textId INT);
        INSERT INTO NVTX_EVENTS VALUES
            (50, 500, 59, 'outer', {G(1)}, NULL),
            (95, 115, 60, NULL, {G(1)}, 1),
            (250, NULL, 59, 'open, seq = 3', {G(1, 2)}, NULL),
            (610, 705, 59, 'late', {G(1)}, NULL),
            (100, 110, 59, 'exact', {G(1)}, NULL),
            (0, 1000, 59, 'other process', {G(2)}, NULL),
            (0, 1000, 34, 'a mark', {G(1)}, NULL);
    """)
    con.close()
    r = attribution(path)
    assert r["ranges"] == {
        # corr 1 [100,110]: own; 67 duplicate ignored. corr 2 on thread 2: other. corr 3 ends after 500.
        (1, 1, 50, 500, "outer"): (1, 10, 30, 1, 1),
        (1, 1, 95, 115, "reg"): (1, 10, 0, 1, 0),
        # thread 2's unclosed range: its own kernel, then the main thread's from 490 on
        # corr 4: op at 615 -> runtime call? none at or before 615 -> driver call (600); op at 640 -> runtime 620;
        # op at 720 -> runtime 700
        (1, 2, 250, None, "open, seq = 3"): (1, 30, 80 + 1 + 2 + 4, 1, 4),
        (1, 1, 610, 705, "late"): (1, 2, 0, 1, 0),
        (1, 1, 100, 110, "exact"): (1, 10, 0, 1, 0),  # bounds are inclusive
        (2, 2, 0, 1000, "other process"): (1, 5, 0, 1, 0),
    }
    assert r["unattributed"] == {"ops": 1, "kernels": 1, "kernel_ns": 99, "memcpy_ns": 0, "memset_ns": 0}
    assert r["ops_without_launch"] == 1
    assert by_name(r)["open"] == {"instances": 1, "own_kernel_ns": 30, "other_kernel_ns": 87,
                                  "own_kernels": 1, "other_kernels": 4}
    assert attribution(path, event_types=(60,))["ranges"] == {(1, 1, 95, 115, "reg"): (1, 10, 0, 1, 0)}


def test_brute_force_invalid_utf8_and_missing_tables(tmp_path):
    path = tmp_path / "bad.sqlite"
    con = sqlite3.connect(path)
    con.executescript(f"""
        CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT, "end" INT, globalPid INT, correlationId INT);
        INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (10, 20, {G(1, 0)}, 1);
        CREATE TABLE NVTX_EVENTS (start INT, "end" INT, eventType INT, text TEXT, globalTid INT);
        INSERT INTO NVTX_EVENTS VALUES (0, 100, 59, CAST(X'61FF62' AS TEXT), {G(1)});
    """)
    con.close()
    r = attribution(path)
    assert r["ranges"] == {(1, 1, 0, 100, "a\ufffdb"): (1, 0, 0, 0, 0)}
    assert r["unattributed"]["kernels"] == 1 and r["ops_without_launch"] == 1
