"""Which traces of a workspace make one job, so that nothing pools unrelated traces silently.

The ranks of one run belong together: their reports pool, their timelines share a clock. A
before and an after run, or files from different machines and days, do not: summing them
gives rows nobody ran (a kernel's calls of two runs added) and a timeline spanning months.
queries/jobs.sql holds the rule (traces that overlap in time on the UTC axis, with no rank
recorded twice and one world size, are one job); this module turns its rows into jobs and
into the warning line a command prints when it pools traces of several jobs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from traceql.query import library
from traceql.core.results import dicts


@dataclass
class Job:
    """One job: its traces in order of their start, and why it begins apart from the others."""
    job: int
    trace_ids: list[int] = field(default_factory=list)
    reason: str | None = None
    gap_ns: int | None = None  # how long after the traces before it ended the job started
    started_ns: dict[int, int | None] = field(default_factory=dict)  # trace -> start after the job's first event


def jobs(ws, trace_ids: list[int] | None = None) -> list[Job]:
    """The jobs of the workspace's traces (or of those of trace_ids), in order of job id."""
    q = library.get("jobs")
    rows = dicts(ws.execute(q.sql, library.bind(q, {"trace_id": None})))
    wanted = None if trace_ids is None else set(trace_ids)
    out: dict[int, Job] = {}
    for r in rows:
        if wanted is not None and r["trace_id"] not in wanted:
            continue
        job = out.setdefault(r["job"], Job(r["job"]))
        job.trace_ids.append(r["trace_id"])
        job.started_ns[r["trace_id"]] = r["started_ns"]
        if r["reason"] is not None and job.reason is None:
            job.reason, job.gap_ns = r["reason"], r["gap_ns"]
    return [out[k] for k in sorted(out)]


def _ids(trace_ids: list[int]) -> str:
    ids = sorted(trace_ids)
    return f"trace {ids[0]}" if len(ids) == 1 else "traces " + ", ".join(map(str, ids))


def _gap(ns: int) -> str:
    for unit, scale in (("days", 86_400e9), ("hours", 3_600e9), ("minutes", 60e9)):
        if ns >= 2 * scale:
            return f"{ns // scale:.0f} {unit}"
    return f"{ns / 1e9:.0f} s"


def describe(found: list[Job]) -> str:
    """Which jobs and why, in a few words: 'each trace is a job of its own: they ran up to 582
    days apart' or 'jobs: traces 1, 2 | trace 3: trace 3 records no UTC start'."""
    if all(len(j.trace_ids) == 1 for j in found):
        groups = "each trace is a job of its own"
    else:
        groups = "jobs: " + " | ".join(_ids(j.trace_ids) for j in found)
    why = []
    gaps = [j.gap_ns for j in found if j.gap_ns is not None]
    if gaps:
        why.append(f"they ran up to {_gap(max(gaps))} apart")
    lone = sorted(t for j in found if j.reason == "no UTC start recorded" for t in j.trace_ids)
    if lone:
        why.append(f"{_ids(lone)} {'records' if len(lone) == 1 else 'record'} no UTC start")
    if any(j.reason and j.reason.startswith("a rank appears") for j in found):
        why.append("a rank appears in two traces of the same time")
    if any(j.reason and j.reason.startswith("world sizes") for j in found):
        why.append("their world sizes differ")
    return groups + (": " + ", ".join(why) if why else "")


def pooling_warning(ws, trace_id: int | None = None, per_trace: bool = False, what: str = "rows",
                    splits: bool = True) -> str | None:
    """The line to print when a command pools traces that are not one job (None when they are
    one job, or when it shows one trace, or splits them per trace); splits: the command has
    --per-trace."""
    if trace_id is not None or per_trace or len(ws.trace_ids()) < 2:  # (one trace: the jobs query not run)
        return None
    found = jobs(ws)
    if len(found) < 2:
        return None
    ids = [t for j in found for t in j.trace_ids]
    hint = "--per-trace splits them by trace, --trace ID shows one" if splits else "--trace ID shows one"
    return f"warning: {_ids(ids)} are not one job ({describe(found)}); the {what} pool them: {hint}"


def split_note(ws, what: str = "one overview per trace") -> str | None:
    """The line a command prints when it keeps the workspace's traces apart because they are
    not one job (`traceql summary`: one overview per trace); None when they are one job."""
    if len(ws.trace_ids()) < 2:  # one trace is one job: the jobs query not run
        return None
    found = jobs(ws)
    if len(found) < 2:
        return None
    ids = [t for j in found for t in j.trace_ids]
    return f"note: {_ids(ids)} are not one job ({describe(found)}): {what}"
