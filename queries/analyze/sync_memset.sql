-- analyze/sync_memset: synchronous memsets (cudaMemset, cuMemsetD8 and other calls without Async) of pinned host or managed (unified) memory, which block the calling thread until they are done.
-- param trace_id: only this trace (NULL: every trace in the workspace)
-- param min_call_ns: a memset counts when its launching call took at least this long, in ns
-- default min_call_ns: 0
-- advice: Use cudaMemsetAsync on a stream (torch.zeros on the device, or zero_() on a device tensor, rather than on pinned or managed memory) so that the thread does not wait.
-- finding: memset, memsets
-- group: mem_kind
-- total: bytes
-- show: at_ns, call_ns, memset_ns, bytes, range_path
-- column trace_id: trace (trace.trace_id)
-- column mem_kind: memory kind written (memset.mem_kind)
-- column bytes: bytes set
-- column call: the launching call (launch.api_name)
-- column ts: start of the launching call in ns (trace clock)
-- column at_ns: start of the launching call in ns after the trace's start
-- column call_ns: duration of the launching call in ns
-- column memset_ns: GPU duration of the memset in ns
-- column recoverable_ns: call_ns: host time the thread spent blocked in the call
-- column device_id: GPU of the memset
-- column stream_id: stream of the memset
-- column range_path: the innermost NVTX range holding the launching call (nvtx_range.path via op_range), NULL when none
-- column pid: process of the call
-- column tid: thread of the call
-- column thread: that thread's name (thread.thread_name)
-- label at_ns: at
-- label call_ns: call
-- label memset_ns: memset
-- label recoverable_ns: recoverable
--
-- As nsys's cuda_memset_sync rule: a memset of device memory returns at once even without Async
-- (it is only ordered with the default stream), so only pinned and managed memory count.
WITH sets AS (
    SELECT m.trace_id, m.memset_id, m.mem_kind, m.bytes, m.dur AS memset_ns, m.device_id, m.stream_id,
           l.api_name AS call, l.api_ts AS ts, l.api_dur AS call_ns, l.pid, l.tid
    FROM memset m
    JOIN launch l ON l.trace_id = m.trace_id AND l.op_id = m.memset_id
    WHERE ($trace_id IS NULL OR m.trace_id = $trace_id)
      AND regexp_matches(l.api_name, '^(cudaMemset|cuMemset)')
      AND NOT contains(lower(l.api_name), 'async')
      AND m.mem_kind IN ('Pinned', 'Managed', 'Managed Static')
      AND l.api_dur >= $min_call_ns
)
SELECT
    s.trace_id, s.mem_kind, s.bytes, s.call, s.ts, s.ts - t.start_ts AS at_ns, s.call_ns, s.memset_ns,
    s.call_ns AS recoverable_ns, s.device_id, s.stream_id, r.path AS range_path, s.pid, s.tid,
    th.thread_name AS thread
FROM sets s
JOIN trace t ON t.trace_id = s.trace_id
LEFT JOIN op_range o ON o.trace_id = s.trace_id AND o.op_id = s.memset_id AND o.is_innermost
LEFT JOIN nvtx_range r ON r.trace_id = o.trace_id AND r.range_id = o.range_id
LEFT JOIN thread th ON th.trace_id = s.trace_id AND th.pid = s.pid AND th.tid = s.tid
ORDER BY recoverable_ns DESC, s.trace_id, s.ts;
