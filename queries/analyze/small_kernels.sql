-- analyze/small_kernels: kernels dominated by launch overhead: repeated short kernels whose median GPU time is below the median time of the API calls that launched them, so the GPU can run them no faster than one thread launches them, with the GPU idle time before them that faster launching would recover; one row per kernel name and NVTX range.
-- param trace_id: only this trace (NULL: every trace in the workspace)
-- param max_kernel_ns: a kernel counts when it ran at most this long, in ns
-- default max_kernel_ns: 10000
-- param min_kernels: a kernel name and range count when at least this many such kernels ran in it (a kernel launched once or twice is no pattern; a slow first launch shows in gpu_gaps as cause 'launch')
-- default min_kernels: 10
-- advice: Launch fewer, larger kernels: fuse elementwise chains (torch.compile, custom fused kernels, foreach/fused optimizers), batch small operations, and replay steady sequences with CUDA graphs (torch.cuda.graphs, CUDA graph capture), which launch many kernels for the cost of one call.
-- finding: kernel name, kernel names
-- total: kernels
-- show: kernels, med_kernel_ns, med_launch_ns, recoverable_ns, name, range_path
-- column trace_id: trace (trace.trace_id)
-- column kernels: kernels of this name, at most max_kernel_ns long, launched inside this range
-- column kernel_ns: their summed GPU time in ns
-- column launch_ns: the summed time of their launching calls in ns
-- column med_kernel_ns: median GPU time per kernel in ns
-- column med_launch_ns: median launching call time in ns
-- column recoverable_ns: the GPU idle time just before each of these kernels (since the end of the GPU's previous work), up to med_launch_ns - med_kernel_ns per kernel, summed: the idle time launching them faster (fusing them, replaying them in a CUDA graph) can recover; 0 when the GPU had other work queued
-- column name: kernel name (kernel.name)
-- column range_path: the innermost NVTX range holding their launching calls (nvtx_range.path via op_range), NULL when none
-- column pid: process that launched them
-- column tid: thread that launched most of them
-- column thread: that thread's name (thread.thread_name)
-- label kernel_ns: kernel time
-- label launch_ns: launch time
-- label med_kernel_ns: med kernel
-- label med_launch_ns: med launch
-- label recoverable_ns: recoverable
WITH small AS (
    SELECT k.trace_id, k.kernel_id, k.name, k.dur, l.api_dur, l.pid, l.tid
    FROM kernel k
    JOIN launch l ON l.trace_id = k.trace_id AND l.op_id = k.kernel_id
    WHERE ($trace_id IS NULL OR k.trace_id = $trace_id) AND k.dur <= $max_kernel_ns AND l.api_dur IS NOT NULL
),
placed AS (
    SELECT s.*, r.path AS range_path
    FROM small s
    LEFT JOIN op_range o ON o.trace_id = s.trace_id AND o.op_id = s.kernel_id AND o.is_innermost
    LEFT JOIN nvtx_range r ON r.trace_id = o.trace_id AND r.range_id = o.range_id
),
grouped AS (
    SELECT trace_id, name, range_path, pid, count(*) AS kernels, sum(dur) AS kernel_ns, sum(api_dur) AS launch_ns,
           CAST(median(dur) AS BIGINT) AS med_kernel_ns, CAST(median(api_dur) AS BIGINT) AS med_launch_ns,
           mode(tid) AS tid
    FROM placed
    GROUP BY trace_id, name, range_path, pid
    HAVING count(*) >= $min_kernels AND median(dur) < median(api_dur)
),
-- the idle time of each kernel's GPU right before it: one window sweep over the GPU's operations
-- and its CUDA graphs traced whole (graph_exec, keyed -1 - exec_row_id)
work AS (
    SELECT trace_id, device_id, op_id, ts, dur
    FROM (
        /* include: gpu_work(graph_op_id = -1 - exec_row_id) */
    )
    WHERE ($trace_id IS NULL OR trace_id = $trace_id)
),
swept AS (
    /* include: busy_sweep(rows = work; partition = trace_id, device_id; order = ts, dur, op_id) */
),
idle_before AS (
    SELECT trace_id, op_id, greatest(ts - covered_until, 0) AS idle_ns FROM swept
),
recovered AS (
    SELECT g.trace_id, g.name, g.range_path, g.pid,
           sum(least(coalesce(i.idle_ns, 0), g.med_launch_ns - g.med_kernel_ns)) AS recoverable_ns
    FROM placed p
    JOIN grouped g ON g.trace_id = p.trace_id AND g.name IS NOT DISTINCT FROM p.name
                  AND g.range_path IS NOT DISTINCT FROM p.range_path AND g.pid IS NOT DISTINCT FROM p.pid
    LEFT JOIN idle_before i ON i.trace_id = p.trace_id AND i.op_id = p.kernel_id
    GROUP BY ALL
)
SELECT
    g.trace_id, g.kernels, CAST(g.kernel_ns AS BIGINT) AS kernel_ns, CAST(g.launch_ns AS BIGINT) AS launch_ns,
    g.med_kernel_ns, g.med_launch_ns,
    CAST(v.recoverable_ns AS BIGINT) AS recoverable_ns,
    g.name, g.range_path, g.pid, g.tid, th.thread_name AS thread
FROM grouped g
JOIN recovered v ON v.trace_id = g.trace_id AND v.name IS NOT DISTINCT FROM g.name
                AND v.range_path IS NOT DISTINCT FROM g.range_path AND v.pid IS NOT DISTINCT FROM g.pid
LEFT JOIN thread th ON th.trace_id = g.trace_id AND th.pid = g.pid AND th.tid = g.tid
ORDER BY recoverable_ns DESC, g.trace_id, g.name, g.range_path NULLS LAST;
