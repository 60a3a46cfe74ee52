-- src_api_call: CUDA runtime calls (CUPTI_ACTIVITY_KIND_RUNTIME, api_kind 'runtime') and driver calls
-- (CUPTI_ACTIVITY_KIND_DRIVER, 'driver'). nvprof stores CUPTI callback ids, not names: they are named
-- through the shipped tables src_cbid_runtime and src_cbid_driver (schemas/nvprof/cbid_*.csv, generated
-- from the CUPTI headers; the two id spaces are separate). An id the table lacks is named
-- 'unknown runtime cbid N' / 'unknown driver cbid N'. threadId is stored signed: masked to the
-- unsigned 32-bit OS thread id. nvprof has no backtrace duplicates to drop.
CREATE OR REPLACE TEMP VIEW src_api_call AS
WITH calls AS (
    SELECT r.rowid * 2 AS src_row, r.*, 'runtime' AS api_kind,
           coalesce(c.name, 'unknown runtime cbid ' || coalesce(CAST(r.cbid AS VARCHAR), 'NULL')) AS api_name
    FROM raw.CUPTI_ACTIVITY_KIND_RUNTIME r
    LEFT JOIN src_cbid_runtime c ON c.cbid = r.cbid
    UNION ALL
    SELECT d.rowid * 2 + 1, d.*, 'driver',
           coalesce(c.name, 'unknown driver cbid ' || coalesce(CAST(d.cbid AS VARCHAR), 'NULL'))
    FROM raw.CUPTI_ACTIVITY_KIND_DRIVER d
    LEFT JOIN src_cbid_driver c ON c.cbid = d.cbid
)
SELECT
    src_row,
    processId                                 AS pid,
    threadId & 4294967295                     AS tid,
    start                                     AS ts,
    "end" - start                             AS dur,
    regexp_replace(api_name, '_v[0-9]+$', '') AS name,
    api_name                                  AS raw_name,   -- header spelling, e.g. 'cudaLaunchKernel_v7000'
    api_kind,
    correlationId                             AS correlation_id,
    returnValue                               AS return_value,
    CAST(NULL AS BIGINT)                      AS stack_id    -- nvprof records no call stacks
FROM calls
WHERE start IS NOT NULL AND "end" IS NOT NULL;
