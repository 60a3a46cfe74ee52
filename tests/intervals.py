"""The interval arithmetic the tests' oracles share: unions of [start, end) intervals, their
lengths (optionally clipped to a window), the part of one set not covered by another, and the
intervals that hold each of a list of times (holding). Plain Python over rows read from the
source files, independent of the SQL it checks."""

from __future__ import annotations

import heapq


def union(intervals) -> list[list[int]]:
    """The union of [start, end) intervals as sorted disjoint [start, end] pairs (touching ones joined)."""
    out: list[list[int]] = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def length(intervals, lo=None, hi=None) -> int:
    """The summed length of disjoint intervals (a union), clipped to [lo, hi) when given."""
    return sum(max(0, (e if hi is None else min(e, hi)) - (s if lo is None else max(s, lo))) for s, e in intervals)


def union_length(intervals) -> int:
    """The time covered by at least one of the intervals."""
    return length(union(intervals))


def minus(intervals, cover) -> int:
    """The time covered by INTERVALS and by none of COVER."""
    return union_length(list(intervals) + list(cover)) - union_length(cover)


def gaps(intervals, least=1) -> list[tuple[int, int]]:
    """(start, length) of each hole of at least LEAST between the union's pieces."""
    busy = union(intervals)
    return [(a[1], b[0] - a[1]) for a, b in zip(busy, busy[1:]) if b[0] - a[1] >= least]


def holding(intervals, queries, half_open: bool = False) -> list[list[tuple]]:
    """For each query (s, t, ...) of QUERIES, the INTERVALS (start, end, ...) that hold it: start <= s
    and t <= end (t < end when HALF_OPEN), ordered by start, the longer first, then as given. What
    filtering every interval for every query gives, by a sweep over both in order of start that
    drops the intervals ending before the query starts (they hold no later query either)."""
    items = sorted(intervals, key=lambda iv: iv[0])  # a stable sort: equal starts stay as given
    out: list[list[tuple]] = [[] for _ in queries]
    active: dict[int, tuple] = {}
    ends: list[tuple] = []
    i = 0
    for q in sorted(range(len(queries)), key=lambda q: queries[q][0]):
        s, t = queries[q][0], queries[q][1]
        while i < len(items) and items[i][0] <= s:
            active[i] = items[i]
            heapq.heappush(ends, (items[i][1], i))
            i += 1
        while ends and (ends[0][0] <= s if half_open else ends[0][0] < s):
            del active[heapq.heappop(ends)[1]]
        held = [iv for _, iv in sorted(active.items()) if (t < iv[1] if half_open else t <= iv[1])]
        out[q] = sorted(held, key=lambda iv: (iv[0], -iv[1]))
    return out
