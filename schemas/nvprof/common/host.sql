-- What the host waited on, from nvprof tables: CUDA synchronizations only (nvprof traces no OS
-- runtime calls, records its overhead per CUPTI buffer rather than per thread, and samples no
-- GPU metrics on a timeline): the other three views keep their empty defaults
-- (schemas/default/host.sql).

-- src_sync_event: CUPTI synchronization records. nvprof keeps CUPTI's type numbering, so it is a
-- usable hint when the API call is missing; 0xFFFFFFFF in streamId or cudaEventId means none. The
-- process is that of the call with the record's correlation id (src_launch), else the file's only
-- process; the device that of the context.
CREATE OR REPLACE TEMP VIEW src_sync_event AS
SELECT
    s._id_                                         AS src_row,
    CASE s.type WHEN 1 THEN 'event' WHEN 2 THEN 'stream_wait' WHEN 3 THEN 'stream' WHEN 4 THEN 'device' END
                                                   AS kind_hint,
    c.device_id                                    AS device_id,
    s.contextId                                    AS context_id,
    nullif(s.streamId, 4294967295)                 AS stream_id,
    nullif(s.cudaEventId, 4294967295)              AS event_id,
    coalesce(l.pid, (SELECT pid FROM src_only_process)) AS pid,
    s.start                                        AS ts,
    s."end" - s.start                              AS dur,
    nullif(s.correlationId, 0)                     AS correlation_id
FROM raw.CUPTI_ACTIVITY_KIND_SYNCHRONIZATION s
LEFT JOIN (SELECT contextId, min(deviceId) AS device_id FROM raw.CUPTI_ACTIVITY_KIND_CONTEXT GROUP BY contextId) c
  ON c.contextId = s.contextId
LEFT JOIN src_launch l ON l.correlation_id = s.correlationId
WHERE s.start IS NOT NULL AND s."end" IS NOT NULL;
