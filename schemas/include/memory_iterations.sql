-- memory_iterations: the iterations of GPU memory events (the memory rules through memory_steps,
-- report --by memory). Over a CTE gpu_mem of memory_event rows (trace_id, memory_event_id, ts
-- and any other columns) defines steps: trace_id, step (1-based, by start), name, ts, end_ts of
-- each iteration: the NVTX ranges of grouping name $name when given, else PyTorch's ProfilerStep#N
-- ranges, each once (Kineto writes a step on the CPU and a copy on the GPU's lane: the earlier
-- start and its own end are kept); in_step: gpu_mem's rows with step and step_name, the step whose
-- span [ts, end_ts) holds them (one ASOF join; rows between steps have none).
step_ranges AS (
    SELECT trace_id, name, min(ts) AS ts, arg_min(ts + dur, ts) AS end_ts
    FROM nvtx_range
    WHERE ($trace_id IS NULL OR trace_id = $trace_id) AND dur IS NOT NULL
      AND CASE WHEN $name IS NULL THEN starts_with(name, 'ProfilerStep#') ELSE group_name = $name END
    GROUP BY trace_id, name, CASE WHEN $name IS NULL THEN 0 ELSE range_id END
),
steps AS (
    SELECT trace_id, row_number() OVER (PARTITION BY trace_id ORDER BY ts, end_ts, name) AS step, name, ts, end_ts
    FROM step_ranges
),
in_step AS (
    SELECT m.*, CASE WHEN m.ts < s.end_ts THEN s.step END AS step, CASE WHEN m.ts < s.end_ts THEN s.name END AS step_name
    FROM gpu_mem m
    ASOF LEFT JOIN steps s ON s.trace_id = m.trace_id AND s.ts <= m.ts
)
