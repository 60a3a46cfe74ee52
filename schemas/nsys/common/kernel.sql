-- src_kernel: kernel executions from CUPTI_ACTIVITY_KIND_KERNEL, names resolved through StringIds.
CREATE OR REPLACE TEMP VIEW src_kernel AS
SELECT
    k.rowid                              AS src_row,
    k.deviceId                           AS device_id,
    k.contextId                          AS context_id,
    k.streamId                           AS stream_id,
    (k.globalPid >> 24) & 16777215       AS pid,
    k.correlationId                      AS correlation_id,
    k.start                              AS ts,
    k."end" - k.start                    AS dur,
    coalesce(d.value, s.value, m.value)  AS name,
    s.value                              AS short_name,
    m.value                              AS mangled_name,
    k.gridX AS grid_x, k.gridY AS grid_y, k.gridZ AS grid_z,
    k.blockX AS block_x, k.blockY AS block_y, k.blockZ AS block_z,
    k.registersPerThread                 AS registers_per_thread,
    k.staticSharedMemory                 AS static_shared_memory,
    k.dynamicSharedMemory                AS dynamic_shared_memory,
    k.localMemoryPerThread               AS local_memory_per_thread,
    lt.label                             AS launch_type,
    k.gridId                             AS grid_id,
    nullif(k.graphNodeId, 0)             AS graph_node_id,
    nullif(k.graphId, 0)                 AS graph_id
FROM raw.CUPTI_ACTIVITY_KIND_KERNEL k
LEFT JOIN raw.StringIds d ON d.id = k.demangledName
LEFT JOIN raw.StringIds s ON s.id = k.shortName
LEFT JOIN raw.StringIds m ON m.id = k.mangledName
LEFT JOIN src_launch_type lt ON lt.id = k.launchType
WHERE k.start IS NOT NULL AND k."end" IS NOT NULL;
