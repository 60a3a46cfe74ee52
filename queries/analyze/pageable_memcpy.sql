-- analyze/pageable_memcpy: asynchronous copies (cudaMemcpyAsync and the like) to or from pageable host memory, which the driver performs synchronously: the calling thread is blocked while the data is staged, and the copy cannot overlap other work. Each costs what pinned memory would save, the copy's own time, never the time its call waited for earlier GPU work (a synchronization: sync_calls).
-- param trace_id: only this trace (NULL: every trace in the workspace)
-- param min_call_ns: a copy counts when its launching call took at least this long, in ns
-- default min_call_ns: 0
-- param max_read_bytes: a device-to-host copy of at most this many bytes is a host read (.item(), .tolist(), .cpu() of a small tensor): its call's time is the wait for the GPU work queued before it, a synchronization that sync_calls reports, and it is left out here
-- default max_read_bytes: 65536
-- advice: Allocate the host buffers as pinned (page-locked) memory: cudaMallocHost / cudaHostAlloc, torch's pin_memory() or DataLoader(pin_memory=True), then copy with non_blocking=True; the copy then runs asynchronously and can overlap compute.
-- finding: copy, copies
-- group: copy_kind
-- total: bytes
-- show: at_ns, call_ns, copy_ns, bytes, range_path
-- column trace_id: trace (trace.trace_id)
-- column copy_kind: direction of the copy (memcpy.copy_kind)
-- column src_kind: memory kind of the source (memcpy.src_kind)
-- column dst_kind: memory kind of the destination (memcpy.dst_kind)
-- column bytes: bytes copied
-- column call: the launching call (launch.api_name)
-- column ts: start of the launching call in ns (trace clock)
-- column at_ns: start of the launching call in ns after the trace's start
-- column call_ns: duration of the launching call in ns
-- column copy_ns: GPU duration of the copy in ns
-- column recoverable_ns: what pinned memory would save: the copy's own time, copy_ns, at most call_ns (a copy from or to pinned memory with non_blocking=True returns at once); the rest of the call waited for work queued before the copy
-- column pinned_ns: the copy's estimated GPU time from pinned memory: bytes at the bandwidth this trace's pinned copies of the same direction reached (their bytes over their time), in ns; NULL when the trace has none
-- column device_id: GPU of the copy
-- column stream_id: stream of the copy
-- column range_path: the innermost NVTX range holding the launching call (nvtx_range.path via op_range), NULL when none
-- column pid: process of the call
-- column tid: thread of the call
-- column thread: that thread's name (thread.thread_name)
-- label at_ns: at
-- label call_ns: call
-- label copy_ns: copy
-- label recoverable_ns: recoverable
-- label pinned_ns: pinned
WITH copies AS (
    SELECT m.trace_id, m.memcpy_id, m.copy_kind, m.src_kind, m.dst_kind, m.bytes, m.dur AS copy_ns,
           m.device_id, m.stream_id, l.api_name AS call, l.api_ts AS ts, l.api_dur AS call_ns, l.pid, l.tid
    FROM memcpy m
    JOIN launch l ON l.trace_id = m.trace_id AND l.op_id = m.memcpy_id
    WHERE ($trace_id IS NULL OR m.trace_id = $trace_id)
      AND contains(lower(l.api_name), 'async')
      AND (m.src_kind = 'Pageable' OR m.dst_kind = 'Pageable')
      AND l.api_dur >= $min_call_ns
      AND NOT (m.copy_kind = 'Device-to-Host' AND m.bytes <= $max_read_bytes)
),
pinned AS (  -- the bandwidth of the trace's pinned copies, per direction
    SELECT trace_id, copy_kind, sum(bytes) AS bytes, sum(dur) AS ns
    FROM memcpy
    WHERE ($trace_id IS NULL OR trace_id = $trace_id)
      AND (src_kind = 'Pinned' OR dst_kind = 'Pinned') AND bytes > 0 AND dur > 0
    GROUP BY trace_id, copy_kind
)
SELECT
    c.trace_id, c.copy_kind, c.src_kind, c.dst_kind, c.bytes, c.call, c.ts, c.ts - t.start_ts AS at_ns,
    c.call_ns, c.copy_ns, least(c.copy_ns, c.call_ns) AS recoverable_ns,
    CAST(round(c.bytes * p.ns / p.bytes) AS BIGINT) AS pinned_ns,
    c.device_id, c.stream_id, r.path AS range_path, c.pid, c.tid, th.thread_name AS thread
FROM copies c
JOIN trace t ON t.trace_id = c.trace_id
LEFT JOIN pinned p ON p.trace_id = c.trace_id AND p.copy_kind = c.copy_kind
LEFT JOIN op_range o ON o.trace_id = c.trace_id AND o.op_id = c.memcpy_id AND o.is_innermost
LEFT JOIN nvtx_range r ON r.trace_id = o.trace_id AND r.range_id = o.range_id
LEFT JOIN thread th ON th.trace_id = c.trace_id AND th.pid = c.pid AND th.tid = c.tid
ORDER BY recoverable_ns DESC, c.trace_id, c.ts;
