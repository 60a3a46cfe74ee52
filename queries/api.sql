-- api: CUDA runtime and driver API calls grouped by name (without the _vNNNN version suffix) with their time statistics, like nvprof's "API calls" and nsys stats cuda_api_sum.
-- input: api_call
-- param trace_id: only this trace (NULL: every trace in the workspace)
-- param per_trace: true to give each trace its own rows, percentages taken within the trace
-- column trace_id if per_trace: trace of the row (trace.trace_id)
-- column name: API function name without the _vNNNN suffix (api_call.name)
-- column calls: number of calls
-- column total_ns: summed call time in ns (calls on different threads overlap: not wall time)
-- column pct: total_ns as a percentage of the summed time of all API calls in the report (after --where; within the trace with per_trace), not of wall time
-- column range_pct if range: with --range: the row's call time as a percentage of the CPU time of the matching ranges (the time at least one of them was open, per process; calls on several threads overlap, so rows can add up to more than 100)
-- column avg_ns: mean call time in ns, rounded to 0.1 ns
-- column med_ns: median call time in ns (the mean of the two middle values for an even count)
-- column min_ns: shortest call in ns
-- column max_ns: longest call in ns
-- column stddev_ns: sample standard deviation of the call time in ns (n - 1 denominator, as nsys stats), rounded to 0.1 ns; 0 for a single call
-- column kind: 'runtime' or 'driver' (several joined by ', ' when one name is both)
-- label pct: Time(%) of all API calls
-- label range_pct: Range(%) of its CPU time
--
-- Two shapes, one of them empty: DuckDB binds the parameters before it plans, so the branch
-- whose WHERE is false is never run. Grouping by name alone is faster than grouping by a
-- trace_id that is NULL for every row.
WITH input AS NOT MATERIALIZED (
    SELECT *
    FROM api_call
    WHERE ($trace_id IS NULL OR trace_id = $trace_id)
      AND /* where */ TRUE
),
grouped AS (
    SELECT
        CAST(NULL AS INTEGER) AS trace_id,
        name,
        /* include: dur_stats */,
        string_agg(DISTINCT api_kind, ', ' ORDER BY api_kind) AS kind
    FROM input
    WHERE NOT coalesce($per_trace, false)
    GROUP BY name
    UNION ALL
    SELECT
        trace_id,
        name,
        /* include: dur_stats */,
        string_agg(DISTINCT api_kind, ', ' ORDER BY api_kind) AS kind
    FROM input
    WHERE coalesce($per_trace, false)
    GROUP BY trace_id, name
)
SELECT
    trace_id, name, calls,
    TRY_CAST(total_ns AS BIGINT) AS total_ns,
    100.0 * total_ns / nullif(sum(total_ns) OVER (PARTITION BY trace_id), 0) AS pct,
    avg_ns, med_ns, min_ns, max_ns, stddev_ns, kind
FROM grouped
ORDER BY trace_id NULLS FIRST, total_ns DESC, name;
