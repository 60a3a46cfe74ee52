-- analyze/gpu_gaps: GPU idle gaps: stretches in which a GPU (or, with per_stream, a stream) ran no kernel, copy, memset or whole CUDA graph, each with why the next work came late (host, sync, launch, gpu_wait, profiler) and what the launching CPU thread was doing when the GPU went idle.
-- param trace_id: only this trace (NULL: every trace in the workspace)
-- param min_gap_ns: a gap counts when the GPU (or the stream) ran nothing for at least this long, in ns
-- default min_gap_ns: 1000000
-- param per_stream: true for the gaps of each stream (other streams of the GPU may run meanwhile) instead of the gaps of the whole GPU
-- default per_stream: false
-- advice: host: the CPU thread was busy elsewhere when the GPU ran dry; move that work off the critical thread (a DataLoader with workers, pinned memory, fewer Python-side syncs such as .item() or .cpu()) or overlap it with GPU work. sync: the CPU waited in a synchronizing call and had nothing queued when the GPU finished; drop the synchronization or queue the next work before it. launch: the launching call itself took that long (first launches, module loading, tiny kernels); warm up first, or batch the launches in CUDA graphs. gpu_wait: the work was queued but waited on another stream, event or GPU. graph: the GPU idled between the nodes of one CUDA graph replay (its own dependencies, or the profiler tracing the nodes one by one: profile with nsys --cuda-graph-trace=graph to see the replay whole); no cost is counted.
-- finding: gap, gaps
-- group: cause
-- show: at_ns, gap_ns, cause, range_path
-- column trace_id: trace (trace.trace_id)
-- column device_id: GPU that was idle (device.device_id)
-- column stream_id: stream that was idle; NULL unless per_stream
-- column ts: start of the gap in ns (trace clock): the end of the last operation before it (kernel, copy, memset, or a CUDA graph execution traced whole: graph_exec)
-- column at_ns: start of the gap in ns after the trace's start (trace.start_ts)
-- column gap_ns: length of the gap in ns
-- column recoverable_ns: the time the gap cost: gap_ns, 0 when the profiler's own overhead fell into it (cause 'profiler') or it lies inside one CUDA graph replay (cause 'graph')
-- column cause: 'host' (the next work's launching thread started the launch only after the GPU went idle, and was not in a synchronizing call then), 'sync' (that thread was in a synchronizing call when the GPU went idle: one with a blocking sync_event, a cudaDeviceSynchronize-like call by name, a copy or memset without Async, or an async copy of pageable memory), 'launch' (its launching call had started but not returned when the GPU went idle), 'gpu_wait' (the launching call had returned before the gap: the work waited on an event, another stream or another GPU), 'graph' (the operations before and after it are nodes of one CUDA graph replay traced node by node, launched by one cudaGraphLaunch: the work was queued in the graph, the gap is the graph's own dependencies or the profiler tracing its nodes one by one, not the host's doing), 'profiler' (profiler overhead in that process overlaps the gap: not the application's), 'unknown' (no launching call)
-- column cpu_call: the CUDA API call the launching thread was in when the GPU went idle (api_call.name), NULL when none
-- column os_call: the OS runtime call that thread was in then (osrt_call.name), NULL when none or not traced
-- column range_path: the innermost NVTX push/pop range open on that thread then (nvtx_range.path); when none is, the innermost range holding the call that launched the operation ending the gap (op_range: a range of another thread of its process, as for PyTorch's autograd threads inside a user's 'Backward'); NULL when neither
-- column launch_delay_ns: from the start of the gap to the start of the call that launched the next operation, in ns (negative when that call started before the gap)
-- column next_call: the call that launched the operation ending the gap (launch.api_name)
-- column pid: process of that call
-- column tid: thread of that call
-- column thread: that thread's name (thread.thread_name)
-- column before: the operation whose end started the gap (gpu_op.name, or '[CUDA graph N]' for a graph execution)
-- column after: the operation that ended the gap (gpu_op.name, or '[CUDA graph N]' for a graph execution)
-- label at_ns: at
-- label gap_ns: gap
-- label recoverable_ns: recoverable
-- label launch_delay_ns: launch after
--
-- A gap is measured between the union of the operations' intervals (concurrent streams count
-- once), from the first operation of a GPU to its last, as nsys's gpu_gaps rule does; one window
-- sweep per GPU (or stream) finds them. A CUDA graph traced whole (graph_exec) is one operation
-- from its start to its end, so no gap lies inside it; its launching call is graph_exec.api_id.
-- Operations are keyed by gpu_op.op_id, graph executions by -1 - graph_exec.exec_row_id. What
-- the launching thread was doing at the gap's start is found with ASOF joins (its latest API call, OS call, and push/pop range at each depth that
-- started before then, kept when still open): linear in the gaps, never an interval join.
WITH ops AS (
    SELECT trace_id, device_id, CASE WHEN $per_stream THEN stream_id END AS stream_id,
           op_id, ts, ts + dur AS end_ts, name
    FROM (
        /* include: gpu_work(graph_op_id = -1 - exec_row_id) */
    )
    WHERE ($trace_id IS NULL OR trace_id = $trace_id)
),
swept AS (
    SELECT *,
           max(end_ts) OVER w AS idle_from,
           arg_max(op_id, end_ts) OVER w AS prev_op_id
    FROM ops
    WINDOW w AS (PARTITION BY trace_id, device_id, stream_id ORDER BY ts, end_ts, op_id
                 ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
),
gaps AS (
    SELECT s.trace_id, s.device_id, s.stream_id, s.idle_from AS ts, s.ts - s.idle_from AS gap_ns,
           s.prev_op_id, s.op_id AS next_op_id, s.name AS after,
           coalesce(l.api_id, x.api_id) AS api_id, coalesce(l.api_name, x.api_name) AS api_name,
           coalesce(l.api_ts, xa.ts) AS api_ts, coalesce(l.api_ts + l.api_dur, xa.ts + xa.dur) AS api_end,
           coalesce(l.pid, p.pid, x.pid) AS pid, coalesce(l.tid, xa.tid) AS tid,
           (l.api_id = lp.api_id AND regexp_matches(l.api_name, '^(cudaGraphLaunch|cuGraphLaunch)')) AS in_graph
    FROM swept s
    LEFT JOIN launch l ON l.trace_id = s.trace_id AND l.op_id = s.op_id
    LEFT JOIN launch lp ON lp.trace_id = s.trace_id AND lp.op_id = s.prev_op_id
    LEFT JOIN gpu_op p ON p.trace_id = s.trace_id AND p.op_id = s.op_id
    LEFT JOIN graph_exec x ON x.trace_id = s.trace_id AND x.exec_row_id = -1 - s.op_id
    LEFT JOIN api_call xa ON xa.trace_id = x.trace_id AND xa.api_id = x.api_id
    WHERE s.ts - s.idle_from >= $min_gap_ns
),
calls AS (
    SELECT trace_id, pid, tid, ts, ts + dur AS end_ts, api_id, name
    FROM api_call WHERE ($trace_id IS NULL OR trace_id = $trace_id)
),
at_call AS (
    SELECT g.trace_id, g.next_op_id, c.api_id AS call_id, c.name AS call_name
    FROM gaps g
    ASOF JOIN calls c ON c.trace_id = g.trace_id AND c.pid = g.pid AND c.tid = g.tid AND c.ts <= g.ts
    WHERE c.end_ts > g.ts
),
blocking AS (
    SELECT DISTINCT trace_id, api_id FROM sync_event
    WHERE kind IN ('device', 'stream', 'event') AND api_id IS NOT NULL
      AND ($trace_id IS NULL OR trace_id = $trace_id)
),
pageable AS (
    SELECT DISTINCT l.trace_id, l.api_id
    FROM memcpy m JOIN launch l ON l.trace_id = m.trace_id AND l.op_id = m.memcpy_id
    WHERE (m.src_kind = 'Pageable' OR m.dst_kind = 'Pageable') AND l.api_id IS NOT NULL
      AND ($trace_id IS NULL OR m.trace_id = $trace_id)
),
oscalls AS (
    SELECT trace_id, pid, tid, ts, ts + dur AS end_ts, name
    FROM osrt_call WHERE ($trace_id IS NULL OR trace_id = $trace_id)
),
at_os AS (
    SELECT g.trace_id, g.next_op_id, o.name AS os_call
    FROM gaps g
    ASOF JOIN oscalls o ON o.trace_id = g.trace_id AND o.pid = g.pid AND o.tid = g.tid AND o.ts <= g.ts
    WHERE o.end_ts > g.ts
),
probe_at AS (  -- the start of each gap on the thread that launched the operation after it
    SELECT trace_id, next_op_id, pid, tid, ts FROM gaps
),
/* include: innermost_range */,
overhead AS (  -- reach: the latest end of the process's overhead that started by ts; rows tied on ts get
                -- the same reach (a RANGE frame), so which of them the ASOF join matches does not matter
    SELECT trace_id, pid, ts,
           max(ts + dur) OVER (PARTITION BY trace_id, pid ORDER BY ts RANGE UNBOUNDED PRECEDING) AS reach
    FROM profiler_overhead WHERE ($trace_id IS NULL OR trace_id = $trace_id)
),
in_overhead AS (
    SELECT g.trace_id, g.next_op_id
    FROM gaps g
    ASOF JOIN overhead o ON o.trace_id = g.trace_id AND o.pid = g.pid AND o.ts < g.ts + g.gap_ns
    WHERE o.reach > g.ts
),
classified AS (
    SELECT g.*, c.call_name, os.os_call, coalesce(r.range_path, n.path) AS range_path,
           CASE
               WHEN ov.next_op_id IS NOT NULL THEN 'profiler'
               WHEN g.in_graph THEN 'graph'
               WHEN g.api_id IS NULL THEN 'unknown'
               WHEN g.api_end <= g.ts THEN 'gpu_wait'
               WHEN g.api_ts <= g.ts THEN 'launch'
               WHEN b.api_id IS NOT NULL OR pg.api_id IS NOT NULL
                 OR regexp_matches(c.call_name, '^(cudaDeviceSynchronize|cudaThreadSynchronize|cuCtxSynchronize|cudaStreamSynchronize|cuStreamSynchronize|cudaEventSynchronize|cuEventSynchronize)')
                 OR (regexp_matches(c.call_name, '^(cudaMemcpy|cuMemcpy|cudaMemset|cuMemset)') AND NOT contains(c.call_name, 'Async'))
                   THEN 'sync'
               ELSE 'host'
           END AS cause
    FROM gaps g
    LEFT JOIN at_call c ON c.trace_id = g.trace_id AND c.next_op_id = g.next_op_id
    LEFT JOIN blocking b ON b.trace_id = c.trace_id AND b.api_id = c.call_id
    LEFT JOIN pageable pg ON pg.trace_id = c.trace_id AND pg.api_id = c.call_id
    LEFT JOIN at_os os ON os.trace_id = g.trace_id AND os.next_op_id = g.next_op_id
    LEFT JOIN at_range r ON r.trace_id = g.trace_id AND r.next_op_id = g.next_op_id
    LEFT JOIN op_range o ON o.trace_id = g.trace_id AND o.op_id = g.next_op_id AND o.is_innermost
    LEFT JOIN nvtx_range n ON n.trace_id = o.trace_id AND n.range_id = o.range_id
    LEFT JOIN in_overhead ov ON ov.trace_id = g.trace_id AND ov.next_op_id = g.next_op_id
)
SELECT
    g.trace_id, g.device_id, g.stream_id, g.ts, g.ts - t.start_ts AS at_ns, g.gap_ns,
    CASE WHEN g.cause IN ('profiler', 'graph') THEN 0 ELSE g.gap_ns END AS recoverable_ns,
    g.cause, g.call_name AS cpu_call, g.os_call, g.range_path,
    g.api_ts - g.ts AS launch_delay_ns, g.api_name AS next_call, g.pid, g.tid, th.thread_name AS thread,
    CASE WHEN g.prev_op_id < 0 THEN '[CUDA graph ' || coalesce(CAST(bx.graph_id AS VARCHAR), '?') || ']'
         ELSE b.name END AS before, g.after
FROM classified g
JOIN trace t ON t.trace_id = g.trace_id
LEFT JOIN gpu_op b ON b.trace_id = g.trace_id AND b.op_id = g.prev_op_id
LEFT JOIN graph_exec bx ON bx.trace_id = g.trace_id AND bx.exec_row_id = -1 - g.prev_op_id
LEFT JOIN thread th ON th.trace_id = g.trace_id AND th.pid = g.pid AND th.tid = g.tid
ORDER BY recoverable_ns DESC, g.trace_id, g.ts, g.device_id, g.stream_id;
