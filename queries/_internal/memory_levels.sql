-- _internal/memory_levels: a trace's allocated and reserved GPU memory over time, and its iterations, for `traceql plot --by memory`.
-- param trace_id: the trace
-- column kind: 'level' (the level after a memory event) or 'iteration' (the start of a ProfilerStep range)
-- column device_id: the GPU (memory_event.device_id); NULL for an iteration
-- column at_ns: time in ns after the trace's start (trace.start_ts); an iteration's first start (the CPU range or its GPU-lane copy)
-- column allocated: bytes of device memory allocated after the event (memory_event.allocated); NULL for an iteration
-- column reserved: bytes the allocator reserved after the event (memory_event.reserved); NULL when not recorded and for an iteration
-- column name: the iteration's range name (e.g. 'ProfilerStep#5'); NULL for a level
SELECT kind, device_id, at_ns, allocated, reserved, name
FROM (
    SELECT 'level' AS kind, m.device_id, m.ts - t.start_ts AS at_ns, m.allocated, m.reserved,
           CAST(NULL AS VARCHAR) AS name, m.memory_event_id AS k
    FROM memory_event m
    JOIN trace t ON t.trace_id = m.trace_id
    WHERE m.trace_id = $trace_id AND m.mem_kind = 'Device' AND m.device_id IS NOT NULL
    UNION ALL
    -- once per step: Kineto writes a ProfilerStep range on the CPU and its copy on the GPU's lane
    SELECT 'iteration', NULL, min(r.ts) - min(t.start_ts), NULL, NULL, r.name, min(r.range_id)
    FROM nvtx_range r
    JOIN trace t ON t.trace_id = r.trace_id
    WHERE r.trace_id = $trace_id AND starts_with(r.name, 'ProfilerStep#')
    GROUP BY r.name
)
ORDER BY kind, device_id, at_ns, k;
