"""A trace as a timeline: Chrome trace event JSON that ui.perfetto.dev and chrome://tracing open.

What goes where (the trace event format: complete events "X", async "b"/"e", instants "i",
flows "s"/"f", metadata "M"):

- A CPU thread is the track (pid, tid) with the OS ids. On it: push/pop NVTX ranges and CUDA
  API calls as complete events ("X", cat 'nvtx' and 'cuda_api'), NVTX marks as thread
  instants ("i", cat 'nvtx_mark'). Start/end NVTX ranges may overlap and end on another
  thread, so they are async slices of their process ("b"/"e", cat 'nvtx', id = range_id).
- Each GPU is a process of its own with a synthetic pid (process_name "GPU 0 (NVIDIA A100 ...)"),
  each CUDA stream a thread of it with a synthetic tid (thread_name "Stream 7", and the context
  when the GPU has several). Kernels, copies and memsets are complete events there (cat
  'kernel', 'memcpy', 'memset').
- A flow arrow (cat and name 'launch', id = op_id) leads from each launching API call to its
  GPU operation when both are in the window: "s" inside the call, "f" with "bp": "e" inside
  the operation, so both bind to their enclosing slice.
- Each GPU's memory in use is a counter track of its process ("C" events named 'GPU memory',
  cat 'memory', args allocated and reserved bytes: memory_event's levels, one event per time).
- Viewers drop a complete event that partly overlaps another one on its track (Perfetto counts
  it in slice_drop_overlapping_complete_event). Such an event goes to an extra track of the
  same process instead ("... (overlap 1)"), so no event is lost.
- Synthetic pids and tids count up from 1,000,000,000, skipping every id the trace uses, so
  they never collide with an OS id and fit Perfetto's 32-bit ids.

Times: ts and dur are microseconds. The nanoseconds are the first three decimals and a
fourth decimal 4 (0.4 ns) follows, because Perfetto multiplies by 1000 and truncates: without
it 1234.567 could become 1234566 ns. Round to three decimals (or round(x * 1000)) to get the
exact ns. ts is on the trace clock (ns since the session start for most nsys exports); for
epoch-clock traces the trace's first event is subtracted so that floats keep every ns
(otherData.origin_ns says what was subtracted).

The window: an event is written when it overlaps [start, end) (queries/_internal/timeline.sql states
the rule); events are kept whole. The JSON is written while the rows stream out of DuckDB,
which sorts them in parts of about PART_ROWS rows by start time (see time_parts), so memory
stays flat however large the trace.
"""

from __future__ import annotations

import gzip
import json
import os
import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path

import pyarrow.compute as pc

from traceql.core.version import __version__
from traceql.query import library
from traceql.core.errors import UsageError
from traceql.core.progress import as_progress

SYNTHETIC_BASE = 1_000_000_000
MAX_ID = 2**32 - 1  # Perfetto reads pids and tids as unsigned 32-bit numbers
BATCH_ROWS = 20_000
PART_ROWS = 500_000  # rows DuckDB sorts at once (see time_parts)

_UNITS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
_TIME = re.compile(r"^\s*(\+)?\s*(\d+(?:\.\d*)?|\.\d+)\s*(ns|us|µs|ms|s)?\s*$")


def parse_time(text: str | int | None, option: str = "time") -> tuple[int | None, bool]:
    """'1.5s', '200ms', '20us', '1500' (ns) -> (ns, relative). A leading '+' makes the time
    relative to the trace's first event; without it the time is on the trace clock."""
    if text is None:
        return None, False
    if isinstance(text, int):
        return text, False
    m = _TIME.match(str(text))
    if not m:
        raise UsageError(f"{option} {text}: not a time; give ns (1500000) or a number with a unit "
                         "(ns, us, ms, s: 1.5s, 200ms), optionally after + to count from the trace's start")
    try:
        ns = Decimal(m.group(2)) * _UNITS[m.group(3) or "ns"]
    except InvalidOperation:  # pragma: no cover - the pattern admits only decimals
        raise UsageError(f"{option} {text}: not a time") from None
    return int(ns.to_integral_value()), bool(m.group(1))


