"""Small inputs that used to blow up ingest (fixtures/gen_torch.py pathological()): every
correlationId = 1 (66 s, 3.2 GB for a 3 MB file: every operation was paired with every call of
its id), 20,000 nested pushes (out of memory: paths and (call, level) pairs quadratic in the
depth), 5,000 pushes never popped (117 s, 36.6 M op_range rows). Each must now ingest as a CLI
child process in seconds with bounded memory, say what was odd in ingest_stats, and attribute
exactly what the rule says for the ranges above the depth cap.

The bounds below (60 s, 1.5 GB) are far above what these inputs take (about 1-2 s and 0.4 GB
on the 2-core benchmark machine) and far below what the quadratic versions took: they catch a
return of the blow-up, not a slow machine. Speed itself is measured in bench/."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

import traceql
from fixtures.gen_torch import pathological
from traceql.core.settings import NVTX_DEPTH_CAP

from ..brute_attribution import attribution
from ..util import REPO


def ingest_child(src, db):
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "traceql", "--db", str(db), "ingest", str(src)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    _, status, usage = os.wait4(proc.pid, 0)
    secs = time.perf_counter() - started
    out, err = proc.stdout.read(), proc.stderr.read()
    assert os.waitstatus_to_exitcode(status) == 0, err
    return secs, usage.ru_maxrss * 1024, out + err


@pytest.mark.parametrize("kind, warnings", [
    ("same_correlation", {"launch.shared_correlation_ids"}),
    ("deep_nesting", {"nvtx_range.beyond_depth_cap"}),
    ("unclosed", {"nvtx_range.unclosed", "nvtx_range.beyond_depth_cap"}),
])
def test_pathological_input_ingests_in_seconds(tmp_path, kind, warnings):
    src = tmp_path / f"{kind}.sqlite"
    expected = pathological(src, kind)
    assert src.stat().st_size < 4_000_000
    db = tmp_path / "ws.duckdb"
    secs, rss, output = ingest_child(src, db)
    assert secs < 60 and rss < 1.5e9, (secs, rss)
    with traceql.open(db) as ws:
        stats = {r["key"]: r for r in ws.sql("SELECT key, value, severity, detail FROM ingest_stats").to_pylist()}
        got = {}
        for r in ws.sql("""
                SELECT n.pid, n.tid, n.ts, n.ts + n.dur AS rend, n.name, n.depth,
                       coalesce(g.own_kernel_ns, 0) AS own, coalesce(g.other_kernel_ns, 0) AS other
                FROM nvtx_range n LEFT JOIN range_gpu g USING (trace_id, range_id)""").to_pylist():
            got[(r["pid"], r["tid"], r["ts"], r["rend"], r["name"])] = (r["depth"], r["own"], r["other"])
        pairs = ws.sql("SELECT count(*) AS n FROM op_range").to_pylist()[0]["n"]
        longest_path = ws.sql("SELECT max(length(path)) AS n FROM nvtx_range").to_pylist()[0]["n"]
        unattributed = ws.sql("SELECT coalesce(sum(kernel_ns), 0) AS ns FROM unattributed_gpu").to_pylist()[0]["ns"]
    for key in warnings:
        assert stats[key]["severity"] == "warning", key
    assert {k for k, r in stats.items() if r["severity"] == "warning"} == warnings
    # the rule, brute force, for every range above the cap; deeper ones hold nothing by design
    want = attribution(src)
    for key, w in want["ranges"].items():
        depth, own, other = got[key]
        if depth < NVTX_DEPTH_CAP:
            assert (own, other) == (w.own_kernel_ns, w.other_kernel_ns), key
        else:
            assert (own, other) == (0, 0), key
    assert unattributed == want["unattributed"]["kernel_ns"]
    deep = sum(1 for d, _, _ in got.values() if d >= NVTX_DEPTH_CAP)
    if deep:
        assert stats["nvtx_range.beyond_depth_cap"]["value"] == deep
    # bounded: at most the cap's levels per GPU operation, paths at most the cap's names long
    assert pairs <= NVTX_DEPTH_CAP * expected["kernels"] * 2
    assert longest_path < 64 * 1000
