-- analyze/sync_calls: synchronizing CUDA API calls (cudaDeviceSynchronize, cudaStreamSynchronize, cudaEventSynchronize and their driver forms) that blocked a host thread, each with how long it waited and how long the GPU then sat idle for want of queued work.
-- param trace_id: only this trace (NULL: every trace in the workspace)
-- param min_wait_ns: a call counts when its thread waited at least this long, in ns
-- default min_wait_ns: 0
-- advice: Each synchronization stops the thread that queues GPU work until the GPU has finished, so the GPU runs dry until that thread queues more (the idle time after it). Remove synchronizations that only measure or log (tensor.item(), .cpu(), print of a CUDA tensor, torch.cuda.synchronize() per step), wait on a CUDA event of the one stream that matters (cudaStreamWaitEvent, cudaEventSynchronize) instead of the whole device, and queue the next step's work before synchronizing.
-- finding: call, calls
-- group: call
-- total: wait_ns
-- show: at_ns, wait_ns, gpu_idle_ns, kind, range_path
-- column trace_id: trace (trace.trace_id)
-- column call: the synchronizing call (api_call.name)
-- column kind: what it waited for: 'device', 'stream' or 'event' (sync_event.kind)
-- column ts: start of the call in ns (trace clock)
-- column at_ns: start of the call in ns after the trace's start
-- column wait_ns: how long the thread was blocked in ns (sync_event.dur)
-- column gpu_idle_ns: how long the GPU (the call's device) then ran nothing: the last idle gap that began while the call waited (the GPU running dry), to the next operation on that GPU, in ns; 0 when the GPU never ran dry
-- column recoverable_ns: gpu_idle_ns: GPU time lost because the thread that queues work was blocked (the host's own wait, wait_ns, costs no GPU time while the GPU works)
-- column device_id: GPU synchronized with (sync_event.device_id)
-- column stream_id: stream synchronized, NULL for device and event synchronizations
-- column range_path: the innermost NVTX push/pop range open on the calling thread at the call (nvtx_range.path), NULL when none
-- column pid: process of the call
-- column tid: thread of the call
-- column thread: that thread's name (thread.thread_name)
-- label at_ns: at
-- label wait_ns: wait
-- label gpu_idle_ns: idle after
-- label recoverable_ns: recoverable
--
-- Only blocking synchronizations count: cudaEventQuery returns at once and cudaStreamWaitEvent
-- makes a stream wait, not the host. The GPU's gaps come from one window sweep per GPU; each
-- call's gap (the latest one to start before the call returned, kept when it started after the
-- call did) and its enclosing ranges from ASOF joins.
WITH syncs AS (
    SELECT s.trace_id, s.sync_id, s.api_name AS call, s.kind, s.ts, s.dur AS wait_ns, s.ts + s.dur AS end_ts,
           s.device_id, s.stream_id, s.pid, s.tid
    FROM sync_event s
    WHERE s.kind IN ('device', 'stream', 'event') AND s.dur >= $min_wait_ns
      AND ($trace_id IS NULL OR s.trace_id = $trace_id)
),
swept AS (
    SELECT trace_id, device_id, ts,
           max(ts + dur) OVER (PARTITION BY trace_id, device_id ORDER BY ts, dur, op_id
                               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS idle_from
    FROM gpu_op
    WHERE ($trace_id IS NULL OR trace_id = $trace_id)
),
gaps AS (
    SELECT trace_id, device_id, idle_from AS ts, ts - idle_from AS gap_ns FROM swept WHERE ts > idle_from
),
idle_after AS (
    SELECT s.trace_id, s.sync_id, g.gap_ns
    FROM syncs s
    ASOF JOIN gaps g ON g.trace_id = s.trace_id AND g.device_id = s.device_id AND g.ts <= s.end_ts
    WHERE g.ts >= s.ts
),
pushpop AS (
    SELECT trace_id, pid, tid, depth, ts, coalesce(ts + dur, 9223372036854775807) AS end_ts, path
    FROM nvtx_range WHERE style = 'push/pop' AND ($trace_id IS NULL OR trace_id = $trace_id)
),
levels AS (
    SELECT DISTINCT trace_id, pid, tid, depth FROM pushpop
),
probes AS (
    SELECT s.trace_id, s.sync_id, s.pid, s.tid, v.depth, s.ts
    FROM syncs s JOIN levels v ON v.trace_id = s.trace_id AND v.pid = s.pid AND v.tid = s.tid
),
at_range AS (
    SELECT p.trace_id, p.sync_id, arg_max(r.path, r.depth) AS range_path
    FROM probes p
    ASOF JOIN pushpop r
      ON r.trace_id = p.trace_id AND r.pid = p.pid AND r.tid = p.tid AND r.depth = p.depth AND r.ts <= p.ts
    WHERE r.end_ts > p.ts
    GROUP BY p.trace_id, p.sync_id
)
SELECT
    s.trace_id, s.call, s.kind, s.ts, s.ts - t.start_ts AS at_ns, s.wait_ns,
    coalesce(i.gap_ns, 0) AS gpu_idle_ns, coalesce(i.gap_ns, 0) AS recoverable_ns,
    s.device_id, s.stream_id, r.range_path, s.pid, s.tid, th.thread_name AS thread
FROM syncs s
JOIN trace t ON t.trace_id = s.trace_id
LEFT JOIN idle_after i ON i.trace_id = s.trace_id AND i.sync_id = s.sync_id
LEFT JOIN at_range r ON r.trace_id = s.trace_id AND r.sync_id = s.sync_id
LEFT JOIN thread th ON th.trace_id = s.trace_id AND th.pid = s.pid AND th.tid = s.tid
ORDER BY recoverable_ns DESC, s.wait_ns DESC, s.trace_id, s.ts;
