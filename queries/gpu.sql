-- gpu: every GPU activity (kernels by name, memcpy by direction, memset, whole CUDA graph executions) in one table with time statistics, like nvprof's "GPU activities" and nsys stats cuda_gpu_sum.
-- input: gpu_op
-- param trace_id: only this trace (NULL: every trace in the workspace)
-- param per_trace: true to give each trace its own rows, percentages taken within the trace
-- column trace_id if per_trace: trace of the row (trace.trace_id)
-- column name: kernel name, '[CUDA memcpy <direction>]' or '[CUDA memset]' (gpu_op.name), or '[CUDA graph <graph_id>]' for the executions of a whole graph traced as one (graph_exec)
-- column calls: number of operations
-- column total_ns: summed GPU time in ns (operations on different streams overlap: not wall time)
-- column pct: total_ns as a percentage of the summed time of all GPU operations in the report (kernels, copies, memsets and whole-graph executions; after --where; within the trace with per_trace), not of wall time
-- column range_pct if range: with --range: the row's time as a percentage of the GPU time of the matching ranges (the summed durations of the GPU operations they hold, each once: kernels, copies, memsets and whole-graph executions), not of the report's rows
-- column avg_ns: mean duration in ns, rounded to 0.1 ns
-- column med_ns: median duration in ns (the mean of the two middle values for an even count)
-- column min_ns: shortest operation in ns
-- column max_ns: longest operation in ns
-- column stddev_ns: sample standard deviation of the duration in ns (n - 1 denominator, as nsys stats), rounded to 0.1 ns; 0 for a single operation
-- column category: 'kernel', 'memcpy' or 'memset' (gpu_op.op_kind), or 'graph'
-- label pct: Time(%) of all GPU activities
-- label range_pct: Range(%) of its GPU time
--
-- Whole-graph executions (graph_exec: nsys --cuda-graph-trace=graph, the default, records one
-- row per graph launch and none for its nodes) are GPU time that gpu_op lacks: they join the
-- input as rows of op_kind 'graph' with gpu_op's columns (op_id and bytes NULL), so --where
-- filters them as it filters the rest. Their launching call (api_id, NULL for gpu_op rows) is what a
-- --range filter (traceql/rangefilter.py) looks at for them.
WITH ops AS (
    /* include: gpu_work(graph_op_id = CAST(NULL AS BIGINT)) */
),
input AS (
    SELECT *
    FROM ops
    WHERE ($trace_id IS NULL OR trace_id = $trace_id)
      AND /* where */ TRUE
),
grouped AS (
    SELECT
        CASE WHEN $per_trace THEN trace_id END AS trace_id,
        name,
        op_kind AS category,
        /* include: dur_stats */
    FROM input
    GROUP BY 1, 2, 3
)
SELECT
    trace_id, name, calls,
    TRY_CAST(total_ns AS BIGINT) AS total_ns,
    100.0 * total_ns / nullif(sum(total_ns) OVER (PARTITION BY trace_id), 0) AS pct,
    avg_ns, med_ns, min_ns, max_ns, stddev_ns, category
FROM grouped
ORDER BY trace_id NULLS FIRST, total_ns DESC, name, category;
