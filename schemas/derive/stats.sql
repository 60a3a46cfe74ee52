-- derived_stats: source-independent diagnostics over the ingested contract rows of each trace,
-- as (trace_id, key, value, severity, detail) rows for ingest_stats.
CREATE OR REPLACE TEMP VIEW derived_stats AS
SELECT trace_id, 'nvtx_range.unclosed' AS key, count(*) AS value, 'warning' AS severity,
       'NVTX ranges that were opened but never closed: dur is NULL' AS detail
FROM nvtx_range WHERE dur IS NULL GROUP BY trace_id
UNION ALL
SELECT trace_id, 'nvtx_range.cross_thread', count(*), 'info',
       'start/end ranges that ended on another thread than they started (end_tid is set)'
FROM nvtx_range WHERE end_tid IS NOT NULL GROUP BY trace_id
UNION ALL
SELECT trace_id, 'nvtx_range.negative_duration', count(*), 'warning',
       'NVTX ranges whose end lies before their start'
FROM nvtx_range WHERE dur < 0 GROUP BY trace_id
UNION ALL
SELECT trace_id, 'gpu_op.negative_duration', count(*), 'warning',
       'kernels, copies or memsets whose end lies before their start'
FROM gpu_op WHERE dur < 0 GROUP BY trace_id
UNION ALL
SELECT trace_id, 'api_call.negative_duration', count(*), 'warning',
       'CUDA API calls whose end lies before their start'
FROM api_call WHERE dur < 0 GROUP BY trace_id
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
SELECT l.trace_id, 'op_range.unattributed_ops', count(*), 'info',
       'GPU operations whose launching call lies outside every NVTX range (the unattributed bucket)'
FROM launch l
WHERE NOT EXISTS (SELECT 1 FROM op_range r WHERE r.trace_id = l.trace_id AND r.op_id = l.op_id)
GROUP BY l.trace_id
UNION ALL
SELECT n.trace_id, 'nvtx_range.without_gpu_work', count(*), 'info',
       'NVTX ranges that launched no GPU work (no row in range_gpu)'
FROM nvtx_range n
WHERE NOT EXISTS (SELECT 1 FROM range_gpu g WHERE g.trace_id = n.trace_id AND g.range_id = n.range_id)
GROUP BY n.trace_id
UNION ALL
SELECT trace_id, 'torch_op.backward_unpaired', count(*), 'info',
       'autograd backward nodes with a seq but no earlier forward op of that seq in their process (forward outside the capture?)'
FROM torch_op
WHERE kind = 'backward_node' AND seq IS NOT NULL AND fwd_range_id IS NULL AND name <> 'torch::autograd::GraphRoot'
GROUP BY trace_id
UNION ALL
SELECT trace_id, 'kernel_op.dtype_from_kernel_names', count(*), 'info',
       'kernels whose op call has no dtype in the trace (emit_nvtx sizes): its dtype, and so its bytes, were inferred from kernel names'
FROM kernel_op WHERE unit_kind = 'op' AND dtype IS NOT NULL GROUP BY trace_id;