@dataclass
class TimelineResult:
    path: Path
    trace_id: int | None  # None for a timeline of several traces (trace_ids)
    start: int | None  # the window on the trace clock (several traces: the UTC axis), in ns (None: open)
    end: int | None
    counts: dict[str, int] = field(default_factory=dict)  # events per kind, and 'flow' arrows
    overlap_tracks: int = 0  # extra tracks made for partly overlapping events
    trace_ids: list[int] = field(default_factory=list)  # several traces in one timeline (traceql.outputs.job_timeline)

    @property
    def events(self) -> int:
        return sum(self.counts.values())


class SyntheticIds:
    """Synthetic pids and tids: from SYNTHETIC_BASE up, skipping ids the trace uses."""

    def __init__(self, used: set[int]):
        self.used = used
        self.next = SYNTHETIC_BASE

    def take(self) -> int:
        while self.next in self.used:
            self.next += 1
        if self.next > MAX_ID:  # pragma: no cover - would need billions of OS ids
            raise UsageError("too many tracks for 32-bit ids")
        self.used.add(self.next)
        self.next += 1
        return self.next - 1


class _Track:
    """A thread or a stream: per lane, the stack of end times of the slices open on it and the
    '"pid":P,"tid":T,' text of its events. A slice that partly overlaps an open slice of a lane
    (starts inside it and ends after it) goes to the next lane."""

    __slots__ = ("stacks", "ids")

    def __init__(self, ids: str):
        self.stacks: list[list[int]] = [[]]
        self.ids = [ids]


def export_perfetto(ws, output, trace_id: int | None = None, start=None, end=None,
                    overwrite: bool = False, progress=None) -> TimelineResult:
    """Write one trace (or its window [start, end)) as Chrome trace event JSON to `output`
    (gzip-compressed when the name ends in .gz). start and end: ns on the trace clock, or
    strings with units ('1.5s', '200ms'; '+1.5s' counts from the trace's first event).
    The file is written under a temporary name and renamed when complete."""
    progress = as_progress(progress)
    trace_id = _pick_trace(ws, trace_id)
    trace = ws.execute("SELECT * FROM trace WHERE trace_id = ?", [trace_id]).to_arrow_table().to_pylist()[0]
    first = trace["start_ts"] or 0
    start_ns, end_ns = window(start, end, first)
    output = checked_output(output, overwrite)

    origin = first if trace["clock"] == "epoch" else 0
    result = TimelineResult(output, trace_id, start_ns, end_ns)
    query = library.get("_internal/timeline")
    params = library.bind(query, {"trace_id": trace_id, "start": start_ns, "end": end_ns, "origin": origin,
                                  "id_base": 0})
    total, parts = time_parts(ws, query, params)
    progress.start(f"writing {output.name}", total)

    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = output.with_name(output.name + ".part")
    opener = gzip.open if output.name.endswith(".gz") else open
    try:
        with opener(tmp, "wt", encoding="utf-8", newline="\n") as out:
            out.write('{"traceEvents":[\n')
            writer = EventWriter(out, ws, trace_id, origin, result)
            write_rows(ws, writer, query, params, parts, progress)
            writer.counters(ws, trace_id, start_ns, end_ns)
            writer.write(writer.names())
            other = {"generator": f"traceql {__version__}", "trace_id": trace["trace_id"], "source": trace["path"],
                     "clock": trace["clock"], "origin_ns": origin, "window_start_ns": start_ns,
                     "window_end_ns": end_ns, "events": result.counts}
            out.write('\n],\n"otherData":' + json.dumps(other) + "}\n")
        os.replace(tmp, output)
    finally:
        if tmp.exists():
            tmp.unlink()
    return result


def write_rows(ws, writer, query, params, parts, progress, done: int = 0) -> int:
    """Stream the rows of the timeline query, part after part, through writer; the rows done."""
    for from_ts, to_ts in parts:
        reader = ws.execute(query.sql, {**params, "from_ts": from_ts, "to_ts": to_ts}).to_arrow_reader(BATCH_ROWS)
        for batch in reader:
            writer.rows(batch)
            done += batch.num_rows
            progress.update(done, detail=f"{done:,} events")
    return done


