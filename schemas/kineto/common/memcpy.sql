-- src_memcpy: Kineto 'gpu_memcpy' events (2020-2021: 'Memcpy'). The direction and the memory kinds
-- come from the name, 'Memcpy HtoD (Pageable -> Device)': copy_kind 'Host-to-Device', src_kind
-- 'Pageable', dst_kind 'Device'. bytes is the 'bytes' argument; ROCm traces write none on the copy,
-- it is then the 'size' argument of the launching HIP call.
CREATE OR REPLACE TEMP VIEW src_memcpy AS
WITH m AS (
    SELECT k.*, regexp_extract(k.name, '^Memcpy (\w+)(?: \((\w+) -> (\w+)\))?', ['abbr', 'src', 'dst']) AS p
    FROM raw.kineto_gpu k
    WHERE k.kind = 'memcpy'
)
SELECT
    m.src_row,
    m.device_id,
    m.context_id,
    m.stream_id,
    CASE WHEN l.pids = 1 THEN l.pid WHEN l.pid IS NULL THEN getvariable('kineto_cpu_pid') END AS pid,
    m.correlation_id,
    m.ts,
    m.dur,
    coalesce(m.bytes, TRY_CAST(l.size AS BIGINT)) AS bytes,
    coalesce(ck.label, nullif(m.p.abbr, ''), 'Unknown') AS copy_kind,
    nullif(m.p.src, '')             AS src_kind,
    nullif(m.p.dst, '')             AS dst_kind,
    CAST(NULL AS INTEGER)           AS src_device_id,
    CAST(NULL AS INTEGER)           AS dst_device_id,
    CAST(NULL AS BIGINT)            AS graph_node_id,
    CAST(NULL AS BIGINT)            AS graph_id
FROM m
LEFT JOIN src_copy_kind ck ON ck.abbr = m.p.abbr
LEFT JOIN raw.kineto_launch l ON l.correlation = m.correlation_id;
