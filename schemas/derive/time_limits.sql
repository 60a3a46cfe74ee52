/* include: nvtx_range_any */

-- derived_timed: every timed row of the workspace's contract tables, for the limits below. Columns:
-- trace_id, its trace; tbl, the table; ts, its start in ns; dur, its duration in ns (NULL in the
-- tables of instants: gpu_metric, nvtx_mark, memory_event).
CREATE OR REPLACE TEMP VIEW derived_timed AS
SELECT trace_id, 'kernel' AS tbl, ts, dur FROM kernel
UNION ALL SELECT trace_id, 'memcpy', ts, dur FROM memcpy
UNION ALL SELECT trace_id, 'memset', ts, dur FROM memset
UNION ALL SELECT trace_id, 'api_call', ts, dur FROM api_call
UNION ALL SELECT trace_id, 'graph_exec', ts, dur FROM graph_exec
UNION ALL SELECT trace_id, 'graph_event', ts, dur FROM graph_event
UNION ALL SELECT trace_id, 'sync_event', ts, dur FROM sync_event
UNION ALL SELECT trace_id, 'osrt_call', ts, dur FROM osrt_call
UNION ALL SELECT trace_id, 'profiler_overhead', ts, dur FROM profiler_overhead
UNION ALL SELECT trace_id, 'gpu_metric', ts, NULL FROM gpu_metric
UNION ALL SELECT trace_id, 'nvtx_mark', ts, NULL FROM nvtx_mark
UNION ALL SELECT trace_id, 'nvtx_range', ts, dur FROM nvtx_range_any
UNION ALL SELECT trace_id, 'memory_event', ts, NULL FROM memory_event;

-- derived_time_limits: for the trace being ingested (variable trace_id), each timed contract table
-- the ingest has filled so far, with the extremes its times reach and the sum of its durations,
-- in 128-bit integers (HUGEINT) so that none of them can overflow here. Ingest refuses a file
-- whose values leave no headroom for the 64-bit arithmetic of traceql's own SQL (the limit,
-- traceql.core.settings.TIME_LIMIT_NS, and the rule: traceql.store.load.check_time_limits).
-- Columns: tbl, the table; rows, its rows of the trace; min_ts, the earliest ts; max_ts, the
-- latest ts; min_end, the earliest ts + dur; max_end, the latest ts + dur (each NULL without
-- rows or durations); dur_sum, the sum of abs(dur) (NULL without durations).
CREATE OR REPLACE TEMP VIEW derived_time_limits AS
SELECT tbl, count(*) AS rows,
       min(ts)::HUGEINT AS min_ts, max(ts)::HUGEINT AS max_ts,
       min(ts::HUGEINT + dur) AS min_end, max(ts::HUGEINT + dur) AS max_end,
       sum(abs(dur::HUGEINT)) AS dur_sum
FROM derived_timed
WHERE trace_id = getvariable('trace_id')
GROUP BY tbl;

-- derived_workspace_limits: per trace of the workspace, what its reports add up across traces, in
-- HUGEINT (the rule over the whole workspace: traceql.store.load.check_workspace_limits). Columns:
-- trace_id, the trace; path, its file; dur_sum, the sum of abs(dur) over every timed table (0
-- without durations); span, its span (trace.duration, 0 when unknown).
CREATE OR REPLACE TEMP VIEW derived_workspace_limits AS
WITH durations AS (
    SELECT trace_id, sum(abs(dur::HUGEINT)) AS dur_sum FROM derived_timed GROUP BY trace_id
)
SELECT t.trace_id, t.path, coalesce(d.dur_sum, 0) AS dur_sum, coalesce(abs(t.duration::HUGEINT), 0) AS span
FROM trace t
LEFT JOIN durations d USING (trace_id);
