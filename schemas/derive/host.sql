-- derived_sync_event, derived_osrt_call, derived_profiler_overhead, derived_gpu_metric: what the
-- host waited on, for the trace being ingested (getvariable('trace_id')), from the adapters'
-- src_sync_event, src_osrt_call, src_profiler_overhead and src_gpu_metric (schemas/default/host.sql
-- gives empty ones to a format without them).

-- A synchronization's API call is found as a kernel's is: the same correlation id in the same
-- process, and among several calls of that key the one that started last at or before the
-- synchronization (one ASOF join over the calls of the synchronizations' keys only). Its kind is
-- read from the call's name, which says the same in every exporter version (nsys's syncType
-- numbering does not; HIP's names as CUDA's); without a call, from the format's hint (nvprof's CUPTI type), else
-- 'unknown'.
CREATE OR REPLACE TEMP VIEW derived_sync_event AS
WITH s AS (
    SELECT *, row_number() OVER (ORDER BY ts, src_row) - 1 AS sync_id FROM src_sync_event
),
calls AS (
    SELECT a.api_id, a.pid, a.tid, a.correlation_id, a.ts, a.name
    FROM api_call a
    SEMI JOIN (SELECT DISTINCT pid, correlation_id FROM s) k
      ON k.pid = a.pid AND k.correlation_id = a.correlation_id
    WHERE a.trace_id = getvariable('trace_id')
),
linked AS (
    SELECT s.*, c.api_id, c.tid, c.name AS api_name
    FROM s
    ASOF LEFT JOIN calls c ON c.pid = s.pid AND c.correlation_id = s.correlation_id AND s.ts >= c.ts
)
SELECT
    getvariable('trace_id')::INTEGER AS trace_id, sync_id,
    CASE
        WHEN regexp_matches(api_name, '^(cudaDeviceSynchronize|cudaThreadSynchronize|cuCtxSynchronize|hipDeviceSynchronize|hipCtxSynchronize)') THEN 'device'
        WHEN regexp_matches(api_name, '^(cudaStreamSynchronize|cuStreamSynchronize|hipStreamSynchronize)') THEN 'stream'
        WHEN regexp_matches(api_name, '^(cudaEventSynchronize|cuEventSynchronize|hipEventSynchronize)') THEN 'event'
        WHEN regexp_matches(api_name, '^(cudaEventQuery|cuEventQuery|hipEventQuery)') THEN 'event_query'
        WHEN regexp_matches(api_name, '^(cudaStreamWaitEvent|cuStreamWaitEvent|hipStreamWaitEvent)') THEN 'stream_wait'
        ELSE coalesce(kind_hint, 'unknown')
    END AS kind,
    device_id, context_id, stream_id, event_id, pid, tid, ts, dur, correlation_id, api_id, api_name
FROM linked;

CREATE OR REPLACE TEMP VIEW derived_osrt_call AS
SELECT getvariable('trace_id')::INTEGER AS trace_id,
       row_number() OVER (ORDER BY ts, src_row) - 1 AS osrt_id,
       pid, tid, ts, dur, name, return_value, nesting_level
FROM src_osrt_call;

CREATE OR REPLACE TEMP VIEW derived_profiler_overhead AS
SELECT getvariable('trace_id')::INTEGER AS trace_id, pid, tid, ts, dur, name FROM src_profiler_overhead;

CREATE OR REPLACE TEMP VIEW derived_gpu_metric AS
SELECT getvariable('trace_id')::INTEGER AS trace_id, device_id, ts, metric, value FROM src_gpu_metric;
