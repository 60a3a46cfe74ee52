-- src_memory_event: CUDA memory allocations and frees from CUDA_GPU_MEMORY_USAGE_EVENTS (nsys
-- --cuda-memory-usage=true): bytes made negative for a free (memoryOperationType 1), the memory
-- kind by the export's CUDA_MEMOPR_MEMORY_KIND numbering (that of ENUM_CUDA_MEM_KIND, src_mem_kind).
-- nsys records no thread and no allocator totals (NULL); the correlation id is kept when not 0.
-- CUDA_GPU_MEMORY_POOL_EVENTS (pools created, destroyed, trimmed) are counted in ingest_stats
-- ('memory_event.pool_events_not_read'), not read here. No call stack (NULL). Without usage events
-- the view is empty: schemas/default/memory.sql's stands in (traceql.sources.adapters.adapter_sql).
-- needs rows of: raw.CUDA_GPU_MEMORY_USAGE_EVENTS
CREATE OR REPLACE TEMP VIEW src_memory_event AS
SELECT
    m.rowid                                                      AS src_row,
    CAST(m.deviceId AS INTEGER)                                  AS device_id,
    coalesce(mk.label, 'Unknown (' || m.memKind || ')')          AS mem_kind,
    (m.globalPid >> 24) & 16777215                               AS pid,
    CAST(NULL AS BIGINT)                                         AS tid,
    m.start                                                      AS ts,
    CASE WHEN m.memoryOperationType = 1 THEN -m.bytes ELSE m.bytes END AS bytes,
    m.address                                                    AS address,
    nullif(m.correlationId, 0)                                   AS correlation_id,
    CAST(NULL AS BIGINT)                                         AS total_allocated,
    CAST(NULL AS BIGINT)                                         AS total_reserved,
    CAST(NULL AS BIGINT)                                         AS stack_id
FROM raw.CUDA_GPU_MEMORY_USAGE_EVENTS m
LEFT JOIN src_mem_kind mk ON mk.id = m.memKind
WHERE m.start IS NOT NULL AND m.bytes IS NOT NULL AND m.memoryOperationType IN (0, 1);
