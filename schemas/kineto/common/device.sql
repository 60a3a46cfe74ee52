-- src_device: the GPUs of deviceProperties (the trace's top-level member): id, name, numSms,
-- totalGlobalMem, computeMajor and computeMinor. Kineto records no clock, memory bandwidth, L2
-- size, bus location or UUID (NULL; peak FLOP/s then come from the table of GPUs by name). AMD
-- GPUs are listed the same way (computeMajor 9 on an MI250). GPUs that ran work but are not
-- described get a row from schemas/derive/device_seen.sql.
CREATE OR REPLACE TEMP VIEW src_device AS
WITH d AS (
    SELECT unnest(CAST(json(value) AS JSON[])) AS p
    FROM raw.kineto_member WHERE key = 'deviceProperties' AND json_type(json(value)) = 'ARRAY'
)
SELECT
    TRY_CAST(json_extract_string(p, '$.id') AS INTEGER)             AS device_id,
    json_extract_string(p, '$.name')                                AS name,
    TRY_CAST(json_extract_string(p, '$.numSms') AS INTEGER)         AS sm_count,
    CAST(NULL AS BIGINT)                                            AS memory_bandwidth,
    CAST(NULL AS BIGINT)                                            AS clock_rate,
    TRY_CAST(json_extract_string(p, '$.totalGlobalMem') AS BIGINT)  AS total_memory,
    CAST(NULL AS BIGINT)                                            AS l2_cache_size,
    TRY_CAST(json_extract_string(p, '$.computeMajor') AS INTEGER)   AS compute_major,
    TRY_CAST(json_extract_string(p, '$.computeMinor') AS INTEGER)   AS compute_minor,
    CAST(NULL AS VARCHAR)                                           AS bus_location,
    CAST(NULL AS VARCHAR)                                           AS uuid
FROM d
WHERE TRY_CAST(json_extract_string(p, '$.id') AS INTEGER) IS NOT NULL
QUALIFY row_number() OVER (PARTITION BY device_id ORDER BY device_id) = 1;
