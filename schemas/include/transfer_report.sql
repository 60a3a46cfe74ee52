-- transfer_report: the body of the memcpy and memset reports after their `input` CTE, which
-- gives each copy or set its `kind` (the label a row groups by), trace_id, dur and bytes: the
-- time statistics (dur_stats), the bytes statistics and the throughput, per kind.
grouped AS (
    SELECT
        CASE WHEN $per_trace THEN trace_id END AS trace_id,
        kind,
        /* include: dur_stats */,
        sum(bytes) AS total_bytes,
        round(avg(bytes), 1) AS avg_bytes,
        min(bytes) AS min_bytes,
        max(bytes) AS max_bytes
    FROM input
    GROUP BY 1, 2
)
SELECT
    trace_id, kind, calls,
    TRY_CAST(total_ns AS BIGINT) AS total_ns,
    100.0 * total_ns / nullif(sum(total_ns) OVER (PARTITION BY trace_id), 0) AS pct,
    avg_ns, med_ns, min_ns, max_ns, stddev_ns,
    TRY_CAST(total_bytes AS BIGINT) AS total_bytes, avg_bytes, min_bytes, max_bytes,
    CAST(total_bytes AS DOUBLE) / nullif(total_ns, 0) AS gb_per_s
FROM grouped
ORDER BY trace_id NULLS FIRST, total_ns DESC, kind;
