-- src_api_call: CUDA runtime and driver calls from CUPTI_ACTIVITY_KIND_RUNTIME (nsys keeps both there),
-- without the eventClass 67 rows, which are CUDA-backtrace duplicates of real calls.
CREATE OR REPLACE TEMP VIEW src_api_call AS
WITH names AS (
    -- the few distinct call names, with the _vNNNN suffix stripped once each
    SELECT id, value AS raw_name, regexp_replace(value, '_v[0-9]+$', '') AS name
    FROM raw.StringIds
    WHERE id IN (SELECT DISTINCT nameId FROM raw.CUPTI_ACTIVITY_KIND_RUNTIME)
)
SELECT
    r.rowid                                   AS src_row,
    (r.globalTid >> 24) & 16777215            AS pid,
    r.globalTid & 16777215                    AS tid,
    r.start                                   AS ts,
    r."end" - r.start                         AS dur,
    s.name                                    AS name,
    s.raw_name                                AS raw_name,
    CASE r.eventClass WHEN 0 THEN 'runtime' WHEN 1 THEN 'driver' WHEN 13 THEN 'egl driver'
         ELSE 'other class ' || coalesce(CAST(r.eventClass AS VARCHAR), 'NULL') END AS api_kind,
    r.correlationId                           AS correlation_id,
    r.returnValue                             AS return_value,
    k.stack_id                                AS stack_id   -- its CUDA backtrace (stacks.sql)
FROM raw.CUPTI_ACTIVITY_KIND_RUNTIME r
LEFT JOIN names s ON s.id = r.nameId
LEFT JOIN src_api_stack k ON k.src_row = r.rowid
WHERE r.eventClass IS DISTINCT FROM 67
  AND r.start IS NOT NULL AND r."end" IS NOT NULL;
