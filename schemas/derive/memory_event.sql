-- derived_memory_event: the memory allocations and frees of the trace being ingested
-- (getvariable('trace_id')), from the temporary table memory_stage (the adapter's src_memory_event,
-- kept past the freeing of the source tables) and the trace's nvtx_range rows. Linear: window functions over
-- (device, kind, address) and (device, kind), and one ASOF join per range depth of a thread.
--
-- Pairing: on one device, memory kind and address an allocator alternates allocation and free, so
-- a free's allocation is the event just before it at that address when that is an allocation, and
-- an allocation's free the event just after it when that is a free. A free with no allocation
-- before it frees a block allocated before the capture began.
-- Levels: where the source records the allocator's total (PyTorch since 2022) it is the level;
-- else the running sum of bytes per device and kind, in id order, without the frees known to
-- free a block allocated before the capture (address recorded, no allocation found). Without
-- addresses (PyTorch 2021) such frees cannot be told apart: when the sum goes below zero, every
-- level of the device and kind is raised by the deepest deficit, the bytes those frees show were
-- held before the capture; a level is never negative.
-- The range: at each depth of the event's thread, the push/pop range pushed last at or before the
-- event (one ASOF join of (event, depth) pairs); the deepest of those still open at the event.
CREATE OR REPLACE TABLE raw.mem_ev AS
SELECT row_number() OVER (ORDER BY ts, src_row) - 1 AS memory_event_id, * EXCLUDE (src_row)
FROM temp.main.memory_stage;

CREATE OR REPLACE TABLE raw.mem_pair AS
SELECT memory_event_id,
       CASE WHEN bytes < 0 AND lag(bytes) OVER w > 0 THEN lag(memory_event_id) OVER w END AS alloc_event_id,
       CASE WHEN bytes > 0 AND lead(bytes) OVER w < 0 THEN lead(memory_event_id) OVER w END AS free_event_id
FROM raw.mem_ev
WHERE address IS NOT NULL
WINDOW w AS (PARTITION BY device_id, mem_kind, address ORDER BY memory_event_id);

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
    FROM raw.mem_ev e
    JOIN threads t ON t.pid = e.pid AND t.tid = e.tid
)
SELECT q.memory_event_id, arg_max(r.range_id, r.depth) AS range_id
FROM q
ASOF JOIN r ON r.pid = q.pid AND r.tid = q.tid AND r.depth = q.depth AND r.ts <= q.ts
WHERE r.r_end > q.ts
GROUP BY q.memory_event_id;

CREATE OR REPLACE TEMP VIEW derived_memory_event AS
WITH e AS (
    SELECT e.*, p.alloc_event_id, p.free_event_id,
           CASE WHEN e.bytes < 0 AND e.address IS NOT NULL AND p.alloc_event_id IS NULL THEN 0
                ELSE e.bytes END AS counted
    FROM raw.mem_ev e
    LEFT JOIN raw.mem_pair p USING (memory_event_id)
),
run AS (
    SELECT *, sum(counted) OVER (PARTITION BY device_id, mem_kind ORDER BY memory_event_id
                                 ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS running
    FROM e
)
SELECT getvariable('trace_id')::INTEGER AS trace_id, run.memory_event_id, run.device_id, run.mem_kind,
       run.pid, run.tid, run.ts, run.bytes, run.address, run.correlation_id,
       coalesce(run.total_allocated,
                CAST(run.running + greatest(0, -min(run.running) OVER (PARTITION BY run.device_id, run.mem_kind))
                     AS BIGINT)) AS allocated,
       run.total_reserved AS reserved,
       CASE WHEN run.total_allocated IS NOT NULL THEN 'recorded' ELSE 'running_sum' END AS level_source,
       run.alloc_event_id, run.free_event_id, g.range_id, run.stack_id
FROM run
LEFT JOIN raw.mem_range g USING (memory_event_id);
