-- The ranges of the memory allocations and frees of the trace getvariable('trace_id'), run by the
-- family 'nesting' once nvtx_range holds the trace's ranges (traceql.store.families.derive; the
-- ingest leaves memory_event.range_id NULL, schemas/derive/memory_event.sql): at each depth of
-- the event's thread, the push/pop range pushed last at or before the event (one ASOF join of
-- (event, depth) pairs); the deepest of those still open at the event. Linear.
CREATE OR REPLACE TABLE raw.mem_range AS
WITH r AS (
    SELECT range_id, pid, tid, depth, ts, coalesce(ts + dur, 9223372036854775807) AS r_end
    FROM nvtx_range
    WHERE trace_id = getvariable('trace_id') AND style = 'push/pop' AND pid IS NOT NULL AND tid IS NOT NULL
),
threads AS (
    SELECT pid, tid, max(depth) AS max_depth FROM r GROUP BY ALL
),
q AS (
    SELECT e.memory_event_id, e.pid, e.tid, e.ts, unnest(range(0, t.max_depth + 1)) AS depth
    FROM memory_event e
    JOIN threads t ON t.pid = e.pid AND t.tid = e.tid
    WHERE e.trace_id = getvariable('trace_id')
)
SELECT q.memory_event_id, arg_max(r.range_id, r.depth) AS range_id
FROM q
ASOF JOIN r ON r.pid = q.pid AND r.tid = q.tid AND r.depth = q.depth AND r.ts <= q.ts
WHERE r.r_end > q.ts
GROUP BY q.memory_event_id;

UPDATE memory_event SET range_id = g.range_id
FROM raw.mem_range g
WHERE memory_event.trace_id = getvariable('trace_id') AND memory_event.memory_event_id = g.memory_event_id;
