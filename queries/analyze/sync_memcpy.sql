-- analyze/sync_memcpy: synchronous copies between host and device (cudaMemcpy, cuMemcpyHtoD, cuMemcpyDtoH and other calls without Async): the calling thread waits until the copy is done, and cannot queue work meanwhile.
-- param trace_id: only this trace (NULL: every trace in the workspace)
-- param min_call_ns: a copy counts when its launching call took at least this long, in ns
-- default min_call_ns: 0
-- advice: Use cudaMemcpyAsync on a stream with pinned host memory (in PyTorch, tensor.to(device, non_blocking=True) from pinned memory) and synchronize only where the data is needed; reading results back to the host (.item(), .cpu(), .numpy()) is such a copy.
-- finding: copy, copies
-- group: copy_kind
-- total: bytes
-- show: at_ns, call_ns, copy_ns, bytes, range_path
-- column trace_id: trace (trace.trace_id)
-- column copy_kind: direction of the copy (memcpy.copy_kind); device-to-device and peer copies do not block the host and are left out
-- column bytes: bytes copied
-- column call: the launching call (launch.api_name)
-- column ts: start of the launching call in ns (trace clock)
-- column at_ns: start of the launching call in ns after the trace's start
-- column call_ns: duration of the launching call in ns
-- column copy_ns: GPU duration of the copy in ns
-- column recoverable_ns: call_ns: host time the thread spent blocked in the call
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
WITH copies AS (
    SELECT m.trace_id, m.memcpy_id, m.copy_kind, m.bytes, m.dur AS copy_ns, m.device_id, m.stream_id,
           l.api_name AS call, l.api_ts AS ts, l.api_dur AS call_ns, l.pid, l.tid
    FROM memcpy m
    JOIN launch l ON l.trace_id = m.trace_id AND l.op_id = m.memcpy_id
    WHERE ($trace_id IS NULL OR m.trace_id = $trace_id)
      AND regexp_matches(l.api_name, '^(cudaMemcpy|cuMemcpy)')
      AND NOT contains(lower(l.api_name), 'async')
      AND m.copy_kind NOT IN ('Device-to-Device', 'Peer-to-Peer')
      AND l.api_dur >= $min_call_ns
)
SELECT
    c.trace_id, c.copy_kind, c.bytes, c.call, c.ts, c.ts - t.start_ts AS at_ns, c.call_ns, c.copy_ns,
    c.call_ns AS recoverable_ns, c.device_id, c.stream_id, r.path AS range_path, c.pid, c.tid,
    th.thread_name AS thread
FROM copies c
JOIN trace t ON t.trace_id = c.trace_id
LEFT JOIN op_range o ON o.trace_id = c.trace_id AND o.op_id = c.memcpy_id AND o.is_innermost
LEFT JOIN nvtx_range r ON r.trace_id = o.trace_id AND r.range_id = o.range_id
LEFT JOIN thread th ON th.trace_id = c.trace_id AND th.pid = c.pid AND th.tid = c.tid
ORDER BY recoverable_ns DESC, c.trace_id, c.ts;
