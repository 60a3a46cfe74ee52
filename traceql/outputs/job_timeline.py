"""Several traces (the ranks of a job) as one timeline: Chrome trace event JSON for
ui.perfetto.dev and chrome://tracing.

Each trace is one process group of the timeline, named for its rank and host ('rank 3 ·
node01 · trace 4'), sorted by rank: its CPU threads ('python3 · pid 20021', with the tid)
and its GPU streams ('GPU 1 · Stream 7') are threads of that process, every tid synthetic
(from 1,000,000,000 up, one id space for the file), so ranks never share a track even when
their OS pids or device ids are the same. Events, lanes for partly overlapping slices, launch
arrows and the window rule are traceql.outputs.timeline's, trace after trace; so are the GPU
memory counters, one per GPU in its trace's process group ('GPU 0 memory', allocated and
reserved bytes).

Times: every trace goes on the UTC axis (traceql.query.clocks: ts + trace.utc_offset_ns, minus its
host's estimated skew with align_clocks), and the job's first event there is time 0
(otherData.origin_utc_ns says which UTC ns that is). start and end are on that axis: '+1.5s'
counts from the job's first event, a plain number is UTC epoch ns. Traces that are not one job
(traceql.query.jobs: a before and an after run, files of different days) are not drawn on one clock:
each job starts at time 0 (otherData.jobs gives each one's origin), the process groups named
with their job, so a timeline never spans the days between unrelated runs; a trace that
records no UTC start is a job of its own on its own clock. Flow and async-range ids
are a trace's own ids plus its position times ID_STRIDE, unique in the file.
"""

from __future__ import annotations

import gzip
import json
import os

from traceql.core.version import __version__
from traceql.query import library
from traceql.query.clocks import Placement, placements
from traceql.query.jobs import jobs
from traceql.core.errors import UsageError
from traceql.core.progress import as_progress
from traceql.outputs.timeline import (
    TimelineResult, SyntheticIds, namer, time_parts, EventWriter, none_last, checked_output, window, write_rows)

ID_STRIDE = 2**40  # a trace's ids stay below it; times 8192 traces it stays below 2**53 (exact in JSON)


class _RankWriter(EventWriter):
    """A trace's events as threads of one process (its group): every tid synthetic."""

    def __init__(self, out, ws, trace_id, origin, result, ids, id_base, first, group_pid):
        self.group_pid = group_pid
        super().__init__(out, ws, trace_id, origin, result, ids=ids, id_base=id_base, first=first)
        self.gpu_pid = {d: group_pid for d in self.devices}

    def counter_name(self, device) -> str:
        """Every GPU of the trace shares its process group: the counter names the GPU."""
        return "GPU ? memory" if device is None else f"GPU {device} memory"

    def gpu_process(self, device) -> int:
        return self.gpu_pid.setdefault(device, self.group_pid)

    def pid_of(self, pid):
        self.cpu_pid.setdefault(pid, self.group_pid)
        return self.group_pid

    def lane_ids(self, key: tuple, lane: int) -> str:
        t = self.ids.take()
        if len(key) == 2:
            self.cpu_pid.setdefault(key[0], self.group_pid)
            self.cpu_tid[(*key, lane)] = t
        else:
            self.gpu_pid.setdefault(key[0], self.group_pid)
            self.streams[(*key, lane)] = t
        return f'"pid":{self.group_pid},"tid":{t},'

    def names(self, label: str = "", sort_index: int = 0) -> list[str]:
        meta: list[str] = []
        name = namer(meta)
        name("process", self.group_pid, None, label, sort_index)
        rank = 0
        for (os_pid, os_tid, lane), tid in sorted(self.cpu_tid.items(), key=lambda kv: (
                none_last(kv[0][0]), kv[0][1] != kv[0][0], none_last(kv[0][1]), kv[0][2])):
            row = self.threads.get((os_pid, os_tid)) or {}
            text = row.get("name") or "thread"
            text += f" · pid {'?' if os_pid is None else os_pid} · tid {'?' if os_tid is None else os_tid}"
            if lane:
                text += f" (overlap {lane})"
                self.result.overlap_tracks += 1
            name("thread", self.group_pid, tid, text, rank)
            rank += 1
        contexts: dict = {}
        for device, context, _, _ in self.streams:
            contexts.setdefault(device, set()).add(context)
        for (device, context, stream, lane), tid in sorted(self.streams.items(),
                                                           key=lambda kv: tuple(none_last(v) for v in kv[0])):
            model = self.devices.get(device)
            text = ("GPU ?" if device is None else f"GPU {device}") + (f" ({model})" if model else "")
            text += " · " + ("stream ?" if stream is None else f"Stream {stream}")
            if len(contexts[device]) > 1:
                text += f" (context {context})"
            if lane:
                text += f" (overlap {lane})"
                self.result.overlap_tracks += 1
            name("thread", self.group_pid, tid, text, rank)
            rank += 1
        return meta