def time_parts(ws, query, params) -> tuple[int, list[tuple]]:
    """The number of rows, and ranges of start times that split them into parts of about
    PART_ROWS rows. DuckDB sorts each part on its own, so memory follows the part, not the
    trace; the parts follow each other in time, so every track still sees its events in order."""
    sql = query.sql.rstrip().rstrip(";")
    fractions = [i / 64 for i in range(1, 64)]
    total, cuts = ws.execute(f"SELECT count(*), quantile_disc(ts, $fractions) FROM ({sql}) AS t",
                             {**params, "from_ts": None, "to_ts": None, "fractions": fractions}).fetchone()
    parts = min(64, -(-total // PART_ROWS))
    if parts <= 1:
        return total, [(None, None)]
    bounds = sorted({cuts[round(j * 64 / parts) - 1] for j in range(1, parts)})
    edges = [None, *bounds, None]
    return total, list(zip(edges[:-1], edges[1:]))


def _pick_trace(ws, trace_id):
    ids = ws.trace_ids()
    if trace_id is not None:
        ws.check_trace(trace_id)
        return trace_id
    if not ids:
        raise UsageError(f"{ws.path}: no traces yet; ingest one first")
    if len(ids) > 1:
        raise UsageError(f"the workspace holds {len(ids)} traces ({', '.join(map(str, ids))}); "
                         "this timeline shows one: choose it with --trace ID")
    return ids[0]


class EventWriter:
    """Streams the rows of queries/_internal/timeline.sql out as trace events, then the names."""

    def __init__(self, out, ws, trace_id, origin, result: TimelineResult, ids: SyntheticIds | None = None,
                 id_base: int = 0, first: bool = True):
        self.out = out
        self.origin = origin
        self.result = result
        self.id_base = id_base  # added to flow ids (and, in queries/_internal/timeline.sql, async ids)
        q = library.get("_internal/timeline_names")
        names = ws.execute(q.sql, library.bind(q, {"trace_id": trace_id})).to_arrow_table().to_pylist()
        self.threads = {(r["pid"], r["tid"]): r for r in names if r["kind"] == "thread"}
        self.devices = {r["device_id"]: r["name"] for r in names if r["kind"] == "device"}
        used = {v for r in names for v in (r["pid"], r["tid"]) if v is not None}
        self.ids = ids if ids is not None else SyntheticIds(used)
        self.gpu_pid = {d: self.ids.take() for d in sorted(self.devices)}
        self.tracks: dict[tuple, _Track] = {}  # (pid, tid) of a thread, (device, context, stream) of a stream
        self.cpu_pid: dict = {}  # OS pid -> pid written (itself when it fits 32 bits)
        self.cpu_tid: dict = {}  # (pid, tid, lane) -> tid written
        self.streams: dict = {}  # (device, context, stream, lane) -> tid written
        self.api_track: dict[int, str] = {}  # api_id -> ids of its lane, for calls moved to an overlap lane
        self.first = first  # no event written to out yet
        self.counter_devices: set = set()  # GPUs with memory counters written

    # -- ids -----------------------------------------------------------------------------
    def pid_of(self, pid):
        if pid not in self.cpu_pid:
            ok = pid is not None and 0 <= pid <= MAX_ID
            self.cpu_pid[pid] = pid if ok else self.ids.take()
        return self.cpu_pid[pid]

    def lane_ids(self, key: tuple, lane: int) -> str:
        """'"pid":P,"tid":T,' for lane `lane` of the thread (pid, tid) or stream (device, context, stream)."""
        if len(key) == 2:
            pid, tid = key
            ok = lane == 0 and tid is not None and 0 <= tid <= MAX_ID
            t = self.cpu_tid[(pid, tid, lane)] = tid if ok else self.ids.take()
            return f'"pid":{self.pid_of(pid)},"tid":{t},'
        device = key[0]
        if device not in self.gpu_pid:  # a device without a row in the device view
            self.gpu_pid[device] = self.ids.take()
        t = self.streams[(*key, lane)] = self.ids.take()
        return f'"pid":{self.gpu_pid[device]},"tid":{t},'

    def track(self, key: tuple) -> _Track:
        track = self.tracks[key] = _Track(self.lane_ids(key, 0))
        return track

    def overlap(self, key: tuple, track: _Track, start: int, end: int) -> str:
        """Place a slice that does not fit lane 0 of its track: the ids of the lane it goes to."""
        for lane in range(1, len(track.stacks) + 1):
            if lane == len(track.stacks):
                track.stacks.append([])
                track.ids.append(self.lane_ids(key, lane))
            stack = track.stacks[lane]
            while stack and stack[-1] <= start:
                stack.pop()
            if not stack or end <= stack[-1]:
                stack.append(end)
                return track.ids[lane]
        raise AssertionError("unreachable")  # pragma: no cover - a new lane always fits

    # -- events --------------------------------------------------------------------------
    def rows(self, batch) -> None:
        counts = self.result.counts
        for kind, n in zip(*(c.to_pylist() for c in pc.value_counts(batch.column("kind")).flatten())):
            counts[kind] = counts.get(kind, 0) + n
        flows = batch.num_rows - batch.column("api_id").null_count
        if flows:
            counts["flow"] = counts.get("flow", 0) + flows
        cols = [batch.column(name).to_pylist() for name in (
            "section", "kind", "id", "pid", "tid", "device_id", "context_id", "stream_id", "ts", "end_ts",
            "head", "tail", "end_tail", "api_id", "api_pid", "api_tid", "flow_start_tail", "flow_end_tail")]
        tracks, api_track, out = self.tracks, self.api_track, []
        for (section, kind, id_, pid, tid, device, context, stream, ts, end_ts, head, tail, end_tail,
             api_id, api_pid, api_tid, flow_start, flow_end) in zip(*cols):
            key = (pid, tid) if section == 0 else (device, context, stream)
            track = tracks.get(key) or self.track(key)
            if kind == "async":  # a slice of the process, on a track of its own: no lanes
                ids = track.ids[0]
                out.append(head + ids + tail)
                out.append('{"ph":"e"' + head[9:] + ids + end_tail)
                continue
            stack = track.stacks[0]
            while stack and stack[-1] <= ts:
                stack.pop()
            if not stack or end_ts <= stack[-1]:
                stack.append(end_ts)
                ids = track.ids[0]
            else:
                ids = self.overlap(key, track, ts, end_ts)
                if kind == "api":
                    api_track[id_] = ids
            out.append(head + ids + tail)
            if api_id is not None:
                call = api_track.get(api_id)
                if call is None:
                    call = (tracks.get((api_pid, api_tid)) or self.track((api_pid, api_tid))).ids[0]
                fid = id_ + self.id_base
                out.append(f'{{"ph":"s","cat":"launch","name":"launch","id":{fid},{call}{flow_start}')
                out.append(f'{{"ph":"f","bp":"e","cat":"launch","name":"launch","id":{fid},{ids}{flow_end}')
        self.write(out)

    def counters(self, ws, trace_id, start, end) -> None:
        """Each GPU's memory in use as a counter track of the GPU's process (queries/_internal/
        timeline_memory.sql): a "C" event named 'GPU memory' per time a level changes, args
        allocated and (where recorded) reserved bytes."""
        q = library.get("_internal/timeline_memory")
        bound = library.bind(q, {"trace_id": trace_id, "start": start, "end": end, "origin": self.origin})
        for batch in ws.execute(q.sql, bound).to_arrow_reader(BATCH_ROWS):
            out = []
            for device, ts_text, allocated, reserved in zip(*(batch.column(c).to_pylist() for c in (
                    "device_id", "ts_text", "allocated", "reserved"))):
                self.counter_devices.add(device)
                args = f'"allocated":{allocated}' + ("" if reserved is None else f',"reserved":{reserved}')
                out.append(f'{{"ph":"C","cat":"memory","name":"{self.counter_name(device)}",'
                           f'"pid":{self.gpu_process(device)},"ts":{ts_text},"args":{{{args}}}}}')
            self.result.counts["memory"] = self.result.counts.get("memory", 0) + len(out)
            self.write(out)

    def gpu_process(self, device) -> int:
        """The pid written for a GPU (one of its own for a device without a row in the device view)."""
        if device not in self.gpu_pid:
            self.gpu_pid[device] = self.ids.take()
        return self.gpu_pid[device]

    def counter_name(self, device) -> str:
        """The name of a GPU's memory counter: its process is the GPU's own."""
        return "GPU memory"

    def write(self, events: list[str]) -> None:
        if not events:
            return
        self.out.write(("" if self.first else ",\n") + ",\n".join(events))
        self.first = False

    # -- names ---------------------------------------------------------------------------
    def names(self) -> list[str]:
        """The metadata events naming the processes and threads written."""
        meta = []
        name = namer(meta)

        process_names = {}
        for (pid, tid), row in self.threads.items():
            if row["process_name"] and (pid not in process_names or tid == pid):
                process_names[pid] = row["process_name"]
        for rank, (os_pid, pid) in enumerate(sorted(self.cpu_pid.items(), key=lambda kv: none_last(kv[0]))):
            label = process_names.get(os_pid) or ("process ?" if os_pid is None else f"process {os_pid}")
            name("process", pid, None, label, rank)
        for rank, ((os_pid, os_tid, lane), tid) in enumerate(
                sorted(self.cpu_tid.items(), key=lambda kv: (none_last(kv[0][0]), kv[0][1] != kv[0][0],
                                                              none_last(kv[0][1]), kv[0][2]))):
            row = self.threads.get((os_pid, os_tid)) or {}
            label = row.get("name") or ("thread ?" if os_tid is None else f"thread {os_tid}")
            if lane:
                label += f" (overlap {lane})"
                self.result.overlap_tracks += 1
            name("thread", self.pid_of(os_pid), tid, label, rank)
        gpu_rank = len(self.cpu_pid)
        for device, pid in sorted(self.gpu_pid.items(), key=lambda kv: none_last(kv[0])):
            if not any(key[0] == device for key in self.streams) and device not in self.counter_devices:
                continue  # a GPU without work or memory events in the window
            model = self.devices.get(device)
            label = "GPU ?" if device is None else f"GPU {device}"
            name("process", pid, None, f"{label} ({model})" if model else label, gpu_rank + (device or 0))
        contexts: dict = {}
        for device, context, _, _ in self.streams:
            contexts.setdefault(device, set()).add(context)
        for rank, ((device, context, stream, lane), tid) in enumerate(
                sorted(self.streams.items(), key=lambda kv: tuple(none_last(v) for v in kv[0]))):
            label = "stream ?" if stream is None else f"Stream {stream}"
            if len(contexts[device]) > 1:
                label += f" (context {context})"
            if lane:
                label += f" (overlap {lane})"
                self.result.overlap_tracks += 1
            name("thread", self.gpu_pid[device], tid, label, rank)
        return meta


def namer(meta: list[str]):
    """name(kind, pid, tid, value, sort_index): append the name and sort index events of a
    process (tid None) or thread to meta."""

    def name(kind, pid, tid, value, sort_index):
        ids = f'"pid":{pid}' if tid is None else f'"pid":{pid},"tid":{tid}'
        meta.append(f'{{"ph":"M","name":"{kind}_name",{ids},"args":{{"name":{json.dumps(value)}}}}}')
        meta.append(f'{{"ph":"M","name":"{kind}_sort_index",{ids},"args":{{"sort_index":{sort_index}}}}}')

    return name


def none_last(value):
    """Sort None last among numbers."""
    return (value is None, value if value is not None else 0)


def window(start, end, origin: int) -> tuple[int | None, int | None]:
    """--start/--end as ns on the trace clock; a relative time ('+2s') counts from origin."""
    start_ns, start_rel = parse_time(start, "--start")
    end_ns, end_rel = parse_time(end, "--end")
    if start_rel:
        start_ns += origin
    if end_rel:
        end_ns += origin
    if start_ns is not None and end_ns is not None and end_ns <= start_ns:
        raise UsageError(f"--end {end} is not after --start {start}")
    return start_ns, end_ns


def checked_output(output, overwrite: bool) -> Path:
    """The Perfetto file to write: refused when it exists (without overwrite) or is a folder."""
    output = Path(output)
    if output.exists() and not overwrite:
        raise UsageError(f"{output}: exists; use --overwrite to replace it")
    if output.is_dir():
        raise UsageError(f"{output}: is a directory; --format perfetto writes one file")
    return output
