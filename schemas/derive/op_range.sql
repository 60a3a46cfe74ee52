-- derived_op_range: which NVTX ranges enclose the launching call of each GPU operation of the
-- trace being ingested (getvariable('trace_id')). Near-linear, no interval join of all ranges
-- against all calls, no recursion:
--
-- push/pop ranges, rule 'thread': a call belongs to the ranges of its own thread whose interval
--   holds the whole call. Push/pop ranges form a stack, so at each depth k the only range that
--   can hold a call is the one pushed last at depth k before the call started (any later push at
--   that depth would have popped it). One ASOF join of (call, k) pairs, k = 0 .. the thread's
--   deepest level, against the pushes finds that range per level; it holds the call when it
--   ends at or after the call's end. (Several ranges at one depth, thread and start time are
--   zero-length ranges that hold no call of positive length.)
-- start/end ranges may overlap, so each is matched by containment on its thread (rule 'thread'),
--   or, when it ended on another thread, on any thread of its process (rule 'process').
-- Unclosed ranges stay open to the end of the trace. The innermost range of an operation is the
-- enclosing range that started last (then the deeper one).
CREATE OR REPLACE TEMP VIEW derived_op_range AS
WITH calls AS (
    SELECT l.op_id, l.op_kind, l.pid, l.tid, l.api_ts AS a_ts, l.api_ts + l.api_dur AS a_end
    FROM launch l
    WHERE l.trace_id = getvariable('trace_id') AND l.api_id IS NOT NULL
),
pp0 AS MATERIALIZED (
    SELECT range_id, pid, tid, depth, ts, coalesce(ts + dur, 9223372036854775807) AS r_end
    FROM nvtx_range
    WHERE trace_id = getvariable('trace_id') AND style = 'push/pop'
),
-- each thread with push/pop ranges, numbered: (thread number, depth) is one integer key, which
-- the ASOF join below partitions and sorts on faster than on (pid, tid, depth)
threads AS MATERIALIZED (
    SELECT pid, tid, max(depth) AS max_depth, row_number() OVER () AS th
    FROM pp0
    GROUP BY pid, tid
),
pp AS (
    SELECT p.range_id, t.th * 4294967296 + p.depth AS level_key, p.depth, p.ts, p.r_end
    FROM pp0 p JOIN threads t ON t.pid = p.pid AND t.tid = p.tid
),
levels AS (
    SELECT c.op_id, c.op_kind, c.a_ts, c.a_end, t.th * 4294967296 + unnest(range(0, t.max_depth + 1)) AS level_key
    FROM calls c
    JOIN threads t ON t.pid = c.pid AND t.tid = c.tid
),
stack AS (
    SELECT l.op_id, l.op_kind, p.range_id, p.depth, p.ts, 'thread' AS attribution
    FROM levels l
    ASOF JOIN pp p ON p.level_key = l.level_key AND l.a_ts >= p.ts
    WHERE p.r_end >= l.a_end
),
se AS (
    SELECT range_id, pid, tid, end_tid, depth, ts, coalesce(ts + dur, 9223372036854775807) AS r_end
    FROM nvtx_range
    WHERE trace_id = getvariable('trace_id') AND style = 'start/end'
),
se_pairs AS (
    SELECT c.op_id, c.op_kind, se.range_id, se.depth, se.ts, 'thread' AS attribution
    FROM calls c JOIN se ON se.pid = c.pid AND se.tid = c.tid
    WHERE se.end_tid IS NULL AND se.ts <= c.a_ts AND se.r_end >= c.a_end
    UNION ALL
    SELECT c.op_id, c.op_kind, se.range_id, se.depth, se.ts, 'process'
    FROM calls c JOIN se ON se.pid = c.pid
    WHERE se.end_tid IS NOT NULL AND se.ts <= c.a_ts AND se.r_end >= c.a_end
),
pairs AS (
    SELECT * FROM stack
    UNION ALL
    SELECT * FROM se_pairs
)
SELECT getvariable('trace_id')::INTEGER AS trace_id, p.op_id, p.op_kind, p.range_id, p.depth,
       row_number() OVER (PARTITION BY p.op_id ORDER BY p.ts DESC, p.range_id DESC) = 1 AS is_innermost,
       p.attribution
FROM pairs p;
