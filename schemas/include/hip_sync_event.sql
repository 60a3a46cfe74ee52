-- hip_sync_event: the synchronizations of an AMD trace, read from its HIP API calls (src_api_call):
-- AMD's tracers record no synchronization activity of their own (CUPTI's), so each blocking or
-- waiting HIP call is one synchronization, timed as the call: hipDeviceSynchronize and
-- hipCtxSynchronize ('device'), hipStreamSynchronize ('stream'), hipEventSynchronize ('event'),
-- hipEventQuery ('event_query', does not block), hipStreamWaitEvent ('stream_wait', the GPU waits),
-- with their per-thread-stream '_spt' forms. The call's correlation id ties the row to its
-- api_call (schemas/derive/host.sql); the device, stream and event are not recorded (NULL).
-- The columns of src_sync_event (schemas/default/host.sql).
SELECT
    a.src_row,
    CASE
        WHEN regexp_matches(a.name, '^(hipDeviceSynchronize|hipCtxSynchronize)') THEN 'device'
        WHEN regexp_matches(a.name, '^hipStreamSynchronize') THEN 'stream'
        WHEN regexp_matches(a.name, '^hipEventSynchronize') THEN 'event'
        WHEN regexp_matches(a.name, '^hipEventQuery') THEN 'event_query'
        ELSE 'stream_wait'
    END                        AS kind_hint,
    CAST(NULL AS INTEGER)      AS device_id,
    CAST(NULL AS BIGINT)       AS context_id,
    CAST(NULL AS BIGINT)       AS stream_id,
    CAST(NULL AS BIGINT)       AS event_id,
    a.pid,
    a.ts,
    a.dur,
    a.correlation_id
FROM src_api_call a
WHERE regexp_matches(a.name, '^(hipDeviceSynchronize|hipCtxSynchronize|hipStreamSynchronize|hipEventSynchronize|hipEventQuery|hipStreamWaitEvent)(_spt)?$')
