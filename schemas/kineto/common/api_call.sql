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
    TRY_CAST(a.a[4] AS BIGINT)                         AS correlation_id,
    CAST(NULL AS BIGINT)                              AS return_value,
    k.stack_id                                        AS stack_id   -- its Python stack (stacks.sql)
FROM raw.kineto_typed a
LEFT JOIN src_api_stack k ON k.src_row = a.src_row
WHERE a.kind IN ('runtime', 'driver') AND a.ts IS NOT NULL AND a.dur IS NOT NULL;
