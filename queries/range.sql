-- range: NVTX ranges grouped by name (or nesting path) with their CPU time and the GPU work launched inside them, plus an '[unattributed]' row for GPU work launched outside every range.
-- param trace_id: only this trace (NULL: every trace in the workspace)
-- param group_by: 'name' to group range instances by name, 'path' by their full nesting path
-- param max_depth: keep only ranges whose depth is below this, so paths have at most this many levels (NULL: all)
-- param match: list of words; keep ranges whose name contains any of them, ignoring case (NULL: all ranges)
-- param domain: keep only ranges of this NVTX domain ('' is the default domain; NULL: all)
--
-- Columns: name; instances (range instances); cpu_total_ns and cpu_avg_ns (range durations on the
-- CPU, unclosed ranges left out); gpu_kernel_ns, memcpy_ns, memset_ns (summed GPU durations of the
-- work launched inside each instance, at any depth, then summed over instances); gpu_busy_ns (per
-- instance the union of those GPU intervals, summed over instances); projected_ns (per instance
-- from the first GPU start to the last GPU end, summed); kernels (kernel count).
-- A kernel counts in every range of its stack, so rows of nested ranges overlap.
WITH picked AS (
    SELECT r.*, CASE WHEN $group_by = 'path' THEN r.path ELSE r.name END AS label
    FROM nvtx_range r
    WHERE ($trace_id IS NULL OR r.trace_id = $trace_id)
      AND ($max_depth IS NULL OR r.depth < $max_depth)
      AND ($domain IS NULL OR r.domain = $domain)
      AND ($match IS NULL OR len(list_filter($match, w -> contains(lower(r.name), lower(w)))) > 0)
),
per_name AS (
    SELECT
        p.label AS name,
        count(*) AS instances,
        sum(p.dur) AS cpu_total_ns,
        CAST(round(avg(p.dur)) AS BIGINT) AS cpu_avg_ns,
        coalesce(sum(g.kernel_ns), 0) AS gpu_kernel_ns,
        coalesce(sum(g.memcpy_ns), 0) AS memcpy_ns,
        coalesce(sum(g.memset_ns), 0) AS memset_ns,
        coalesce(sum(g.gpu_busy_ns), 0) AS gpu_busy_ns,
        coalesce(sum(g.proj_end - g.proj_start), 0) AS projected_ns,
        coalesce(sum(g.kernels), 0) AS kernels
    FROM picked p
    LEFT JOIN range_gpu g ON g.trace_id = p.trace_id AND g.range_id = p.range_id
    GROUP BY p.label
),
outside AS (
    SELECT o.*
    FROM gpu_op o
    WHERE ($trace_id IS NULL OR o.trace_id = $trace_id)
      AND NOT EXISTS (SELECT 1 FROM op_range r WHERE r.trace_id = o.trace_id AND r.op_id = o.op_id)
),
unattributed AS (
    SELECT
        '[unattributed]' AS name,
        CAST(NULL AS BIGINT) AS instances,
        CAST(NULL AS HUGEINT) AS cpu_total_ns,
        CAST(NULL AS BIGINT) AS cpu_avg_ns,
        coalesce(sum(dur) FILTER (WHERE op_kind = 'kernel'), 0) AS gpu_kernel_ns,
        coalesce(sum(dur) FILTER (WHERE op_kind = 'memcpy'), 0) AS memcpy_ns,
        coalesce(sum(dur) FILTER (WHERE op_kind = 'memset'), 0) AS memset_ns,
        CAST(NULL AS HUGEINT) AS gpu_busy_ns,
        CAST(NULL AS HUGEINT) AS projected_ns,
        count(*) FILTER (WHERE op_kind = 'kernel') AS kernels
    FROM outside
    WHERE $match IS NULL AND $domain IS NULL
    HAVING count(*) > 0
)
SELECT name, instances, CAST(cpu_total_ns AS BIGINT) AS cpu_total_ns, cpu_avg_ns,
       CAST(gpu_kernel_ns AS BIGINT) AS gpu_kernel_ns, CAST(memcpy_ns AS BIGINT) AS memcpy_ns,
       CAST(memset_ns AS BIGINT) AS memset_ns, CAST(gpu_busy_ns AS BIGINT) AS gpu_busy_ns,
       CAST(projected_ns AS BIGINT) AS projected_ns, kernels
FROM (SELECT * FROM per_name UNION ALL SELECT * FROM unattributed)
ORDER BY cpu_total_ns DESC NULLS LAST, name;
