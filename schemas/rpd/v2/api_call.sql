-- src_api_call: rpd's API calls (rocpd_api: HIP and HSA calls under their own names, hipLaunchKernel,
-- hipMemcpyWithStream, ...); api_kind 'hip' for names starting hip/__hip, 'hsa' for hsa_*, else 'rpd' (the
-- tracer's own records: ApiTable::writeRows, rpdflush, hcc_activity_callback, ...). The call's id is
-- the correlation id its ops share (rocpd_api_ops). roctx ranges ('UserMarker' rows) are NVTX ranges
-- (nvtx_event.sql), not calls.
CREATE OR REPLACE TEMP VIEW src_api_call AS
SELECT
    a.id                       AS src_row,
    a.pid                      AS pid,
    a.tid                      AS tid,
    a.start                    AS ts,
    a."end" - a.start          AS dur,
    s.string                   AS name,
    s.string                   AS raw_name,
    CASE WHEN s.string LIKE 'hip%' OR s.string LIKE '\_\_hip%' ESCAPE '\' THEN 'hip'
         WHEN s.string LIKE 'hsa\_%' ESCAPE '\' THEN 'hsa' ELSE 'rpd' END AS api_kind,
    a.id                       AS correlation_id,
    CAST(NULL AS BIGINT)       AS return_value,
    CAST(NULL AS BIGINT)       AS stack_id
FROM raw.rocpd_api a
LEFT JOIN raw.rocpd_string s ON s.id = a.apiName_id
WHERE a.start IS NOT NULL AND a."end" IS NOT NULL AND s.string IS DISTINCT FROM 'UserMarker';
