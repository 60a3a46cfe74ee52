-- What the host waited on, from a PyTorch profiler (Kineto) trace: CUDA synchronizations only
-- ('cuda_sync' events, written by PyTorch 2.1 and later on the GPU's lanes). Kineto traces no OS
-- runtime calls, no profiler overhead per thread and no GPU metric samples: those views keep
-- their empty defaults (schemas/default/host.sql).

-- src_sync_event: the CUPTI synchronization records Kineto writes as 'cuda_sync' events, named by
-- their 'cuda_sync_kind' ('Context Sync', 'Stream Sync', 'Event Sync', 'Stream Wait Event'),
-- which is the kind's hint when the API call is missing. A 'stream' of 0xFFFFFFFF means none; the
-- event waited for is 'wait_on_cuda_event_id'. The process is that of the call with the
-- record's correlation id (raw.kineto_launch), else the trace's only CPU process.
CREATE OR REPLACE TEMP VIEW src_sync_event AS
WITH s AS (
    SELECT src_row, ts, dur,
           json_extract_string(args, ['$.cuda_sync_kind', '$.device', '$.context', '$.stream',
                                      '$.wait_on_cuda_event_id', '$.correlation']) AS a
    FROM raw.kineto_typed
    WHERE kind = 'sync' AND ts IS NOT NULL AND dur IS NOT NULL
)
SELECT
    s.src_row,
    CASE s.a[1] WHEN 'Context Sync' THEN 'device' WHEN 'Stream Sync' THEN 'stream' WHEN 'Event Sync' THEN 'event'
                WHEN 'Stream Wait Event' THEN 'stream_wait' END AS kind_hint,
    TRY_CAST(s.a[2] AS INTEGER)                          AS device_id,
    TRY_CAST(s.a[3] AS BIGINT)                           AS context_id,
    nullif(TRY_CAST(s.a[4] AS BIGINT), 4294967295)       AS stream_id,
    TRY_CAST(s.a[5] AS BIGINT)                           AS event_id,
    CASE WHEN l.pids = 1 THEN l.pid WHEN l.pid IS NULL THEN getvariable('kineto_cpu_pid') END AS pid,
    s.ts,
    s.dur,
    TRY_CAST(s.a[6] AS BIGINT)                           AS correlation_id
FROM s
LEFT JOIN raw.kineto_launch l ON l.correlation = TRY_CAST(s.a[6] AS BIGINT);
