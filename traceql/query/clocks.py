"""Clocks of several traces on one axis: UTC epoch ns.

Every trace records what puts its ts on the UTC axis (trace.utc_offset_ns: the session's UTC
start for session-clock traces, 0 for epoch-clock ones). The clocks of different hosts still
disagree by a residual skew (NTP keeps them within milliseconds, not nanoseconds):
queries/clock.sql estimates each host's from the ends of matching collective kernels, which
happen at one moment on every rank. The estimate is shown (`report --by clock`) and applied
only on request (`export --format perfetto --align-clocks`): nothing stored changes.

On the axis a trace's time ts is at ts + utc_offset_ns - skew_ns (skew_ns 0 unless aligned).
"""

from __future__ import annotations

from dataclasses import dataclass

from traceql.query import library
from traceql.core.errors import UsageError
from traceql.core.results import dicts


@dataclass
class Placement:
    """Where one trace's ts go on the common axis: axis = ts + shift_ns."""
    trace_id: int
    rank: int | None
    host: str | None
    shift_ns: int          # utc_offset_ns - skew_ns
    skew_ns: int           # the residual skew taken off (0 without alignment)
    aligned: bool          # skew estimated and applied (False: no collective matched, or not asked)


def placements(ws, trace_ids: list[int], align: bool) -> list[Placement]:
    """Each trace's shift onto the UTC axis, ordered by rank (traces without one last, then
    by id); with align, minus its clock's estimated skew where one was estimated. Raises
    UsageError for a trace that records no UTC offset (it cannot share an axis)."""
    q = library.get("clock")
    rows = dicts(ws.execute(q.sql, library.bind(q, {"trace_id": None, "per_trace": False})))
    offsets = dict(ws.execute("SELECT trace_id, utc_offset_ns FROM trace").fetchall())
    wanted = set(trace_ids)
    out = []
    for r in rows:
        if r["trace_id"] not in wanted:
            continue
        offset = offsets[r["trace_id"]]
        if offset is None:
            raise UsageError(f"trace {r['trace_id']} records no UTC start (trace.utc_offset_ns is NULL), so its "
                             "times cannot share an axis with other traces; export it alone with --trace "
                             f"{r['trace_id']}")
        skew = r["skew_ns"] if align and r["skew_ns"] is not None else 0
        out.append(Placement(r["trace_id"], r["rank"], r["host"], offset - skew, skew,
                             align and r["skew_ns"] is not None))
    return out