def export_job_perfetto(ws, output, trace_ids: list[int], start=None, end=None, overwrite: bool = False,
                        align_clocks: bool = False, progress=None) -> TimelineResult:
    """Write the traces TRACE_IDS (or their window [start, end) on the UTC axis) as one
    timeline to `output` (gzip-compressed when the name ends in .gz), each trace a process
    group; with align_clocks, each host's estimated clock skew taken off (see the module doc)."""
    progress = as_progress(progress)
    if len(trace_ids) > 8192:
        raise UsageError(f"{len(trace_ids)} traces: one timeline holds at most 8192")
    found = jobs(ws, trace_ids)
    job_of = {t: j.job for j in found for t in j.trace_ids}
    offsets = dict(ws.execute("SELECT trace_id, utc_offset_ns FROM trace").fetchall())
    # a trace without a UTC start is a job of its own (queries/jobs.sql): it keeps its own clock
    placed = placements(ws, [t for t in trace_ids if offsets.get(t) is not None], align_clocks)
    meta = {t: (rank, host) for t, rank, host in ws.execute("SELECT trace_id, rank, host FROM trace").fetchall()}
    placed += [Placement(t, *meta[t], 0, 0, False)
               for t in trace_ids if offsets.get(t) is None]
    placed.sort(key=lambda p: [j.job for j in found].index(job_of[p.trace_id]))  # job by job, ranks in order
    spans = dict(ws.execute("SELECT trace_id, start_ts FROM trace").fetchall())
    origins: dict[int, int] = {}  # job -> its first event on the axis: time 0 of its traces
    for p in placed:
        at = (spans[p.trace_id] or 0) + p.shift_ns
        origins[job_of[p.trace_id]] = min(origins.get(job_of[p.trace_id], at), at)
    windows = {job: window(start, end, origin) for job, origin in origins.items()}
    origin = min(origins.values())
    start_ns, end_ns = windows[job_of[placed[0].trace_id]]
    output = checked_output(output, overwrite)

    result = TimelineResult(output, None, start_ns, end_ns)
    query = library.get("_internal/timeline")
    plans = []
    total = 0
    for i, p in enumerate(placed):  # each trace's window and origin on its own clock
        shift = p.shift_ns
        job_start, job_end = windows[job_of[p.trace_id]]
        params = library.bind(query, {
            "trace_id": p.trace_id, "start": None if job_start is None else job_start - shift,
            "end": None if job_end is None else job_end - shift, "origin": origins[job_of[p.trace_id]] - shift,
            "id_base": i * ID_STRIDE})
        n, parts = time_parts(ws, query, params)
        total += n
        plans.append((i, p, params, parts))
    progress.start(f"writing {output.name}", total)

    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = output.with_name(output.name + ".part")
    opener = gzip.open if output.name.endswith(".gz") else open
    ids = SyntheticIds(set())
    try:
        with opener(tmp, "wt", encoding="utf-8", newline="\n") as out:
            out.write('{"traceEvents":[\n')
            first, done = True, 0
            for i, p, params, parts in plans:
                writer = _RankWriter(out, ws, p.trace_id, params["origin"], result, ids, i * ID_STRIDE, first,
                                     ids.take())
                done = write_rows(ws, writer, query, params, parts, progress, done)
                writer.counters(ws, p.trace_id, params["start"], params["end"])
                label = " · ".join(filter(None, (
                    f"rank {p.rank}" if p.rank is not None else None, p.host, f"trace {p.trace_id}",
                    f"job {job_of[p.trace_id]}" if len(found) > 1 else None)))
                writer.write(writer.names(label, i))
                first = writer.first
            other = {"generator": f"traceql {__version__}", "traces": [
                         {"trace_id": p.trace_id, "rank": p.rank, "host": p.host, "shift_ns": p.shift_ns,
                          "skew_ns": p.skew_ns, "aligned": p.aligned} for p in placed],
                     "axis": "UTC epoch ns" + (", host clock skew taken off" if align_clocks else "")
                             + ("; each job from its own first event" if len(found) > 1 else ""),
                     "origin_utc_ns": origin, "window_start_ns": start_ns, "window_end_ns": end_ns,
                     "jobs": [{"job": j.job, "trace_ids": j.trace_ids, "origin_utc_ns": origins.get(j.job),
                               "reason": j.reason} for j in found],
                     "events": result.counts}
            out.write('\n],\n"otherData":' + json.dumps(other) + "}\n")
        os.replace(tmp, output)
    finally:
        if tmp.exists():
            tmp.unlink()
    result.trace_ids = [p.trace_id for p in placed]
    return result
