-- src_kernel: Kineto 'kernel' events (2020-2021: 'Kernel'). Names are written demangled; the short
-- name is the base name without template arguments or parameters (src_demangled, demangle.sql).
-- Kineto records the sum of static and dynamic shared memory ('shared memory'), not the two parts:
-- both columns are NULL. It records no launch type, grid id, local memory or graph ids either.
-- The process is the CPU process of the launching call (raw.kineto_launch), else the trace's
-- only CPU process.
CREATE OR REPLACE TEMP VIEW src_kernel AS
SELECT
    k.src_row,
    k.device_id,
    k.context_id,
    k.stream_id,
    CASE WHEN l.pids = 1 THEN l.pid WHEN l.pid IS NULL THEN getvariable('kineto_cpu_pid') END AS pid,
    k.correlation_id,
    k.ts,
    k.dur,
    k.name,
    d.short_name,
    CAST(NULL AS VARCHAR)   AS mangled_name,
    k.grid[1] AS grid_x, k.grid[2] AS grid_y, k.grid[3] AS grid_z,
    k.block[1] AS block_x, k.block[2] AS block_y, k.block[3] AS block_z,
    k.registers_per_thread,
    CAST(NULL AS BIGINT)    AS static_shared_memory,
    CAST(NULL AS BIGINT)    AS dynamic_shared_memory,
    CAST(NULL AS BIGINT)    AS local_memory_per_thread,
    CAST(NULL AS VARCHAR)   AS launch_type,
    CAST(NULL AS BIGINT)    AS grid_id,
    CAST(NULL AS BIGINT)    AS graph_node_id,
    CAST(NULL AS BIGINT)    AS graph_id
FROM raw.kineto_gpu k
LEFT JOIN raw.kineto_launch l ON l.correlation = k.correlation_id
LEFT JOIN src_demangled d ON d.symbol = k.name
WHERE k.kind = 'kernel';
