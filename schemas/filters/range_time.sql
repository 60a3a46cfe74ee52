-- What the share column of a report filtered by --range divides by (traceql/rangefilter.py),
-- per trace: the matching range instances, their GPU time and their CPU time.
--   gpu_ns  summed durations of the GPU operations the matching ranges hold (op_range, each
--           operation once however many matching ranges hold it: kernels, copies, memsets),
--           plus whole-graph executions (graph_exec) whose launching call they hold
--   cpu_ns  the time at least one matching range was open, per process (overlapping and
--           nested instances counted once), summed over processes; a range never closed is open
--           to the end of the trace
-- Matching as in range_ops.sql; $trace_id: one trace, or NULL for all.
WITH matched AS MATERIALIZED (
    SELECT r.trace_id, r.range_id, coalesce(r.pid, -1) AS pid, r.ts,
           greatest(coalesce(r.ts + r.dur, t.end_ts, r.ts), r.ts) AS e
    FROM nvtx_range r
    JOIN trace t ON t.trace_id = r.trace_id
    WHERE ($trace_id IS NULL OR r.trace_id = $trace_id)
      AND r.domain <> 'gpu_user_annotation' AND r.depth < $range_depth_cap
      AND (coalesce(list_contains($range_names, r.name), false)
           OR coalesce(list_contains($range_names, r.group_name), false)
           OR coalesce(list_contains($range_names, r.path), false)
           OR coalesce(len(list_filter($range_words, w -> contains(lower(r.name), lower(w)))) > 0, false))
),
held_ops AS (
    SELECT DISTINCT o.trace_id, o.op_id
    FROM op_range o
    WHERE (o.trace_id, o.range_id) IN (SELECT trace_id, range_id FROM matched)
),
gpu AS (
    SELECT g.trace_id, sum(g.dur) AS gpu_ns
    FROM gpu_op g
    WHERE (g.trace_id, g.op_id) IN (SELECT trace_id, op_id FROM held_ops)
    GROUP BY g.trace_id
),
reach AS (
    SELECT trace_id, pid, ts, max(e) OVER (PARTITION BY trace_id, pid ORDER BY ts) AS reach
    FROM matched
),
graphs AS (
    SELECT c.trace_id, sum(x.dur) AS graph_ns
    FROM graph_exec x
    JOIN api_call c ON c.trace_id = x.trace_id AND c.api_id = x.api_id
    ASOF JOIN reach m ON m.trace_id = c.trace_id AND m.pid = coalesce(c.pid, -1) AND c.ts >= m.ts
    WHERE m.reach >= c.ts + c.dur
    GROUP BY c.trace_id
),
open_ranges AS (
    SELECT trace_id, pid, range_id, ts, e AS end_ts FROM matched
),
/* include: busy_islands(rows = open_ranges; partition = trace_id, pid; order = ts, end_ts, range_id) */,
cpu AS (  -- the time at least one matching range was open, per process, summed
    SELECT trace_id, sum(end_ts - ts) AS cpu_ns FROM islands GROUP BY trace_id
),
instances AS (
    SELECT trace_id, count(*) AS instances FROM matched GROUP BY trace_id
)
SELECT t.trace_id, coalesce(i.instances, 0) AS instances,
       CAST(coalesce(g.gpu_ns, 0) + coalesce(x.graph_ns, 0) AS BIGINT) AS gpu_ns,
       CAST(coalesce(c.cpu_ns, 0) AS BIGINT) AS cpu_ns
FROM trace t
LEFT JOIN instances i ON i.trace_id = t.trace_id
LEFT JOIN gpu g ON g.trace_id = t.trace_id
LEFT JOIN graphs x ON x.trace_id = t.trace_id
LEFT JOIN cpu c ON c.trace_id = t.trace_id
WHERE $trace_id IS NULL OR t.trace_id = $trace_id
ORDER BY t.trace_id
