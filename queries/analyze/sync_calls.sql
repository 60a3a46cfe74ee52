-- analyze/sync_calls: synchronizing CUDA API calls (cudaDeviceSynchronize, cudaStreamSynchronize, cudaEventSynchronize and their driver forms, HIP's hipDeviceSynchronize, hipStreamSynchronize, hipEventSynchronize on AMD, and host reads: device-to-host copies whose call returned only when the copy was done, as .item(), .cpu() and .tolist() make) that blocked a host thread, each with how long it waited, the PyTorch op and NVTX range that forced it, and how long the GPU then sat idle for want of queued work.
-- param trace_id: only this trace (NULL: every trace in the workspace)
-- param min_wait_ns: a call counts when its thread waited at least this long, in ns
-- default min_wait_ns: 0
-- advice: Each synchronization stops the thread that queues GPU work until the GPU has finished, so the GPU runs dry until that thread queues more (the idle time after it). Remove synchronizations that only measure or log (tensor.item(), .cpu(), print of a CUDA tensor, torch.cuda.synchronize() per step), wait on a CUDA event of the one stream that matters (cudaStreamWaitEvent, cudaEventSynchronize) instead of the whole device, and queue the next step's work before synchronizing.
-- finding: call, calls
-- group: call
-- total: wait_ns
-- column trace_id: trace (trace.trace_id)
-- column call: the synchronizing call (api_call.name)
-- column kind: what it waited for: 'device', 'stream' or 'event' (sync_event.kind), or 'copy' for a host read (the copy's call waited for the GPU work queued before the copy)
-- column ts: start of the call in ns (trace clock)
-- column at_ns: start of the call in ns after the trace's start
-- column wait_ns: how long the thread was blocked in ns (sync_event.dur; the call's duration when the trace recorded no synchronization for it); for a host read, from the call's start to the copy's start on the GPU (the copy's own time is pageable_memcpy's)
-- column gpu_idle_ns: how long the GPU (the call's device) then ran nothing: the last idle gap that began while the call waited (the GPU running dry), to the next operation on that GPU, in ns; 0 when the GPU never ran dry
-- column recoverable_ns: gpu_idle_ns: GPU time lost because the thread that queues work was blocked (the host's own wait, wait_ns, costs no GPU time while the GPU works)
-- column device_id: GPU synchronized with (sync_event.device_id; when the record names none (AMD traces) or there is no record, the GPU that ran most of the process's operations)
-- column stream_id: stream synchronized, NULL for device and event synchronizations
-- column op: the PyTorch op that forced the wait: the outermost op (torch_op.top_range_id) around the innermost range open on the calling thread at the call, e.g. 'aten::item'; NULL when that range is no PyTorch op
-- column range_path: the innermost NVTX push/pop range open on the calling thread at the call (nvtx_range.path), NULL when none
-- column pid: process of the call
-- column tid: thread of the call
-- column thread: that thread's name (thread.thread_name)
-- label at_ns: at
-- label wait_ns: wait
-- label gpu_idle_ns: idle after
-- label recoverable_ns: recoverable
-- show: at_ns, wait_ns, gpu_idle_ns, kind, op, range_path
--
-- Only blocking synchronizations count: cudaEventQuery returns at once and cudaStreamWaitEvent
-- makes a stream wait, not the host. A host read is a device-to-host copy whose launching call
-- lasted until the copy ended and started before it: the call waited from its start to the
-- copy's (keyed -1 - memcpy_id). A copy into pinned memory with non_blocking=True returns at
-- once and is no host read; the synchronization that follows it is. A synchronizing call the
-- trace has no synchronization record for (PyTorch profiler traces record them only with
-- cuda_sync events, PyTorch 2.1 and later, when asked) counts by its name, for its whole
-- duration (keyed -2^40 - api_id). The GPU's gaps come from one window sweep per GPU; each call's gap (the latest one to start before the call returned, kept when it started after the
-- call did) and its enclosing ranges from ASOF joins.
WITH reads AS (  -- device-to-host copies with their calls, one row each (grouped: the comparison of
                 -- the call's and the copy's times below then stays out of the join)
    SELECT m.trace_id, m.memcpy_id, any_value(m.ts) AS copy_ts, any_value(m.dur) AS copy_ns,
           any_value(m.device_id) AS device_id, any_value(m.stream_id) AS stream_id, any_value(l.api_name) AS call,
           any_value(l.api_ts) AS ts, any_value(l.api_dur) AS call_ns, any_value(l.pid) AS pid, any_value(l.tid) AS tid
    FROM memcpy m
    JOIN launch l ON l.trace_id = m.trace_id AND l.op_id = m.memcpy_id
    WHERE ($trace_id IS NULL OR m.trace_id = $trace_id) AND m.copy_kind = 'Device-to-Host'
    GROUP BY m.trace_id, m.memcpy_id
),
recorded AS (  -- the calls the trace has synchronization records for
    SELECT DISTINCT trace_id, api_id FROM sync_event
    WHERE api_id IS NOT NULL AND ($trace_id IS NULL OR trace_id = $trace_id)
),
process_gpu AS (  -- the GPU that ran most of each process's operations
    SELECT trace_id, pid, arg_max(device_id, n) AS device_id
    FROM (SELECT trace_id, pid, device_id, count(*) AS n FROM gpu_op
          WHERE ($trace_id IS NULL OR trace_id = $trace_id) GROUP BY ALL)
    GROUP BY trace_id, pid
),
syncs AS (
    SELECT s.trace_id, s.sync_id, s.api_name AS call, s.kind, s.ts, s.dur AS wait_ns, s.ts + s.dur AS end_ts,
           coalesce(s.device_id, d.device_id) AS device_id, s.stream_id, s.pid, s.tid
    FROM sync_event s
    LEFT JOIN process_gpu d ON d.trace_id = s.trace_id AND d.pid = s.pid
    WHERE s.kind IN ('device', 'stream', 'event') AND s.dur >= $min_wait_ns
      AND ($trace_id IS NULL OR s.trace_id = $trace_id)
    UNION ALL
    SELECT trace_id, -1 - memcpy_id, call, 'copy', ts, copy_ts - ts, ts + call_ns, device_id, stream_id, pid, tid
    FROM reads
    WHERE ts < copy_ts AND ts + call_ns >= copy_ts + copy_ns AND copy_ts - ts >= $min_wait_ns
    UNION ALL
    SELECT a.trace_id, -1099511627776 - a.api_id, a.name,
           CASE WHEN a.name IN ('cudaStreamSynchronize', 'cuStreamSynchronize', 'hipStreamSynchronize') THEN 'stream'
                WHEN a.name IN ('cudaEventSynchronize', 'cuEventSynchronize', 'hipEventSynchronize') THEN 'event'
                ELSE 'device' END,
           a.ts, a.dur, a.ts + a.dur, d.device_id, CAST(NULL AS BIGINT), a.pid, a.tid
    FROM api_call a
    ANTI JOIN recorded r ON r.trace_id = a.trace_id AND r.api_id = a.api_id
    LEFT JOIN process_gpu d ON d.trace_id = a.trace_id AND d.pid = a.pid
    WHERE ($trace_id IS NULL OR a.trace_id = $trace_id) AND a.dur >= $min_wait_ns
      AND a.name IN ('cudaDeviceSynchronize', 'cudaThreadSynchronize', 'cuCtxSynchronize', 'cudaStreamSynchronize',
                     'cuStreamSynchronize', 'cudaEventSynchronize', 'cuEventSynchronize',
                     'hipDeviceSynchronize', 'hipCtxSynchronize', 'hipStreamSynchronize', 'hipEventSynchronize')
),
work AS (  -- GPU operations and CUDA graphs traced whole (graph_exec, keyed -1 - exec_row_id)
    SELECT trace_id, device_id, op_id, ts, dur
    FROM (
        /* include: gpu_work(graph_op_id = -1 - exec_row_id) */
    )
    WHERE ($trace_id IS NULL OR trace_id = $trace_id)
),
swept AS (
    /* include: busy_sweep(rows = work; partition = trace_id, device_id; order = ts, dur, op_id) */
),
gaps AS (
    SELECT trace_id, device_id, covered_until AS ts, ts - covered_until AS gap_ns FROM swept WHERE ts > covered_until
),
idle_after AS (
    SELECT s.trace_id, s.sync_id, g.gap_ns
    FROM syncs s
    ASOF JOIN gaps g ON g.trace_id = s.trace_id AND g.device_id = s.device_id AND g.ts <= s.end_ts
    WHERE g.ts >= s.ts
),
probe_at AS (  -- the start of each synchronizing call on its thread
    SELECT trace_id, sync_id, pid, tid, ts FROM syncs
),
/* include: innermost_range */
SELECT
    s.trace_id, s.call, s.kind, s.ts, s.ts - t.start_ts AS at_ns, s.wait_ns,
    coalesce(i.gap_ns, 0) AS gpu_idle_ns, coalesce(i.gap_ns, 0) AS recoverable_ns,
    s.device_id, s.stream_id, top.name AS op, r.range_path, s.pid, s.tid, th.thread_name AS thread
FROM syncs s
JOIN trace t ON t.trace_id = s.trace_id
LEFT JOIN idle_after i ON i.trace_id = s.trace_id AND i.sync_id = s.sync_id
LEFT JOIN at_range r ON r.trace_id = s.trace_id AND r.sync_id = s.sync_id
LEFT JOIN torch_op o ON o.trace_id = r.trace_id AND o.range_id = r.range_id
LEFT JOIN torch_op top ON top.trace_id = o.trace_id AND top.range_id = o.top_range_id
LEFT JOIN thread th ON th.trace_id = s.trace_id AND th.pid = s.pid AND th.tid = s.tid
ORDER BY recoverable_ns DESC, s.wait_ns DESC, s.trace_id, s.ts;
