-- What the host waited on, from Nsight Systems tables (contract tables sync_event, osrt_call,
-- profiler_overhead, gpu_metric; schemas/derive/host.sql numbers the rows and links each
-- synchronization to its API call). Rows without a start or end are left out.

-- src_sync_event: CUPTI synchronization records. 0xFFFFFFFF in contextId, streamId or eventId
-- means "not applicable" (CUPTI_SYNCHRONIZATION_INVALID_VALUE): NULL. kind_hint is NULL: nsys's
-- syncType numbering differs between exporter versions, so the kind comes from the API call.
CREATE OR REPLACE TEMP VIEW src_sync_event AS
SELECT
    s.rowid                                        AS src_row,
    CAST(NULL AS VARCHAR)                          AS kind_hint,
    s.deviceId                                     AS device_id,
    nullif(s.contextId, 4294967295)                AS context_id,
    nullif(s.streamId, 4294967295)                 AS stream_id,
    nullif(s.eventId, 4294967295)                  AS event_id,
    (s.globalPid >> 24) & 16777215                 AS pid,
    s.start                                        AS ts,
    s."end" - s.start                              AS dur,
    s.correlationId                                AS correlation_id
FROM raw.CUPTI_ACTIVITY_KIND_SYNCHRONIZATION s
WHERE s.start IS NOT NULL AND s."end" IS NOT NULL;

-- src_osrt_call: OS runtime calls (OSRT_API), named through StringIds.
CREATE OR REPLACE TEMP VIEW src_osrt_call AS
WITH names AS (
    SELECT id, value FROM raw.StringIds WHERE id IN (SELECT DISTINCT nameId FROM raw.OSRT_API)
)
SELECT
    o.rowid                                        AS src_row,
    (o.globalTid >> 24) & 16777215                 AS pid,
    o.globalTid & 16777215                         AS tid,
    o.start                                        AS ts,
    o."end" - o.start                              AS dur,
    n.value                                        AS name,
    o.returnValue                                  AS return_value,
    o.nestingLevel                                 AS nesting_level
FROM raw.OSRT_API o
LEFT JOIN names n ON n.id = o.nameId
WHERE o.start IS NOT NULL AND o."end" IS NOT NULL;

-- src_profiler_overhead: PROFILER_OVERHEAD intervals, named through StringIds.
CREATE OR REPLACE TEMP VIEW src_profiler_overhead AS
SELECT
    (p.globalTid >> 24) & 16777215                 AS pid,
    p.globalTid & 16777215                         AS tid,
    p.start                                        AS ts,
    p."end" - p.start                              AS dur,
    s.value                                        AS name
FROM raw.PROFILER_OVERHEAD p
LEFT JOIN raw.StringIds s ON s.id = p.nameId
WHERE p.start IS NOT NULL AND p."end" IS NOT NULL;

-- src_gpu_metric: GPU_METRICS samples named through TARGET_INFO_GPU_METRICS. A sample's GPU is
-- the low byte of its typeId (as the nsys recipes read it); metric ids name the same metric for
-- every GPU of a metric set, so names are looked up by metricId alone (one name per id).
CREATE OR REPLACE TEMP VIEW src_gpu_metric AS
WITH names AS (
    SELECT metricId, min(metricName) AS metric FROM raw.TARGET_INFO_GPU_METRICS GROUP BY metricId
)
SELECT
    m.typeId & 255                                 AS device_id,
    m.timestamp                                    AS ts,
    n.metric                                       AS metric,
    m.value                                        AS value
FROM raw.GPU_METRICS m
LEFT JOIN names n ON n.metricId = m.metricId
WHERE m.timestamp IS NOT NULL;
