-- memory_steps: the iterations the memory rules compare (analyze/memory_leak,
-- analyze/allocator_churn) and each GPU memory event's iteration.
-- Defines gpu_mem: memory_event rows of GPU device memory (mem_kind 'Device'); steps: trace_id,
-- step (1-based, by start), name, ts, end_ts of each iteration: the NVTX ranges of grouping name
-- $name when given, else PyTorch's ProfilerStep#N ranges, each once (Kineto writes a step on the
-- CPU and a copy on the GPU's lane: the earlier start and its own end are kept); in_step: gpu_mem's
-- rows with the step whose span [ts, end_ts) holds them (one ASOF join; rows between steps have
-- none).
gpu_mem AS (
    SELECT trace_id, memory_event_id, device_id, ts, bytes, allocated, reserved, address, free_event_id, range_id
    FROM memory_event
    WHERE ($trace_id IS NULL OR trace_id = $trace_id) AND mem_kind = 'Device' AND device_id IS NOT NULL
),
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
