"""What `report --by rank` and `report --by collective` must say about one rank's Nsight Systems
export, computed with Python's sqlite3 over the file alone: its span, and the union of its GPU
operations split into compute, communication and memory, interval by interval."""

from __future__ import annotations

import re

from .intervals import length, minus, union
from .util import source_rows as rows

COMM = re.compile(r"(?i)(nccl|rccl|msccl|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|cross_device_reduce)")


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
    lo, hi = bounds(path)
    return hi - lo


def bounds(path) -> tuple[int, int]:
    """First start and last end of any kernel, copy, memset, API call (without nsys's backtrace
    duplicates), NVTX range or mark."""
    have = tables(path)
    parts = ["SELECT start, end FROM CUPTI_ACTIVITY_KIND_KERNEL"]
    parts += [f"SELECT start, end FROM {t}" for t in ("CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")
              if t in have]
    parts.append("SELECT start, end FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass <> 67")
    parts.append("SELECT start, coalesce(end, start) FROM NVTX_EVENTS WHERE eventType IN (34, 59, 60)")
    [(lo, hi)] = rows(path, f"SELECT min(start), max(end) FROM ({' UNION ALL '.join(parts)})")
    return lo, hi


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


def ranges(path) -> list[tuple[str, int, int, int]]:
    """(name, start, end, globalTid) of every closed push/pop or start/end range, by start."""
    return rows(path, "SELECT coalesce(n.text, s.value), n.start, n.end, n.globalTid FROM NVTX_EVENTS n "
                      "LEFT JOIN StringIds s ON s.id = n.textId "
                      "WHERE n.eventType IN (59, 60) AND n.end IS NOT NULL ORDER BY n.start")


def compute_inside(path) -> dict[tuple[int, int, int], int]:
    """(start, end, globalTid) of each range -> the summed duration of the compute kernels whose
    launch call started inside it (bounds inclusive) on the range's thread."""
    launches = rows(path, "SELECT r.start, r.globalTid, k.end - k.start, d.value FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
                          "JOIN CUPTI_ACTIVITY_KIND_KERNEL k ON k.correlationId = r.correlationId "
                          "AND (k.globalPid >> 24) = (r.globalTid >> 24) "
                          "JOIN StringIds d ON d.id = k.demangledName WHERE r.eventClass <> 67")
    out = {}
    for _, s, e, tid in ranges(path):
        out[(s, e, tid)] = sum(d for start, t, d, name in launches
                               if t == tid and s <= start <= e and not COMM.search(name))
    return out


def straggler(files: dict[int, str], measure: str = "time"):
    """{name: per-name row}, {(name, iteration): per-iteration row} of `report --by straggler`,
    from rank -> file."""
    import statistics

    times: dict[int, dict[str, list[int]]] = {}
    for rank, path in files.items():
        inside = compute_inside(path) if measure == "compute" else None
        per = times[rank] = {}
        for name, s, e, tid in ranges(path):
            per.setdefault(name, []).append(e - s if inside is None else inside[(s, e, tid)])
    names, iterations = {}, {}
    for name in {n for per in times.values() for n in per}:
        have = {r: per[name] for r, per in times.items() if name in per}
        if len(have) < 2:
            continue
        n = min(len(v) for v in have.values())
        for i in range(n):
            values = {r: v[i] for r, v in have.items()}
            slowest = max(values, key=lambda r: (values[r], -r))
            iterations[(name, i + 1)] = dict(ranks=len(values), min_ns=min(values.values()),
                                             median_ns=int(statistics.median(values.values())),
                                             max_ns=values[slowest], slowest_rank=slowest)
        totals = {r: sum(v[:n]) for r, v in have.items()}
        slowest = max(totals, key=lambda r: (totals[r], -r))
        names[name] = dict(ranks=len(have), iterations=n, matched=all(len(v) == n for v in have.values()),
                           min_ns=min(totals.values()), median_ns=int(statistics.median(totals.values())),
                           max_ns=totals[slowest], slowest_rank=slowest,
                           slowest_in=sum(1 for (m, _), row in iterations.items()
                                          if m == name and row["slowest_rank"] == slowest))
    return names, iterations
