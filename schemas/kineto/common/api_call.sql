-- src_api_call: Kineto 'cuda_runtime' and 'cuda_driver' events (2020-2021: 'Runtime'; ROCm traces
-- write their HIP calls as 'cuda_runtime'). Names carry no version suffix; Kineto records no
-- return value.
CREATE OR REPLACE TEMP VIEW src_api_call AS
SELECT
    a.src_row,
    a.pid,
    a.tid,
    a.ts,
    a.dur,
    a.name,
    a.name                                            AS raw_name,
    CASE a.kind WHEN 'runtime' THEN 'runtime' ELSE 'driver' END AS api_kind,
    TRY_CAST(json_extract_string(a.args, '$.correlation') AS BIGINT) AS correlation_id,
    CAST(NULL AS BIGINT)                              AS return_value
FROM raw.kineto_typed a
WHERE a.kind IN ('runtime', 'driver') AND a.ts IS NOT NULL AND a.dur IS NOT NULL;
