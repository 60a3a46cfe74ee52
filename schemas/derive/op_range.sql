-- derived_op_range: which NVTX ranges enclose the launching call of each GPU operation of the
-- trace being ingested (getvariable('trace_id')). Near-linear, no interval join of all ranges
-- against all calls:
--
-- push/pop ranges, rule 'thread': a call belongs to the ranges of its own thread whose interval
--   holds the whole call. Ranges nest (nvtx_range.depth/parent_range_id), so for each call take
--   the last range its thread pushed at or before the call started (an ASOF join; range ids follow
--   each thread's push order), then walk up the parent chain to the first range that is still
--   open when the call ends: that is the innermost one, and its ancestors are the outer levels.
-- start/end ranges may overlap, so each is matched by containment on its thread (rule 'thread'),
--   or, when it ended on another thread, on any thread of its process (rule 'process').
-- Unclosed ranges stay open to the end of the trace.
CREATE OR REPLACE TEMP VIEW derived_op_range AS
WITH RECURSIVE calls AS (
    SELECT l.op_id, l.op_kind, l.pid, l.tid, l.api_ts AS a_ts, l.api_ts + l.api_dur AS a_end
    FROM launch l
    WHERE l.trace_id = getvariable('trace_id') AND l.api_id IS NOT NULL
),
pp AS (
    SELECT range_id, pid, tid, ts, coalesce(ts + dur, 9223372036854775807) AS r_end,
           parent_range_id, depth
    FROM nvtx_range
    WHERE trace_id = getvariable('trace_id') AND style = 'push/pop'
),
last_push AS (
    -- per thread and start time, the range pushed last (the deepest one when several start together)
    SELECT pid, tid, ts, max(range_id) AS range_id FROM pp GROUP BY pid, tid, ts
),
candidate AS (
    SELECT c.op_id, c.op_kind, c.a_end, lp.range_id
    FROM calls c
    ASOF JOIN last_push lp ON lp.pid = c.pid AND lp.tid = c.tid AND c.a_ts >= lp.ts
),
walk AS (
    SELECT op_id, op_kind, a_end, range_id FROM candidate
    UNION ALL
    SELECT w.op_id, w.op_kind, w.a_end, p.parent_range_id
    FROM walk w JOIN pp p ON p.range_id = w.range_id
    WHERE p.r_end < w.a_end AND p.parent_range_id IS NOT NULL
),
innermost AS (
    SELECT w.op_id, w.op_kind, w.range_id
    FROM walk w JOIN pp p ON p.range_id = w.range_id
    WHERE p.r_end >= w.a_end
),
stack AS (
    SELECT op_id, op_kind, range_id FROM innermost
    UNION ALL
    SELECT s.op_id, s.op_kind, p.parent_range_id
    FROM stack s JOIN pp p ON p.range_id = s.range_id
    WHERE p.parent_range_id IS NOT NULL
),
se AS (
    SELECT range_id, pid, tid, end_tid, ts, coalesce(ts + dur, 9223372036854775807) AS r_end, depth
    FROM nvtx_range
    WHERE trace_id = getvariable('trace_id') AND style = 'start/end'
),
se_pairs AS (
    SELECT c.op_id, c.op_kind, se.range_id, 'thread' AS attribution
    FROM calls c JOIN se ON se.pid = c.pid AND se.tid = c.tid
    WHERE se.end_tid IS NULL AND se.ts <= c.a_ts AND se.r_end >= c.a_end
    UNION ALL
    SELECT c.op_id, c.op_kind, se.range_id, 'process'
    FROM calls c JOIN se ON se.pid = c.pid
    WHERE se.end_tid IS NOT NULL AND se.ts <= c.a_ts AND se.r_end >= c.a_end
),
pairs AS (
    SELECT op_id, op_kind, range_id, 'thread' AS attribution FROM stack
    UNION ALL
    SELECT * FROM se_pairs
)
SELECT getvariable('trace_id')::INTEGER AS trace_id, p.op_id, p.op_kind, p.range_id, r.depth,
       row_number() OVER (PARTITION BY p.op_id ORDER BY r.ts DESC, p.range_id DESC) = 1 AS is_innermost,
       p.attribution
FROM pairs p
JOIN nvtx_range r ON r.trace_id = getvariable('trace_id') AND r.range_id = p.range_id;
