-- analyze/low_utilization: windows of low GPU time utilization: each GPU's time from its first to its last operation cut into equal chunks (as nsys's gpu_time_util rule does), and the chunks in which the GPU ran something less than a threshold share of the time, with what the main launching thread was inside then.
-- param trace_id: only this trace (NULL: every trace in the workspace)
-- param max_util_pct: a chunk counts when the GPU ran at least one operation for less than this percentage of it
-- default max_util_pct: 50
-- param chunks: how many equal chunks each GPU's active span is cut into
-- default chunks: 30
-- advice: Time utilization counts the time a GPU ran anything, however little of it: a low chunk is time the GPU waited on the host. See gpu_gaps for the gaps in it and their causes; the NVTX range shows which phase of the program the chunk was in (data loading, evaluation, checkpointing, start-up).
-- finding: chunk, chunks
-- group: device_id
-- show: at_ns, chunk_ns, busy_ns, util_pct, range_path
-- column trace_id: trace (trace.trace_id)
-- column device_id: the GPU (device.device_id)
-- column chunk: index of the chunk, 0 = the first, in time order
-- column ts: start of the chunk in ns (trace clock)
-- column at_ns: start of the chunk in ns after the trace's start
-- column chunk_ns: length of the chunk in ns
-- column busy_ns: time in the chunk the GPU ran at least one kernel, copy, memset or whole CUDA graph (graph_exec) (union of intervals), in ns
-- column util_pct: busy_ns as a percentage of chunk_ns
-- column recoverable_ns: chunk_ns - busy_ns: the idle time of the chunk
-- column sm_active_pct: mean of the GPU's sampled 'SMs Active' metric in the chunk (gpu_metric), NULL when not sampled
-- column range_path: the innermost NVTX push/pop range open on the GPU's main launching thread (the one that launched most of its operations) in the middle of the chunk, NULL when none
-- column pid: process of that thread
-- column tid: that thread
-- column thread: its name (thread.thread_name)
-- label at_ns: at
-- label device_id: GPU
-- label chunk_ns: chunk
-- label busy_ns: busy
-- label util_pct: util %
-- label recoverable_ns: idle
--
-- Busy time inside a chunk is covered(end) - covered(start), where covered(t) is the GPU's busy
-- time before t: the GPU's busy islands (one window sweep) with their running sum, looked up with
-- an ASOF join at each chunk boundary. No interval join. A CUDA graph traced whole (graph_exec)
-- is one operation from its start to its end, so a chunk inside one is busy.
-- Graph executions are keyed by -1 - graph_exec.exec_row_id (gpu_op.op_id is never negative).
-- A chunk's bounds multiply the span by the chunk index in 128 bits (a span of days times
-- chunks=10**6 passes 2**63), and the middle is ts + half the chunk (ts + end_ts can overflow).
WITH busy_ops AS (
    SELECT trace_id, device_id, op_id, ts, ts + dur AS end_ts
    FROM (
        /* include: gpu_work(graph_op_id = -1 - exec_row_id) */
    )
    WHERE ($trace_id IS NULL OR trace_id = $trace_id)
),
/* include: busy_islands(rows = busy_ops; partition = trace_id, device_id; order = ts, end_ts, op_id) */,
span AS (
    SELECT trace_id, device_id, min(ts) AS first_ts, max(end_ts) AS last_end FROM busy_ops GROUP BY trace_id, device_id
),
chunks AS (
    SELECT trace_id, device_id, first_ts, last_end, unnest(range($chunks)) AS chunk FROM span WHERE last_end > first_ts
),
bounds AS (
    SELECT trace_id, device_id, chunk, first_ts,
           first_ts + ((last_end - first_ts)::HUGEINT * chunk // $chunks)::BIGINT AS ts,
           first_ts + ((last_end - first_ts)::HUGEINT * (chunk + 1) // $chunks)::BIGINT AS end_ts
    FROM chunks
),
at_start AS (
    SELECT b.trace_id, b.device_id, b.chunk,
           coalesce(c.before_ns + least(b.ts, c.end_ts) - c.ts, 0) AS covered_ns
    FROM bounds b
    ASOF LEFT JOIN covered c ON c.trace_id = b.trace_id AND c.device_id = b.device_id AND c.ts <= b.ts
),
at_end AS (
    SELECT b.trace_id, b.device_id, b.chunk,
           coalesce(c.before_ns + least(b.end_ts, c.end_ts) - c.ts, 0) AS covered_ns
    FROM bounds b
    ASOF LEFT JOIN covered c ON c.trace_id = b.trace_id AND c.device_id = b.device_id AND c.ts <= b.end_ts
),
util AS (
    SELECT b.*, b.end_ts - b.ts AS chunk_ns, e.covered_ns - s.covered_ns AS busy_ns
    FROM bounds b
    JOIN at_start s ON s.trace_id = b.trace_id AND s.device_id IS NOT DISTINCT FROM b.device_id AND s.chunk = b.chunk
    JOIN at_end e ON e.trace_id = b.trace_id AND e.device_id IS NOT DISTINCT FROM b.device_id AND e.chunk = b.chunk
),
low AS (
    SELECT *, 100.0 * busy_ns / chunk_ns AS util_pct, ts + (end_ts - ts) // 2 AS mid
    FROM util WHERE chunk_ns > 0 AND 100.0 * busy_ns / chunk_ns < $max_util_pct
),
launchers AS (
    SELECT o.trace_id, o.device_id, l.pid, l.tid, count(*) AS n
    FROM gpu_op o JOIN launch l ON l.trace_id = o.trace_id AND l.op_id = o.op_id
    WHERE ($trace_id IS NULL OR o.trace_id = $trace_id) AND l.tid IS NOT NULL
    GROUP BY ALL
),
main_thread AS (
    SELECT trace_id, device_id, arg_max(pid, (n, -tid)) AS pid, arg_max(tid, (n, -tid)) AS tid
    FROM launchers GROUP BY trace_id, device_id
),
samples AS (
    SELECT trace_id, device_id, ts, value FROM gpu_metric
    WHERE ($trace_id IS NULL OR trace_id = $trace_id) AND regexp_matches(metric, '(?i)^SMs? Active')
),
metric AS (  -- each sample in the chunk that started last before it
    SELECT b.trace_id, b.device_id, b.chunk, avg(m.value) AS sm_active_pct
    FROM samples m
    ASOF JOIN bounds b ON b.trace_id = m.trace_id AND b.device_id = m.device_id AND b.ts <= m.ts
    WHERE m.ts < b.end_ts
    GROUP BY ALL
),
probe_at AS (  -- the middle of each low chunk on the GPU's main launching thread
    SELECT w.trace_id, w.device_id, w.chunk, m.pid, m.tid, w.mid AS ts
    FROM low w
    JOIN main_thread m ON m.trace_id = w.trace_id AND m.device_id IS NOT DISTINCT FROM w.device_id
),
/* include: innermost_range */
SELECT
    w.trace_id, w.device_id, w.chunk, w.ts, w.ts - t.start_ts AS at_ns, w.chunk_ns, w.busy_ns, w.util_pct,
    w.chunk_ns - w.busy_ns AS recoverable_ns, mt.sm_active_pct, r.range_path, m.pid, m.tid, th.thread_name AS thread
FROM low w
JOIN trace t ON t.trace_id = w.trace_id
LEFT JOIN main_thread m ON m.trace_id = w.trace_id AND m.device_id IS NOT DISTINCT FROM w.device_id
LEFT JOIN metric mt ON mt.trace_id = w.trace_id AND mt.device_id IS NOT DISTINCT FROM w.device_id AND mt.chunk = w.chunk
LEFT JOIN at_range r ON r.trace_id = w.trace_id AND r.device_id IS NOT DISTINCT FROM w.device_id AND r.chunk = w.chunk
LEFT JOIN thread th ON th.trace_id = m.trace_id AND th.pid = m.pid AND th.tid = m.tid
ORDER BY recoverable_ns DESC, w.trace_id, w.device_id, w.chunk;
