-- straggler: NVTX ranges compared across the ranks of a job. The occurrences of a range name are matched by their order on each rank (the 3rd 'train_step' of every rank is iteration 3); per name, or per iteration, the fastest, median and slowest rank's time, the slowest rank and how far behind the median it was.
-- input: nvtx_range
-- param trace_id: only this trace (NULL: every trace in the workspace; a straggler view needs several)
-- param per_trace: accepted for symmetry with the other reports: rows compare traces, never split by them
-- param measure: 'time' (default): the ranges' durations (traceql.reports refuses other values) (wall time on their thread); 'compute': the time of the compute kernels launched inside them (launch.category 'compute', summed: communication kernels, which wait for the other ranks, left out)
-- default measure: time
-- param per_iteration: true to give each iteration (occurrence) its own row instead of one row per range name
-- default per_iteration: false
-- column iteration if per_iteration: the occurrence: 1 for each rank's first range of this name (by start), 2 for the second, ...
-- column ranks: ranks (traces) that have this range (this iteration of it)
-- column iterations if not per_iteration: occurrences of the name on the rank with fewest
-- column matched if not per_iteration: every rank compared has as many occurrences of the name
-- column min_ns: the fastest rank's time in ns (summed over the iterations every rank compared has, unless per_iteration)
-- column median_ns: the median of the ranks' times in ns (of an even number of ranks: the mean of the middle two, rounded down)
-- column max_ns: the slowest rank's time in ns
-- column slowest_rank: the rank (trace.rank; the trace id when it has none) with max_ns; a tie goes to the lowest
-- column behind_ns: max_ns - median_ns: how much longer the slowest rank took than the median rank, in ns (what the others waited, when they synchronize after it)
-- column behind_pct: behind_ns as a percentage of median_ns
-- column slowest_in if not per_iteration: iterations in which slowest_rank was the slowest rank (of iterations)
-- column name: the range's grouping name (nvtx_range.group_name)
-- label iteration: iteration
-- label min_ns: fastest
-- label median_ns: median
-- label max_ns: slowest
-- label slowest_rank: slowest rank
-- label behind_ns: behind
-- label behind_pct: behind %
-- label slowest_in: slowest in
--
-- Names held by one rank only are left out, as are unclosed ranges. Ranks are compared on the
-- iterations they all have (1 .. the fewest any rank has): matched says whether some rank has
-- more. Rows are ordered by behind_ns, largest first. --where filters nvtx_range rows, e.g.
-- "depth = 0" for the outermost ranges or "domain = ''" for the application's own.
WITH ranges AS (
    SELECT r.trace_id, r.range_id, r.group_name AS name, r.dur,
           row_number() OVER (PARTITION BY r.trace_id, r.group_name ORDER BY r.ts, r.range_id) AS iteration
    FROM nvtx_range r
    WHERE ($trace_id IS NULL OR r.trace_id = $trace_id) AND r.dur IS NOT NULL AND $per_trace IS NOT NULL
      AND /* where */ TRUE
),
compute AS (  -- compute kernel time launched inside each range, only for measure 'compute'
    SELECT o.trace_id, o.range_id, sum(k.dur) AS ns
    FROM op_range o
    JOIN launch l ON l.trace_id = o.trace_id AND l.op_id = o.op_id AND l.category = 'compute'
    JOIN kernel k ON k.trace_id = o.trace_id AND k.kernel_id = o.op_id
    WHERE $measure = 'compute' AND o.op_kind = 'kernel' AND ($trace_id IS NULL OR o.trace_id = $trace_id)
    GROUP BY o.trace_id, o.range_id
),
measured AS (
    SELECT x.trace_id, coalesce(t.rank, t.trace_id) AS label, x.name, x.iteration,
           CAST(CASE WHEN $measure = 'compute' THEN coalesce(c.ns, 0) ELSE x.dur END AS BIGINT) AS ns
    FROM ranges x
    JOIN trace t ON t.trace_id = x.trace_id
    LEFT JOIN compute c ON c.trace_id = x.trace_id AND c.range_id = x.range_id
),
counts AS (
    SELECT name, count(*) AS ranks, min(n) AS iterations, max(n) AS most
    FROM (SELECT trace_id, name, count(*) AS n FROM measured GROUP BY trace_id, name)
    GROUP BY name
    HAVING count(*) > 1
),
compared AS (  -- the iterations every rank has
    SELECT m.* FROM measured m JOIN counts c ON c.name = m.name AND m.iteration <= c.iterations
),
per_iteration AS (
    SELECT name, iteration, count(*) AS ranks, min(ns) AS min_ns, CAST(floor(median(ns)) AS BIGINT) AS median_ns,
           max(ns) AS max_ns, arg_max(label, (ns, -label)) AS slowest_rank
    FROM compared
    GROUP BY name, iteration
),
per_name AS (
    SELECT name, count(*) AS ranks, min(total) AS min_ns, CAST(floor(median(total)) AS BIGINT) AS median_ns,
           max(total) AS max_ns, arg_max(label, (total, -label)) AS slowest_rank
    FROM (SELECT name, label, CAST(sum(ns) AS BIGINT) AS total FROM compared GROUP BY name, label)
    GROUP BY name
),
slowest AS (
    SELECT name, slowest_rank, count(*) AS n FROM per_iteration GROUP BY name, slowest_rank
),
rows AS (
    SELECT NULL::BIGINT AS iteration, p.ranks, c.iterations, c.iterations = c.most AS matched, p.min_ns, p.median_ns,
           p.max_ns, p.slowest_rank, coalesce(s.n, 0) AS slowest_in, p.name
    FROM per_name p
    JOIN counts c ON c.name = p.name
    LEFT JOIN slowest s ON s.name = p.name AND s.slowest_rank = p.slowest_rank
    WHERE NOT $per_iteration
    UNION ALL
    SELECT iteration, ranks, 1, TRUE, min_ns, median_ns, max_ns, slowest_rank, NULL, name
    FROM per_iteration
    WHERE $per_iteration
)
SELECT iteration, ranks, iterations, matched, min_ns, median_ns, max_ns, slowest_rank,
       max_ns - median_ns AS behind_ns, 100.0 * (max_ns - median_ns) / nullif(median_ns, 0) AS behind_pct,
       slowest_in, name
FROM rows
ORDER BY behind_ns DESC, name, iteration;
