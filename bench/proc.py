"""The process tree below a PID, from /proc: what the benchmarks measure of commands whose
children (DuckDB's workers, a JVM, Spark's Python workers) nobody waits for."""

from __future__ import annotations

import os


def tree(root: int) -> dict[int, tuple[float, int]]:
    """{pid: (CPU seconds user + sys, resident bytes)} of ROOT and every process below it."""
    children: dict[int, list[int]] = {}
    stats: dict[int, tuple[float, int]] = {}
    tick, page = os.sysconf("SC_CLK_TCK"), os.sysconf("SC_PAGE_SIZE")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            pid = int(entry)
            stats[pid] = ((int(fields[11]) + int(fields[12])) / tick, int(fields[21]) * page)
            children.setdefault(int(fields[1]), []).append(pid)
        except (OSError, ValueError, IndexError):
            continue
    out, todo = {}, [root]
    while todo:
        pid = todo.pop()
        if pid in stats:
            out[pid] = stats[pid]
        todo += children.get(pid, [])
    return out
