"""What `report --by rank` and `report --by collective` must say about one rank's Nsight Systems
export, computed with Python's sqlite3 over the file alone: its span, and the union of its GPU
operations split into compute, communication and memory, interval by interval."""

from __future__ import annotations

import re
import sqlite3

COMM = re.compile(r"(?i)(nccl|rccl|msccl|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|cross_device_reduce)")


def rows(path, sql, *args):
    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    con.text_factory = lambda b: b.decode("utf-8", "replace")
    try:
        return con.execute(sql, args).fetchall()
    finally:
        con.close()


def tables(path) -> set[str]:
    return {r[0] for r in rows(path, "SELECT name FROM sqlite_master WHERE type = 'table'")}


def kernels(path):
    """(start, end, short name, demangled name) of every kernel."""
    return rows(path, "SELECT k.start, k.end, s.value, d.value FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                      "JOIN StringIds s ON s.id = k.shortName JOIN StringIds d ON d.id = k.demangledName")


def memory_ops(path):
    have = tables(path)
    out = []
    for table in ("CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
        if table in have:
            out += rows(path, f"SELECT start, end FROM {table}")
    return out


def span(path) -> int:
    """Last end minus first start of any kernel, copy, memset, API call (without nsys's
    backtrace duplicates), NVTX range or mark."""
    have = tables(path)
    parts = ["SELECT start, end FROM CUPTI_ACTIVITY_KIND_KERNEL"]
    parts += [f"SELECT start, end FROM {t}" for t in ("CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")
              if t in have]
    parts.append("SELECT start, end FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass <> 67")
    parts.append("SELECT start, coalesce(end, start) FROM NVTX_EVENTS WHERE eventType IN (34, 59, 60)")
    [(lo, hi)] = rows(path, f"SELECT min(start), max(end) FROM ({' UNION ALL '.join(parts)})")
    return hi - lo


def union(intervals):
    out = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def length(merged) -> int:
    return sum(e - s for s, e in merged)


def minus(a, b) -> int:
    """The length of union a outside union b (both merged and sorted)."""
    total, j = 0, 0
    for s, e in a:
        cut = 0
        while j < len(b) and b[j][1] <= s:
            j += 1
        k = j
        while k < len(b) and b[k][0] < e:
            cut += min(e, b[k][1]) - max(s, b[k][0])
            k += 1
        total += (e - s) - cut
    return total


def rank_figures(path) -> dict:
    """span, busy, compute, comm (all), comm exposed, idle of a one-GPU rank file."""
    ks = kernels(path)
    comm = union([(s, e) for s, e, short, name in ks if COMM.search(name)])
    compute = union([(s, e) for s, e, short, name in ks if not COMM.search(name)])
    busy = union([(s, e) for s, e, _, _ in ks] + memory_ops(path))
    total = span(path)
    return {"span_ns": total, "busy_ns": length(busy), "compute_ns": length(compute), "comm_ns": length(comm),
            "comm_exposed_ns": minus(comm, compute), "idle_ns": total - length(busy)}


def collectives(path) -> dict[str, tuple[int, int]]:
    """short name -> (calls, summed duration) of the communication kernels."""
    out: dict[str, tuple[int, int]] = {}
    for s, e, short, name in kernels(path):
        if COMM.search(name):
            n, t = out.get(short, (0, 0))
            out[short] = (n + 1, t + e - s)
    return out
