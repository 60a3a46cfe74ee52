-- src_stats: what the nsys adapters dropped, could not resolve or found unusual, as
-- (key, value, severity, detail) rows for ingest_stats.
CREATE OR REPLACE TEMP VIEW src_stats AS
SELECT 'api_call.backtrace_duplicates_dropped' AS key, count(*) AS value, 'info' AS severity,
       'CUPTI_ACTIVITY_KIND_RUNTIME rows with eventClass 67 (CUDA backtrace copies of real calls) left out' AS detail
FROM raw.CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass = 67
HAVING count(*) > 0
UNION ALL
SELECT 'kernel.unnamed', count(*), 'warning',
       'kernels whose name ids are not in StringIds: name is NULL'
FROM raw.CUPTI_ACTIVITY_KIND_KERNEL k
-- three anti-joins on equality (hash joins); 'id IN (the three ids)' was a nested loop of every
-- kernel against every string
WHERE NOT EXISTS (SELECT 1 FROM raw.StringIds s WHERE s.id = k.demangledName)
  AND NOT EXISTS (SELECT 1 FROM raw.StringIds s WHERE s.id = k.shortName)
  AND NOT EXISTS (SELECT 1 FROM raw.StringIds s WHERE s.id = k.mangledName)
HAVING count(*) > 0
UNION ALL
SELECT 'source.rows_without_start_or_end', count(*), 'warning',
       'GPU or API rows with a NULL start or end, left out'
FROM (SELECT start, "end" FROM raw.CUPTI_ACTIVITY_KIND_KERNEL
      UNION ALL SELECT start, "end" FROM raw.CUPTI_ACTIVITY_KIND_MEMCPY
      UNION ALL SELECT start, "end" FROM raw.CUPTI_ACTIVITY_KIND_MEMSET
      UNION ALL SELECT start, "end" FROM raw.CUPTI_ACTIVITY_KIND_RUNTIME
      UNION ALL SELECT start, "end" FROM raw.CUPTI_ACTIVITY_KIND_GRAPH_TRACE)
WHERE start IS NULL OR "end" IS NULL
HAVING count(*) > 0
UNION ALL
SELECT 'nvtx.rows_without_start', count(*), 'warning',
       'NVTX range or mark rows with a NULL start, left out'
FROM raw.NVTX_EVENTS WHERE eventType IN (34, 59, 60, 70, 71) AND start IS NULL
HAVING count(*) > 0
UNION ALL
SELECT 'nvtx.event_types_not_read.' || eventType, count(*), 'info',
       'NVTX_EVENTS rows of a type that is neither a range nor a mark (domain, thread or category names, payload schemas...)'
FROM raw.NVTX_EVENTS WHERE eventType NOT IN (34, 59, 60, 70, 71, 75, 33, 39)
GROUP BY eventType
UNION ALL
SELECT 'graph_exec.executions', count(*), 'info',
       'whole-CUDA-graph executions (CUPTI_ACTIVITY_KIND_GRAPH_TRACE, --cuda-graph-trace=graph) in graph_exec: their '
       || 'nodes have no kernel, memcpy or memset rows; report --by gpu and summary show them as [CUDA graph N], '
       || 'kernel totals, launch, range and GPU busy time do not count them'
FROM raw.CUPTI_ACTIVITY_KIND_GRAPH_TRACE WHERE start IS NOT NULL AND "end" IS NOT NULL
HAVING count(*) > 0
UNION ALL
SELECT 'graph_exec.gpu_ns', sum("end" - start), 'info',
       'summed GPU duration in ns of the whole-graph executions of graph_exec (not wall time)'
FROM raw.CUPTI_ACTIVITY_KIND_GRAPH_TRACE WHERE start IS NOT NULL AND "end" IS NOT NULL
HAVING count(*) > 0
UNION ALL
SELECT 'kernel.graph_id_unknown', count(*), 'info',
       'kernels run as CUDA graph nodes (graphNodeId set) whose export records no graphId (before schema 3.24): '
       || 'graph_id is NULL, since no graph event names the graph of a node'
FROM raw.CUPTI_ACTIVITY_KIND_KERNEL
WHERE coalesce(graphNodeId, 0) <> 0 AND coalesce(graphId, 0) = 0 AND start IS NOT NULL AND "end" IS NOT NULL
HAVING count(*) > 0
UNION ALL
SELECT 'device.non_cuda_adapters_skipped', count(*), 'info',
       'TARGET_INFO_GPU rows with no streaming multiprocessors and no compute capability (display adapters), '
       || 'not listed in device'
FROM raw.TARGET_INFO_GPU WHERE id IS NOT NULL AND coalesce(smCount, 0) = 0 AND coalesce(computeMajor, 0) = 0
HAVING count(*) > 0
UNION ALL
SELECT 'device.sm_count_missing', count(*), 'warning',
       'TARGET_INFO_GPU rows of CUDA GPUs (compute capability given) without a readable SM count: listed in '
       || 'device with sm_count NULL (peak FLOP/s then come from the table of GPUs by name)'
FROM raw.TARGET_INFO_GPU WHERE id IS NOT NULL AND coalesce(smCount, 0) <= 0 AND coalesce(computeMajor, 0) > 0
HAVING count(*) > 0
UNION ALL
SELECT 'memory_event.pool_events_not_read', count(*), 'info',
       'CUDA_GPU_MEMORY_POOL_EVENTS rows (stream-ordered memory pools created, destroyed or trimmed): not in '
       || 'memory_event, whose levels count the allocations and frees of CUDA_GPU_MEMORY_USAGE_EVENTS, those '
       || 'made from pools included; what a pool reserves beyond them is not shown'
FROM raw.CUDA_GPU_MEMORY_POOL_EVENTS
HAVING count(*) > 0;
