-- src_kernel: kernel dispatches from rocprof's OPS table. name is OPS.Name (rocprof writes it
-- demangled), short_name the function name without namespace, template arguments and parameters.
-- AMD vocabulary in CUDA's columns: device_id is rocprof's dev-id, the HSA agent index (CPU agents
-- counted: the first GPU of a two-socket host is 2); context_id the HSA queue; stream_id the HIP
-- stream; correlation_id the Index shared with the HIP call that launched it. rocprof v1 records no
-- grid, workgroup, register or LDS sizes in results.db: NULL.
CREATE OR REPLACE TEMP VIEW src_kernel AS
SELECT
    o.rowid                                 AS src_row,
    CAST(o."dev-id" AS INTEGER)             AS device_id,
    o."queue-id"                            AS context_id,
    o."stream-id"                           AS stream_id,
    o.pid                                   AS pid,
    o."Index"                               AS correlation_id,
    o.BeginNs                               AS ts,
    o.EndNs - o.BeginNs                     AS dur,
    o.Name                                  AS name,
    n.short_name                            AS short_name,
    o.Name                                  AS mangled_name,
    CAST(NULL AS BIGINT) AS grid_x, CAST(NULL AS BIGINT) AS grid_y, CAST(NULL AS BIGINT) AS grid_z,
    CAST(NULL AS BIGINT) AS block_x, CAST(NULL AS BIGINT) AS block_y, CAST(NULL AS BIGINT) AS block_z,
    CAST(NULL AS BIGINT)                    AS registers_per_thread,
    CAST(NULL AS BIGINT)                    AS static_shared_memory,
    CAST(NULL AS BIGINT)                    AS dynamic_shared_memory,
    CAST(NULL AS BIGINT)                    AS local_memory_per_thread,
    CAST(NULL AS VARCHAR)                   AS launch_type,
    CAST(NULL AS BIGINT)                    AS grid_id,
    CAST(NULL AS BIGINT)                    AS graph_node_id,
    CAST(NULL AS BIGINT)                    AS graph_id
FROM raw.OPS o
LEFT JOIN src_demangled n ON n.symbol = o.Name
WHERE o.BeginNs IS NOT NULL AND o.EndNs IS NOT NULL;
