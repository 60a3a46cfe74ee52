-- src_api_call: HIP and HSA API calls, the rocpd regions whose event category is a HIP_* or HSA_*
-- API domain (e.g. HIP_RUNTIME_API_EXT, HIP_COMPILER_API_EXT, HSA_CORE_API); api_kind is that
-- category, lower-cased. Names are HIP's (hipLaunchKernel, hipMemcpy, __hipPushCallConfiguration),
-- not CUDA's. correlation_id is the event's stack_id, which the kernel or copy the call enqueued
-- shares. rocTX ranges (MARKER_* categories) are NVTX ranges, not API calls (nvtx_event.sql).
CREATE OR REPLACE TEMP VIEW src_api_call AS
SELECT
    r.id                       AS src_row,
    t.pid                      AS pid,
    t.tid                      AS tid,
    r.start                    AS ts,
    r."end" - r.start          AS dur,
    s.string                   AS name,
    s.string                   AS raw_name,
    lower(e.category)          AS api_kind,
    e.correlation_id           AS correlation_id,
    CAST(NULL AS BIGINT)       AS return_value,  -- rocpd keeps return values among region_args: not read
    CAST(NULL AS BIGINT)       AS stack_id
FROM raw.rocpd_region r
JOIN src_rocpd_event e ON e.event_id = r.event_id
LEFT JOIN raw.rocpd_string s ON s.id = r.name_id
LEFT JOIN src_rocpd_thread t ON t.id = r.tid
WHERE (e.category LIKE 'HIP\_%' ESCAPE '\' OR e.category LIKE 'HSA\_%' ESCAPE '\')
  AND r.start IS NOT NULL AND r."end" IS NOT NULL;
