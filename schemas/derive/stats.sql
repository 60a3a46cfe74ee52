-- derived_stats: source-independent diagnostics over the ingested contract rows of each trace,
-- as (trace_id, key, value, severity, detail) rows for ingest_stats. Those of a deferred family's
-- tables are written when it is built (traceql.derive.derivation.stats_sql); the ranges' own
-- read nvtx_range_any, whose rows are there before the family 'nesting' is.
/* include: nvtx_range_any */

CREATE OR REPLACE TEMP VIEW derived_stats AS
SELECT trace_id, 'nvtx_range.unclosed' AS key, count(*) AS value, 'warning' AS severity,
       'NVTX ranges that were opened but never closed: dur is NULL; they hold GPU work launched until the end of the trace' AS detail
FROM nvtx_range_any WHERE dur IS NULL GROUP BY trace_id
UNION ALL
SELECT trace_id, 'nvtx_range.beyond_depth_cap', count(*), 'warning',
       'NVTX ranges nested ' || getvariable('nvtx_depth_cap') || ' or more levels deep: no GPU work is attributed '
       || 'to them (it is to their outer levels), and their path skips the levels beyond the cap (> … >)'
FROM nvtx_range WHERE depth >= getvariable('nvtx_depth_cap') GROUP BY trace_id
UNION ALL
SELECT trace_id, 'nvtx_range.cross_thread', count(*), 'info',
       'start/end ranges that ended on another thread than they started (end_tid is set)'
FROM nvtx_range_any WHERE end_tid IS NOT NULL GROUP BY trace_id
UNION ALL
SELECT trace_id, 'nvtx_range.negative_duration', count(*), 'warning',
       'NVTX ranges whose end lies before their start'
FROM nvtx_range_any WHERE dur < 0 GROUP BY trace_id
UNION ALL
SELECT trace_id, 'gpu_op.negative_duration', count(*), 'warning',
       'kernels, copies or memsets whose end lies before their start'
FROM gpu_op WHERE dur < 0 GROUP BY trace_id
UNION ALL
SELECT trace_id, 'api_call.negative_duration', count(*), 'warning',
       'CUDA API calls whose end lies before their start'
FROM api_call WHERE dur < 0 GROUP BY trace_id
UNION ALL
SELECT trace_id, 'sync_event.without_call', count(*), 'info',
       'CUDA synchronizations with no API call of the same correlation id in their process: kind from the '
       || 'record''s own type where the format keeps a reliable one (nvprof), else ''unknown''; tid NULL'
FROM sync_event WHERE api_id IS NULL GROUP BY trace_id
UNION ALL
SELECT trace_id, 'gpu_op.without_correlation_id', count(*), 'info',
       'GPU operations with no correlation id (cannot be joined to a launching call)'
FROM gpu_op WHERE correlation_id IS NULL GROUP BY trace_id
UNION ALL
SELECT trace_id, 'device.undescribed', count(*), 'info',
       'GPUs that ran work but that the export does not describe: name and properties are NULL'
FROM device WHERE name IS NULL GROUP BY trace_id
UNION ALL
SELECT trace_id, 'launch.ops_without_launch', count(*), 'warning',
       'GPU operations with no API call of the same correlation id in their process (trimmed or partial trace?)'
FROM launch WHERE api_id IS NULL GROUP BY trace_id
UNION ALL
SELECT trace_id, 'launch.shared_correlation_ids', keys, 'warning',
       calls || ' CUDA API calls share ' || keys || ' (process, correlation id) keys with another call: each GPU '
       || 'operation was given the call of its key that started last before it (runtime calls first)'
FROM launch_shared_keys WHERE keys > 0
UNION ALL
SELECT u.trace_id, 'op_range.unattributed_ops', u.ops, 'info',
       'GPU operations whose launching call lies outside every NVTX range (the unattributed bucket)'
FROM unattributed_gpu u WHERE ops > 0
UNION ALL
-- range_gpu has at most one row per range: the ranges without one are the difference
SELECT n.trace_id, 'nvtx_range.without_gpu_work', n.ranges - coalesce(g.ranges, 0), 'info',
       'NVTX ranges that launched no GPU work (no row in range_gpu)'
FROM (SELECT trace_id, count(*) AS ranges FROM nvtx_range GROUP BY trace_id) n
LEFT JOIN (SELECT trace_id, count(*) AS ranges FROM range_gpu GROUP BY trace_id) g USING (trace_id)
WHERE n.ranges > coalesce(g.ranges, 0)
UNION ALL
SELECT trace_id, 'torch_op.backward_unpaired', count(*), 'info',
       'autograd backward nodes with a seq but no earlier forward op of that seq in their process (forward outside the capture?)'
FROM torch_op
WHERE kind = 'backward_node' AND seq IS NOT NULL AND fwd_range_id IS NULL AND name <> 'torch::autograd::GraphRoot'
GROUP BY trace_id
UNION ALL
SELECT trace_id, 'kernel_op.dtype_from_kernel_names', count(*), 'info',
       'kernels whose op call has no dtype in the trace (emit_nvtx sizes): its dtype, and so its bytes, were inferred from kernel names'
FROM kernel_op WHERE unit_kind = 'op' AND dtype IS NOT NULL GROUP BY trace_id
UNION ALL
SELECT trace_id, 'memory_event.free_without_allocation', count(*), 'info',
       'frees of blocks whose allocation the capture does not hold (allocated before it began): left out of the '
       || 'running-sum levels (memory_event.allocated), never making a level negative'
FROM memory_event WHERE bytes < 0 AND address IS NOT NULL AND alloc_event_id IS NULL GROUP BY trace_id
UNION ALL
SELECT trace_id, 'memory_event.allocation_not_freed', count(*), 'info',
       'allocations not freed within the capture (live at its end, or freed after it ended)'
FROM memory_event WHERE bytes > 0 AND address IS NOT NULL AND free_event_id IS NULL GROUP BY trace_id
UNION ALL
SELECT trace_id, 'memory_event.without_address', count(*), 'info',
       'allocations and frees without an address (PyTorch profiler traces before 2022): frees cannot be paired '
       || 'with their allocations, so the live allocations at a peak are unknown; levels are the running sum of bytes'
FROM memory_event WHERE address IS NULL GROUP BY trace_id
UNION ALL
-- the level before a device's first event: above zero only when frees without addresses outweighed
-- the allocations before them (schemas/derive/memory_event.sql)
SELECT trace_id, 'memory_event.held_before_capture', sum(held), 'info',
       'bytes that frees without an address show were allocated before the capture began (all devices and '
       || 'kinds): the running-sum levels (memory_event.allocated) start at this, not at zero'
FROM (SELECT trace_id, arg_min(allocated - bytes, memory_event_id) AS held
      FROM memory_event WHERE level_source = 'running_sum' AND address IS NULL
      GROUP BY trace_id, device_id, mem_kind)
WHERE held > 0 GROUP BY trace_id;
