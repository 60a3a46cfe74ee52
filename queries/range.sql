-- range: NVTX ranges grouped by operator name (or full name, or nesting path) with their CPU time and the GPU work launched inside them, plus an '[unattributed]' row for GPU work launched outside every range.
-- input: nvtx_range
-- param trace_id: only this trace (NULL: every trace in the workspace)
-- param per_trace: true to give each trace its own rows
-- param group_by: 'group' to group range instances by their grouping name (nvtx_range.group_name: PyTorch's per-instance ', seq = N', ', op_id = N', ', sizes = ...' removed, PyProf markers by op), 'name' by their full name, 'path' by their nesting path (grouping names from the outermost range down)
-- param max_depth: keep only ranges whose depth is below this, so paths have at most this many levels (NULL: all)
-- param match: list of words; keep ranges whose name contains any of them, ignoring case (NULL: all ranges)
-- param domain: keep only ranges of this NVTX domain ('' is the default domain; NULL: all but the GPU-side spans of PyTorch profiler traces, domain 'gpu_user_annotation', which hold no GPU work and repeat their CPU-side annotation's name)
-- param filtered: true when a --where filter selects the ranges; like match and domain it leaves the '[unattributed]' row out
-- column trace_id if per_trace: trace of the row (trace.trace_id)
-- column name: range grouping name (the full name with group_by 'name', the nesting path with 'path'); '[unattributed]' for GPU work launched outside every range
-- column instances: range instances
-- column cpu_total_ns: summed range durations on the CPU in ns (unclosed ranges left out)
-- column cpu_avg_ns: mean range duration on the CPU in ns
-- column gpu_kernel_ns: summed durations of the kernels launched inside each instance, at any depth, by any thread of its process, summed over instances
-- column own_kernel_ns: the part of gpu_kernel_ns launched by the thread that opened the range
-- column other_kernel_ns: the part launched by other threads of its process while the range was open (PyTorch's autograd threads during a 'Backward' range)
-- column memcpy_ns: the same for copies
-- column memset_ns: the same for memsets
-- column gpu_busy_ns: per instance the union of those GPU intervals (overlap counted once), summed over instances
-- column projected_ns: per instance from the first GPU start to the last GPU end, summed over instances
-- column kernels: kernels launched inside the instances
--
-- A kernel counts in every range of its stack, so rows of nested ranges overlap; it counts once
-- per range instance (schemas/derive/op_range.sql says which ranges hold which work).
WITH picked AS (
    SELECT r.*, CASE $group_by WHEN 'path' THEN r.path WHEN 'name' THEN r.name ELSE r.group_name END AS label
    FROM nvtx_range r
    WHERE ($trace_id IS NULL OR r.trace_id = $trace_id)
      AND ($max_depth IS NULL OR r.depth < $max_depth)
      AND (CASE WHEN $domain IS NULL THEN r.domain <> 'gpu_user_annotation' ELSE r.domain = $domain END)
      AND ($match IS NULL OR len(list_filter($match, w -> contains(lower(r.name), lower(w)))) > 0)
      AND /* where */ TRUE
),
per_name AS (
    SELECT
        CASE WHEN $per_trace THEN p.trace_id END AS trace_id,
        p.label AS name,
        count(*) AS instances,
        sum(p.dur) AS cpu_total_ns,
        TRY_CAST(round(avg(p.dur)) AS BIGINT) AS cpu_avg_ns,
        coalesce(sum(g.kernel_ns), 0) AS gpu_kernel_ns,
        coalesce(sum(g.own_kernel_ns), 0) AS own_kernel_ns,
        coalesce(sum(g.other_kernel_ns), 0) AS other_kernel_ns,
        coalesce(sum(g.memcpy_ns), 0) AS memcpy_ns,
        coalesce(sum(g.memset_ns), 0) AS memset_ns,
        coalesce(sum(g.gpu_busy_ns), 0) AS gpu_busy_ns,
        coalesce(sum(g.proj_end - g.proj_start), 0) AS projected_ns,
        coalesce(sum(g.kernels), 0) AS kernels
    FROM picked p
    LEFT JOIN range_gpu g ON g.trace_id = p.trace_id AND g.range_id = p.range_id
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
        sum(kernel_ns) AS gpu_kernel_ns,
        CAST(NULL AS HUGEINT) AS own_kernel_ns,
        CAST(NULL AS HUGEINT) AS other_kernel_ns,
        sum(memcpy_ns) AS memcpy_ns,
        sum(memset_ns) AS memset_ns,
        CAST(NULL AS HUGEINT) AS gpu_busy_ns,
        CAST(NULL AS HUGEINT) AS projected_ns,
        sum(kernels) AS kernels
    FROM unattributed_gpu
    WHERE ($trace_id IS NULL OR trace_id = $trace_id)
      AND $match IS NULL AND $domain IS NULL AND NOT coalesce($filtered, false)
    GROUP BY 1
)
SELECT trace_id, name, instances, TRY_CAST(cpu_total_ns AS BIGINT) AS cpu_total_ns, cpu_avg_ns,
       TRY_CAST(gpu_kernel_ns AS BIGINT) AS gpu_kernel_ns, TRY_CAST(own_kernel_ns AS BIGINT) AS own_kernel_ns,
       TRY_CAST(other_kernel_ns AS BIGINT) AS other_kernel_ns, TRY_CAST(memcpy_ns AS BIGINT) AS memcpy_ns,
       TRY_CAST(memset_ns AS BIGINT) AS memset_ns, TRY_CAST(gpu_busy_ns AS BIGINT) AS gpu_busy_ns,
       TRY_CAST(projected_ns AS BIGINT) AS projected_ns, kernels
FROM (SELECT * FROM per_name UNION ALL SELECT * FROM unattributed)
ORDER BY trace_id NULLS FIRST, cpu_total_ns DESC NULLS LAST, name;
