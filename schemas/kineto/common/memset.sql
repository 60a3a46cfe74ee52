-- src_memset: Kineto 'gpu_memset' events (2020-2021: 'Memset'); the memory kind is the word in the
-- name, 'Memset (Device)'. Kineto records no value written.
CREATE OR REPLACE TEMP VIEW src_memset AS
SELECT
    m.src_row,
    m.device_id,
    m.context_id,
    m.stream_id,
    CASE WHEN l.pids = 1 THEN l.pid WHEN l.pid IS NULL THEN getvariable('kineto_cpu_pid') END AS pid,
    m.correlation_id,
    m.ts,
    m.dur,
    m.bytes,
    CAST(NULL AS BIGINT)            AS value,
    nullif(regexp_extract(m.name, '^Memset \((\w+)\)', 1), '') AS mem_kind,
    CAST(NULL AS BIGINT)            AS graph_node_id,
    CAST(NULL AS BIGINT)            AS graph_id
FROM raw.kineto_gpu m
LEFT JOIN raw.kineto_launch l ON l.correlation = m.correlation_id
WHERE m.kind = 'memset';
