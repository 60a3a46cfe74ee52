-- derived_time_limits: for the trace being ingested (variable trace_id), each timed contract table
-- the ingest has filled so far, with the extremes its times reach and the sum of its durations,
-- in 128-bit integers (HUGEINT) so that none of them can overflow here. Ingest refuses a file
-- whose values leave no headroom for the 64-bit arithmetic of traceql's own SQL (the limit,
-- traceql.core.settings.TIME_LIMIT_NS, and the rule: traceql.store.load.check_time_limits).
-- Columns: tbl, the table; rows, its rows of the trace; min_ts, the earliest ts; max_ts, the
-- latest ts; min_end, the earliest ts + dur; max_end, the latest ts + dur (each NULL without
-- rows or durations); dur_sum, the sum of abs(dur) (NULL without durations).
CREATE OR REPLACE TEMP VIEW derived_time_limits AS
WITH timed AS (
    SELECT 'kernel' AS tbl, ts, dur FROM kernel WHERE trace_id = getvariable('trace_id')
    UNION ALL SELECT 'memcpy', ts, dur FROM memcpy WHERE trace_id = getvariable('trace_id')
    UNION ALL SELECT 'memset', ts, dur FROM memset WHERE trace_id = getvariable('trace_id')
    UNION ALL SELECT 'api_call', ts, dur FROM api_call WHERE trace_id = getvariable('trace_id')
    UNION ALL SELECT 'graph_exec', ts, dur FROM graph_exec WHERE trace_id = getvariable('trace_id')
    UNION ALL SELECT 'graph_event', ts, dur FROM graph_event WHERE trace_id = getvariable('trace_id')
    UNION ALL SELECT 'sync_event', ts, dur FROM sync_event WHERE trace_id = getvariable('trace_id')
    UNION ALL SELECT 'osrt_call', ts, dur FROM osrt_call WHERE trace_id = getvariable('trace_id')
    UNION ALL SELECT 'profiler_overhead', ts, dur FROM profiler_overhead WHERE trace_id = getvariable('trace_id')
    UNION ALL SELECT 'gpu_metric', ts, NULL FROM gpu_metric WHERE trace_id = getvariable('trace_id')
    UNION ALL SELECT 'nvtx_mark', ts, NULL FROM nvtx_mark WHERE trace_id = getvariable('trace_id')
    UNION ALL SELECT 'nvtx_range', ts, dur FROM nvtx_range WHERE trace_id = getvariable('trace_id')
    UNION ALL SELECT 'memory_event', ts, NULL FROM memory_event WHERE trace_id = getvariable('trace_id')
)
SELECT tbl, count(*) AS rows,
       min(ts)::HUGEINT AS min_ts, max(ts)::HUGEINT AS max_ts,
       min(ts::HUGEINT + dur) AS min_end, max(ts::HUGEINT + dur) AS max_end,
       sum(abs(dur::HUGEINT)) AS dur_sum
FROM timed
GROUP BY tbl;
