-- range: NVTX ranges grouped by operator name (or full name, or nesting path) with their CPU time and the GPU work launched inside them, plus an '[unattributed]' row for GPU work launched outside every range.
-- input: nvtx_range
-- param trace_id: only this trace (NULL: every trace in the workspace)
-- param per_trace: true to give each trace its own rows
-- param group_by: 'group' to group range instances by their grouping name (nvtx_range.group_name: PyTorch's per-instance ', seq = N', ', op_id = N', ', sizes = ...' removed, PyProf markers by op), 'name' by their full name, 'path' by their nesting path (grouping names from the outermost range down)
-- param max_depth: keep only ranges whose depth is below this, so paths have at most this many levels (NULL: all)
-- param match: list of words; keep ranges whose name contains any of them, ignoring case (NULL: all ranges)
-- param domain: keep only ranges of this NVTX domain ('' is the default domain; NULL: all but the GPU-side spans of PyTorch profiler traces, domain 'gpu_user_annotation', which hold no GPU work and repeat their CPU-side annotation's name)
-- param filtered: true when a --where filter selects the ranges; like match and domain it leaves the '[unattributed]' row out
-- param skip_first: leave out the first N instances of each row's name (by start time, per trace: the warm-up iterations), and the '[unattributed]' row (NULL or 0: every instance)
-- param spread: true to add the spread of the instances: minimum, median, maximum and standard deviation of the CPU time and of the kernel time per instance
-- column trace_id if per_trace: trace of the row (trace.trace_id)
-- column name: range grouping name (the full name with group_by 'name', the nesting path with 'path'); '[unattributed]' for GPU work launched outside every range
-- column instances: range instances
-- column cpu_total_ns: summed range durations on the CPU in ns (unclosed ranges left out)
-- column cpu_avg_ns: mean range duration on the CPU in ns
-- column cpu_min_ns if spread: shortest instance on the CPU in ns
-- column cpu_med_ns if spread: median instance duration on the CPU in ns (the mean of the two middle values for an even count)
-- column cpu_max_ns if spread: longest instance on the CPU in ns
-- column cpu_stddev_ns if spread: sample standard deviation of the instance durations on the CPU in ns (n - 1 denominator, as nsys stats), rounded to 0.1 ns; 0 for a single instance
-- column gpu_kernel_ns: summed durations of the kernels launched inside each instance, at any depth, by any thread of its process, summed over instances
-- column own_kernel_ns: the part of gpu_kernel_ns launched by the thread that opened the range
-- column other_kernel_ns: the part launched by other threads of its process while the range was open (PyTorch's autograd threads during a 'Backward' range)
-- column kernel_avg_ns if spread: mean kernel time per instance in ns (gpu_kernel_ns / instances; an instance that launched no kernel counts 0)
-- column kernel_min_ns if spread: smallest kernel time of an instance in ns
-- column kernel_med_ns if spread: median kernel time per instance in ns
-- column kernel_max_ns if spread: largest kernel time of an instance in ns
-- column kernel_stddev_ns if spread: sample standard deviation of the kernel time per instance in ns (n - 1), rounded to 0.1 ns; 0 for a single instance
-- column memcpy_ns: the same for copies
-- column memset_ns: the same for memsets
-- column gpu_busy_ns: per instance the union of those GPU intervals (overlap counted once), summed over instances
-- column projected_ns: per instance from the first GPU start to the last GPU end, summed over instances
-- column sync_ns: time in CUDA synchronization calls that block the host (sync_event kinds 'device', 'stream' and 'event') made by any thread of the range's process while an instance was open (the call starts inside it; its whole duration counts), summed over instances; NULL when the trace recorded no synchronization at all
-- column kernels: kernels launched inside the instances
--
-- A kernel counts in every range of its stack, so rows of nested ranges overlap; it counts once
-- per range instance (schemas/derive/op_range.sql says which ranges hold which work). A
-- synchronization likewise counts in every range open around its start. The medians are
-- computed only with spread (FILTER): they sort every instance's value.
--
-- Synchronization time per instance without an interval join: per process, the blocking
-- synchronizations and the instances' starts and ends in time order with the running sum of the
-- synchronizations' durations; the time an instance holds is the sum at its end minus the sum
-- at its start (one sort, n log n; no ASOF join, so the query still runs on Spark).
WITH picked AS (
    SELECT r.*, CASE $group_by WHEN 'path' THEN r.path WHEN 'name' THEN r.name ELSE r.group_name END AS label
    FROM nvtx_range r
    WHERE ($trace_id IS NULL OR r.trace_id = $trace_id)
      AND ($max_depth IS NULL OR r.depth < $max_depth)
      AND (CASE WHEN $domain IS NULL THEN r.domain <> 'gpu_user_annotation' ELSE r.domain = $domain END)
      AND ($match IS NULL OR len(list_filter($match, w -> contains(lower(r.name), lower(w)))) > 0)
      AND /* where */ TRUE
),
numbered AS (
    SELECT p.*, row_number() OVER (PARTITION BY p.trace_id, p.label ORDER BY p.ts, p.range_id) AS instance_no
    FROM picked p
),
-- the instances numbered only with skip_first: DuckDB drops the branch whose condition the
-- parameters make false (the numbering was 1.4 of the 6.5 CPU s of the stored range report of
-- 3 M ranges)
kept AS (
    SELECT *, CAST(NULL AS BIGINT) AS instance_no FROM picked WHERE coalesce($skip_first, 0) <= 0
    UNION ALL
    SELECT * FROM numbered WHERE coalesce($skip_first, 0) > 0 AND instance_no > $skip_first
),
blocking AS (
    SELECT trace_id, coalesce(pid, -1) AS pid, ts, dur
    FROM sync_event
    WHERE kind IN ('device', 'stream', 'event')
      AND ($trace_id IS NULL OR trace_id = $trace_id)
),
-- the instances of processes that made a blocking synchronization: the others hold none (sync_ns
-- 0), and are not sorted with them (a trace of 3 M ranges and no synchronization spent 4.7 of the
-- report's 6.5 CPU s sorting its ranges' starts and ends)
probed AS (
    SELECT k.trace_id, coalesce(k.pid, -1) AS pid, k.ts, k.dur, k.range_id
    FROM kept k
    JOIN (SELECT DISTINCT trace_id, pid FROM blocking) b ON b.trace_id = k.trace_id AND b.pid = coalesce(k.pid, -1)
),
-- probes: each probed instance's start and end among its process's blocking synchronizations;
-- at equal times a probe sorts before a synchronization, so one that starts exactly at an
-- instance's start counts and one that starts exactly at its end does not. (On Spark this query
-- needs the optimizer rule RemoveRedundantAliases off: traceql.spark.EXCLUDED_RULES.)
sync_points AS (
    SELECT trace_id, pid, ts, 1 AS ord, dur, CAST(NULL AS BIGINT) AS range_id, CAST(NULL AS VARCHAR) AS side
    FROM blocking
    UNION ALL
    SELECT trace_id, pid, ts, 0 AS ord, CAST(0 AS BIGINT) AS dur, range_id, 'start' AS side
    FROM probed
    UNION ALL
    SELECT trace_id, pid, coalesce(ts + dur, 9223372036854775807) AS ts, 0 AS ord,
           CAST(0 AS BIGINT) AS dur, range_id, 'end' AS side
    FROM probed
),
running AS (
    SELECT trace_id, range_id, side,
           sum(dur) OVER (PARTITION BY trace_id, pid ORDER BY ts, ord ROWS UNBOUNDED PRECEDING) AS total
    FROM sync_points
),
synced AS (
    SELECT trace_id, range_id,
           max(CASE WHEN side = 'end' THEN total END) - max(CASE WHEN side = 'start' THEN total END) AS sync_ns
    FROM running
    WHERE range_id IS NOT NULL
    GROUP BY trace_id, range_id
),
-- the traces that recorded synchronizations at all (the others get NULL, not 0)
sync_traces AS (
    SELECT DISTINCT trace_id FROM sync_event
),
per_name AS (
    SELECT
        CASE WHEN $per_trace THEN p.trace_id END AS trace_id,
        p.label AS name,
        count(*) AS instances,
        sum(p.dur) AS cpu_total_ns,
        TRY_CAST(round(avg(p.dur)) AS BIGINT) AS cpu_avg_ns,
        min(p.dur) AS cpu_min_ns,
        median(p.dur) FILTER (WHERE $spread) AS cpu_med_ns,
        max(p.dur) AS cpu_max_ns,
        round(coalesce(stddev_samp(p.dur), 0), 1) AS cpu_stddev_ns,
        coalesce(sum(g.kernel_ns), 0) AS gpu_kernel_ns,
        coalesce(sum(g.own_kernel_ns), 0) AS own_kernel_ns,
        coalesce(sum(g.other_kernel_ns), 0) AS other_kernel_ns,
        round(avg(coalesce(g.kernel_ns, 0)), 1) AS kernel_avg_ns,
        min(coalesce(g.kernel_ns, 0)) AS kernel_min_ns,
        median(coalesce(g.kernel_ns, 0)) FILTER (WHERE $spread) AS kernel_med_ns,
        max(coalesce(g.kernel_ns, 0)) AS kernel_max_ns,
        round(coalesce(stddev_samp(coalesce(g.kernel_ns, 0)), 0), 1) AS kernel_stddev_ns,
        coalesce(sum(g.memcpy_ns), 0) AS memcpy_ns,
        coalesce(sum(g.memset_ns), 0) AS memset_ns,
        coalesce(sum(g.gpu_busy_ns), 0) AS gpu_busy_ns,
        coalesce(sum(g.proj_end - g.proj_start), 0) AS projected_ns,
        sum(CASE WHEN st.trace_id IS NOT NULL THEN coalesce(y.sync_ns, 0) END) AS sync_ns,
        coalesce(sum(g.kernels), 0) AS kernels
    FROM kept p
    LEFT JOIN range_gpu g ON g.trace_id = p.trace_id AND g.range_id = p.range_id
    LEFT JOIN synced y ON y.trace_id = p.trace_id AND y.range_id = p.range_id
    LEFT JOIN sync_traces st ON st.trace_id = p.trace_id
    GROUP BY 1, 2
),
-- GPU work launched outside every range: per trace totals stored at ingest (unattributed_gpu,
-- schemas/derive/unattributed_gpu.sql), not an anti-join of every GPU operation against op_range
unattributed AS (
    SELECT
        CASE WHEN $per_trace THEN trace_id END AS trace_id,
        '[unattributed]' AS name,
        CAST(NULL AS BIGINT) AS instances,
        CAST(NULL AS HUGEINT) AS cpu_total_ns,
        CAST(NULL AS BIGINT) AS cpu_avg_ns,
        CAST(NULL AS BIGINT) AS cpu_min_ns,
        CAST(NULL AS DOUBLE) AS cpu_med_ns,
        CAST(NULL AS BIGINT) AS cpu_max_ns,
        CAST(NULL AS DOUBLE) AS cpu_stddev_ns,
        sum(kernel_ns) AS gpu_kernel_ns,
        CAST(NULL AS HUGEINT) AS own_kernel_ns,
        CAST(NULL AS HUGEINT) AS other_kernel_ns,
        CAST(NULL AS DOUBLE) AS kernel_avg_ns,
        CAST(NULL AS BIGINT) AS kernel_min_ns,
        CAST(NULL AS DOUBLE) AS kernel_med_ns,
        CAST(NULL AS BIGINT) AS kernel_max_ns,
        CAST(NULL AS DOUBLE) AS kernel_stddev_ns,
        sum(memcpy_ns) AS memcpy_ns,
        sum(memset_ns) AS memset_ns,
        CAST(NULL AS HUGEINT) AS gpu_busy_ns,
        CAST(NULL AS HUGEINT) AS projected_ns,
        CAST(NULL AS HUGEINT) AS sync_ns,
        sum(kernels) AS kernels
    FROM unattributed_gpu
    WHERE ($trace_id IS NULL OR trace_id = $trace_id)
      AND $match IS NULL AND $domain IS NULL AND NOT coalesce($filtered, false) AND coalesce($skip_first, 0) = 0
    GROUP BY 1
)
SELECT trace_id, name, instances, TRY_CAST(cpu_total_ns AS BIGINT) AS cpu_total_ns, cpu_avg_ns,
       cpu_min_ns, cpu_med_ns, cpu_max_ns, cpu_stddev_ns,
       TRY_CAST(gpu_kernel_ns AS BIGINT) AS gpu_kernel_ns, TRY_CAST(own_kernel_ns AS BIGINT) AS own_kernel_ns,
       TRY_CAST(other_kernel_ns AS BIGINT) AS other_kernel_ns,
       kernel_avg_ns, kernel_min_ns, kernel_med_ns, kernel_max_ns, kernel_stddev_ns,
       TRY_CAST(memcpy_ns AS BIGINT) AS memcpy_ns,
       TRY_CAST(memset_ns AS BIGINT) AS memset_ns, TRY_CAST(gpu_busy_ns AS BIGINT) AS gpu_busy_ns,
       TRY_CAST(projected_ns AS BIGINT) AS projected_ns, TRY_CAST(sync_ns AS BIGINT) AS sync_ns, kernels
FROM (SELECT * FROM per_name UNION ALL SELECT * FROM unattributed)
ORDER BY trace_id NULLS FIRST, cpu_total_ns DESC NULLS LAST, name;
