-- src_kernel: kernel executions from CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL (nvprof's default) and
-- CUPTI_ACTIVITY_KIND_KERNEL (serialized kernels, e.g. under --analysis-metrics), both where they
-- have rows. nvprof stores only the mangled name (a StringTable id): src_demangled holds each distinct
-- kernel name demangled once with the C++ runtime's __cxa_demangle (schemas/nvprof/demangle.sql,
-- traceql.adapters); names that are not mangled (extern "C" kernels, cuBLAS/cuDNN SASS kernels) stay
-- as stored. short_name is the function name without namespace, template arguments and parameters.
-- The process is that of the launching call (src_launch), else the file's only process.
CREATE OR REPLACE TEMP VIEW src_kernel AS
WITH k AS (
    SELECT rowid * 2 AS src_row, * FROM raw.CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
    UNION ALL BY NAME
    SELECT rowid * 2 + 1 AS src_row, * FROM raw.CUPTI_ACTIVITY_KIND_KERNEL
)
SELECT
    k.src_row,
    k.deviceId                              AS device_id,
    k.contextId                             AS context_id,
    k.streamId                              AS stream_id,
    coalesce(l.pid, (SELECT pid FROM src_only_process)) AS pid,
    nullif(k.correlationId, 0)              AS correlation_id,  -- 0 means none in CUPTI records
    k.start                                 AS ts,
    k."end" - k.start                       AS dur,
    n.name                                  AS name,
    n.short_name                            AS short_name,
    n.symbol                                AS mangled_name,    -- the symbol as stored (plain for extern "C")
    k.gridX AS grid_x, k.gridY AS grid_y, k.gridZ AS grid_z,
    k.blockX AS block_x, k.blockY AS block_y, k.blockZ AS block_z,
    k.registersPerThread                    AS registers_per_thread,
    k.staticSharedMemory                    AS static_shared_memory,
    k.dynamicSharedMemory                   AS dynamic_shared_memory,
    k.localMemoryPerThread                  AS local_memory_per_thread,
    lt.label                                AS launch_type,
    k.gridId                                AS grid_id,
    nullif(k.graphNodeId, 0)                AS graph_node_id,
    nullif(k.graphId, 0)                    AS graph_id
FROM k
LEFT JOIN src_demangled n ON n.id = k.name
LEFT JOIN src_launch l ON l.correlation_id = k.correlationId
LEFT JOIN src_launch_type lt ON lt.id = k.launchType
WHERE k.start IS NOT NULL AND k."end" IS NOT NULL;
