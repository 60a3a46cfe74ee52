-- src_api_call: HIP API calls from rocprof's HIP table, under HIP's names (hipLaunchKernel,
-- hipMemcpy, __hipPushCallConfiguration); api_kind 'hip'. correlation_id is rocprof's Index, which
-- the kernel (OPS) or copy (COPY) the call enqueued shares.
CREATE OR REPLACE TEMP VIEW src_api_call AS
SELECT
    h.rowid                    AS src_row,
    h.pid                      AS pid,
    h.tid                      AS tid,
    h.BeginNs                  AS ts,
    h.EndNs - h.BeginNs        AS dur,
    h.Name                     AS name,
    h.Name                     AS raw_name,
    'hip'                      AS api_kind,
    h."Index"                  AS correlation_id,
    CAST(NULL AS BIGINT)       AS return_value,
    CAST(NULL AS BIGINT)       AS stack_id
FROM raw.HIP h
WHERE h.BeginNs IS NOT NULL AND h.EndNs IS NOT NULL;
