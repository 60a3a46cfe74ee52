"""The interval arithmetic the tests' oracles share: unions of [start, end) intervals, their
lengths (optionally clipped to a window), and the part of one set not covered by another. Plain
Python over rows read from the source files, independent of the SQL it checks."""

from __future__ import annotations


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
