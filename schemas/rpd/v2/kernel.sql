-- src_kernel: rpd ops of type KernelExecution, and of type Task with a kernel name: the kernel nodes
-- of a HIP graph, each tied to its hipGraphLaunch call (no rocpd_kernelapi row: grid and workgroup
-- NULL; no graph id is recorded). name is the op's description (demangled by the
-- tracer), device_id the HIP device ordinal (gpuId), context_id the HSA queue; stream, grid (in
-- work-items), workgroup, LDS (group segment) and scratch come from the launching call's
-- rocpd_kernelapi row; stream_id is the HIP stream handle (hex text) as a number.
CREATE OR REPLACE TEMP VIEW src_kernel AS
SELECT
    o.id                                    AS src_row,
    CAST(o.gpuId AS INTEGER)                AS device_id,
    o.queueId                               AS context_id,
    TRY_CAST(k.stream AS BIGINT)            AS stream_id,
    o.pid                                   AS pid,
    o.api_id                                AS correlation_id,
    o.start                                 AS ts,
    o."end" - o.start                       AS dur,
    o.description                           AS name,
    n.short_name                            AS short_name,
    o.description                           AS mangled_name,
    k.gridX AS grid_x, k.gridY AS grid_y, k.gridZ AS grid_z,
    k.workgroupX AS block_x, k.workgroupY AS block_y, k.workgroupZ AS block_z,
    CAST(NULL AS BIGINT)                    AS registers_per_thread,
    k.groupSegmentSize                      AS static_shared_memory,
    CAST(NULL AS BIGINT)                    AS dynamic_shared_memory,
    k.privateSegmentSize                    AS local_memory_per_thread,
    CAST(NULL AS VARCHAR)                   AS launch_type,
    CAST(NULL AS BIGINT)                    AS grid_id,
    CAST(NULL AS BIGINT)                    AS graph_node_id,
    CAST(NULL AS BIGINT)                    AS graph_id
FROM src_rpd_op o
LEFT JOIN raw.rocpd_kernelapi k ON k.api_ptr_id = o.api_id
LEFT JOIN src_demangled n ON n.id = o.description_id
WHERE (o.op_type = 'KernelExecution' OR (o.op_type = 'Task' AND coalesce(o.description, '') <> ''))
  AND o.start IS NOT NULL AND o."end" IS NOT NULL;
