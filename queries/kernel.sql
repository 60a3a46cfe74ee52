-- kernel: kernels grouped by name (optionally also by grid and block size) with their execution time statistics, like nvprof's "GPU activities" for kernels and nsys stats cuda_gpu_kern_sum.
-- input: kernel
-- param trace_id: only this trace (NULL: every trace in the workspace)
-- param per_trace: true to give each trace its own rows, percentages taken within the trace
-- param with_dims: true to group by name, grid size and block size (nsys cuda_gpu_kern_gb_sum)
-- column trace_id if per_trace: trace of the row (trace.trace_id)
-- column name: kernel name, demangled (kernel.name)
-- column grid if with_dims: grid size in blocks, 'XxYxZ'
-- column block if with_dims: block size in threads, 'XxYxZ'
-- column calls: kernel executions
-- column total_ns: summed execution time in ns (kernels on different streams overlap: not wall time)
-- column pct: total_ns as a percentage of the summed execution time of all kernels in the report (after --where; within the trace with per_trace), not of wall time
-- column range_pct if range: with --range: the row's time as a percentage of the GPU time of the matching ranges (the summed durations of the GPU operations they hold, each once: kernels, copies, memsets and whole-graph executions), not of the report's rows
-- column avg_ns: mean execution time in ns, rounded to 0.1 ns
-- column med_ns: median execution time in ns (the mean of the two middle values for an even count)
-- column min_ns: shortest execution in ns
-- column max_ns: longest execution in ns
-- column stddev_ns: sample standard deviation of the execution time in ns (n - 1 denominator, as nsys stats), rounded to 0.1 ns; 0 for a single execution
-- label pct: Time(%) of all kernels
-- label range_pct: Range(%) of its GPU time
--
-- Two shapes, one of them empty: DuckDB binds the parameters before it plans, so the branch
-- whose WHERE is false is never run. Grouping by name alone is twice as fast as grouping by
-- the optional keys too, even when they are all NULL.
WITH input AS NOT MATERIALIZED (
    SELECT *
    FROM kernel
    WHERE ($trace_id IS NULL OR trace_id = $trace_id)
      AND /* where */ TRUE
),
grouped AS (
    SELECT
        CAST(NULL AS INTEGER) AS trace_id,
        name,
        CAST(NULL AS VARCHAR) AS grid,
        CAST(NULL AS VARCHAR) AS block,
        /* include: dur_stats */
    FROM input
    WHERE NOT coalesce($per_trace OR $with_dims, false)
    GROUP BY name
    UNION ALL
    SELECT
        CASE WHEN $per_trace THEN trace_id END AS trace_id,
        name,
        CASE WHEN $with_dims THEN concat_ws('x', grid_x, grid_y, grid_z) END AS grid,
        CASE WHEN $with_dims THEN concat_ws('x', block_x, block_y, block_z) END AS block,
        /* include: dur_stats */
    FROM input
    WHERE coalesce($per_trace OR $with_dims, false)
    GROUP BY 1, 2, 3, 4
)
SELECT
    trace_id, name, grid, block, calls,
    TRY_CAST(total_ns AS BIGINT) AS total_ns,
    100.0 * total_ns / nullif(sum(total_ns) OVER (PARTITION BY trace_id), 0) AS pct,
    avg_ns, med_ns, min_ns, max_ns, stddev_ns
FROM grouped
ORDER BY trace_id NULLS FIRST, total_ns DESC, name, grid, block;
