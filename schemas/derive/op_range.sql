-- derived_op_range: which NVTX ranges enclose the launching call of each GPU operation of the
-- trace being ingested (getvariable('trace_id')).
--
-- The rule. A range holds a GPU operation when the operation's launching API call lies wholly
-- inside the range (range start <= call start, call end <= range end; a range never closed is
-- open to the end of the trace) and the call was made by a thread of the range's process. The
-- row records which: 'thread' when the call's thread opened the range, 'process' when another
-- thread of the same process made it. This holds for push/pop and start/end ranges alike.
-- PyTorch runs backward on its autograd engine threads (pt_autograd_*): a user's 'Backward'
-- range on the main thread launches almost nothing itself, and the kernels those threads launch
-- while it is open belong to it as 'process' work. A pair appears once, so a kernel counts once
-- per range. Ranges nested deeper than getvariable('nvtx_depth_cap') levels (depth >= the cap)
-- are not matched: only the cap's outer levels of a deeper stack hold work (ingest_stats
-- 'nvtx_range.beyond_depth_cap' counts them).
--
-- Near-linear, no interval join of all ranges against all calls, no recursion:
--
-- push/pop ranges: on one thread they form a stack, so at each depth k the only range that can
--   hold a call is the one pushed last at depth k before the call started (any later push at
--   that depth would have popped it). One ASOF join of (call, thread, level) triples, for each
--   thread of the call's process that has push/pop ranges and each level 0 .. that thread's
--   deepest below the cap, against the pushes finds the candidate at each level; it holds the
--   call when it ends at or after the call's end. (Several ranges at one depth, thread and start
--   time are zero-length ranges that hold no call of positive length.) Bounding the levels of a
--   call by the depth of its thread's last push before it instead took a GROUP BY of every push
--   and another ASOF join: 7-8 s more CPU on bench's ATTR, for the same rows.
-- start/end ranges may overlap and end on another thread: a call is held by each that contains
--   it, found by one inequality join (DuckDB's IEJoin, sort-based) on keys that put the process
--   in the high bits, so that only ranges and calls of one process can meet. A hash join on the
--   process with the interval as a residual filter would compare every call with every
--   start/end range of its process. That join is a statement of its own, over tables: DuckDB
--   1.5 plans no IEJoin in a statement that materializes a CTE (plan_comparison_join.cpp checks
--   recursive_cte_tables, where materialized CTEs are registered too) and falls back to a
--   piecewise merge join, quadratic here.
-- The innermost range of an operation is an enclosing range of the launching thread that
-- started last (then the deeper one); for an operation that only other threads' ranges hold,
-- the one of those that started last.
--
-- In windows of calls: derived_op_range gives the pairs of the calls that start in the window
-- [getvariable('op_from'), getvariable('op_to')), reading only the push/pop ranges that start
-- before op_to and end at or after op_reach, the earliest end of those calls (the defaults below:
-- every call, every range). traceql.store.families builds op_range one window after another when
-- a trace has more calls than OP_RANGE_WINDOW_CALLS, so that the ASOF join and the window
-- function sort one window's rows at a time: at 10 M kernels (78 M pairs) op_range's statements
-- took 126 CPU s and wrote 11.7 GB whole, 90 CPU s and 1.5 GB in 8 windows. The pairs are
-- the same: a range that holds a call of the window is read; at each level the ASOF join picks
-- the range it picks without the window, unless that one ends before op_reach and so holds no
-- call of the window, and then it picks none (on one thread, the ranges of one level do not
-- overlap: an earlier one ended before it began). An operation's pairs are all in its call's
-- window, so is_innermost is chosen among all of them.
-- the calls that launched GPU work, narrow
CREATE OR REPLACE TABLE raw.op_calls AS
SELECT l.op_id, l.op_kind, coalesce(l.pid, -1) AS pid, coalesce(l.tid, -1) AS tid,
       l.api_ts AS a_ts, l.api_ts + l.api_dur AS a_end
FROM launch l
WHERE l.trace_id = getvariable('trace_id') AND l.api_id IS NOT NULL;

-- start/end ranges, their processes numbered (pn), and the pairs: keys process * 2^64 + (time +
-- 2^63), so that a range holds a call exactly when its start key <= the call's start key and its
-- end key >= the call's end key, and keys of two processes never interleave
CREATE OR REPLACE TABLE raw.op_se AS
SELECT range_id, coalesce(pid, -1) AS pid, coalesce(tid, -1) AS tid, depth, ts,
       coalesce(ts + dur, 9223372036854775807) AS r_end
FROM nvtx_range
WHERE trace_id = getvariable('trace_id') AND style = 'start/end';

CREATE OR REPLACE TABLE raw.op_se_procs AS
SELECT pid, row_number() OVER () AS pn FROM (SELECT DISTINCT pid FROM raw.op_se);

CREATE OR REPLACE TABLE raw.op_se_pairs AS
SELECT c.op_id, c.op_kind, s.range_id, s.depth, s.ts,
       CASE WHEN c.tid = s.tid THEN 'thread' ELSE 'process' END AS attribution, c.a_ts
FROM (SELECT c.op_id, c.op_kind, c.tid, c.a_ts,
             q.pn * 18446744073709551616::HUGEINT + c.a_ts + 9223372036854775808::HUGEINT AS k_start,
             q.pn * 18446744073709551616::HUGEINT + c.a_end + 9223372036854775808::HUGEINT AS k_end
      FROM raw.op_calls c JOIN raw.op_se_procs q ON q.pid = c.pid) c
JOIN (SELECT s.range_id, s.tid, s.depth, s.ts,
             q.pn * 18446744073709551616::HUGEINT + s.ts + 9223372036854775808::HUGEINT AS k_start,
             q.pn * 18446744073709551616::HUGEINT + s.r_end + 9223372036854775808::HUGEINT AS k_end
      FROM raw.op_se s JOIN raw.op_se_procs q ON q.pid = s.pid) s
  ON s.k_start <= c.k_start AND s.k_end >= c.k_end;

-- the window of calls derived_op_range reads: all of them, unless traceql sets a narrower one
SET VARIABLE op_from = -9223372036854775808;
SET VARIABLE op_to = 9223372036854775807;
SET VARIABLE op_reach = -9223372036854775808;

CREATE OR REPLACE TEMP VIEW derived_op_range AS
WITH pp0 AS MATERIALIZED (
    SELECT range_id, coalesce(pid, -1) AS pid, coalesce(tid, -1) AS tid, depth, ts,
           coalesce(ts + dur, 9223372036854775807) AS r_end
    FROM nvtx_range
    WHERE trace_id = getvariable('trace_id') AND style = 'push/pop' AND depth < getvariable('nvtx_depth_cap')
      AND ts < getvariable('op_to') AND coalesce(ts + dur, 9223372036854775807) >= getvariable('op_reach')
),
-- each thread with push/pop ranges, numbered: (thread number, depth) is one integer key, which
-- the ASOF joins below partition and sort on faster than on (pid, tid, depth)
threads AS MATERIALIZED (
    SELECT pid, tid, max(depth) AS max_depth, row_number() OVER () AS th
    FROM pp0 GROUP BY pid, tid
),
pp AS (
    SELECT p.range_id, t.th * 4294967296 + p.depth AS level_key, p.depth, p.ts, p.r_end
    FROM pp0 p JOIN threads t ON t.pid = p.pid AND t.tid = p.tid
),
-- every call with every thread of its process that has push/pop ranges, at each of its levels
levels AS (
    SELECT c.op_id, c.op_kind, c.a_ts, c.a_end, t.tid = c.tid AS own,
           t.th * 4294967296 + unnest(range(0, t.max_depth + 1)) AS level_key
    FROM raw.op_calls c JOIN threads t ON t.pid = c.pid
    WHERE c.a_ts >= getvariable('op_from') AND c.a_ts < getvariable('op_to')
),
stack AS (
    SELECT l.op_id, l.op_kind, p.range_id, p.depth, p.ts,
           CASE WHEN l.own THEN 'thread' ELSE 'process' END AS attribution
    FROM levels l
    ASOF JOIN pp p ON p.level_key = l.level_key AND l.a_ts >= p.ts
    WHERE p.r_end >= l.a_end
),
pairs AS (
    SELECT * FROM stack
    UNION ALL
    SELECT op_id, op_kind, range_id, depth, ts, attribution FROM raw.op_se_pairs
    WHERE a_ts >= getvariable('op_from') AND a_ts < getvariable('op_to')
)
SELECT getvariable('trace_id')::INTEGER AS trace_id, p.op_id, p.op_kind, p.range_id, p.depth,
       row_number() OVER (PARTITION BY p.op_id
                          ORDER BY p.attribution = 'thread' DESC, p.ts DESC, p.range_id DESC) = 1 AS is_innermost,
       p.attribution
FROM pairs p;
