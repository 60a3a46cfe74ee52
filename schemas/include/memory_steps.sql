-- memory_steps: the iterations the memory rules compare (analyze/memory_leak,
-- analyze/allocator_churn) and each GPU memory event's iteration.
-- Defines gpu_mem: memory_event rows of GPU device memory (mem_kind 'Device'), and what
-- memory_iterations defines over it (steps, in_step).
gpu_mem AS (
    SELECT trace_id, memory_event_id, device_id, ts, bytes, allocated, reserved, address, free_event_id, range_id
    FROM memory_event
    WHERE ($trace_id IS NULL OR trace_id = $trace_id) AND mem_kind = 'Device' AND device_id IS NOT NULL
),
/* include: memory_iterations */
