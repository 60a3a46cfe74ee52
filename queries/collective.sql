-- collective: communication kernels (NCCL and other collectives, launch.category) by name, matched across the ranks of a job: how many calls each rank made (the same number on every rank, or not), their time, and how far the ranks' totals spread (the rank that spent longest in a collective waited for the others; the one that spent least arrived last).
-- input: kernel
-- param trace_id: only this trace (NULL: every trace in the workspace)
-- param per_trace: true to give each trace (rank) its own rows
-- column trace_id if per_trace: trace of the row (trace.trace_id)
-- column rank if per_trace: rank of that trace (trace.rank)
-- column collective: the operation, read from the kernel name: AllReduce, ReduceScatter, AllGather, Broadcast, Reduce, AllToAll, SendRecv, Send, Recv; NULL when the name says none
-- column ranks: traces (ranks) that ran this kernel
-- column calls: kernels of this name, over those ranks
-- column matched: true when every rank of the rows shown made the same number of calls (a rank missing it, or calling it fewer times, is a mismatch: a trace cut short, a hang, or ranks doing different work)
-- column min_calls: fewest calls of one rank (0 when a rank of the rows shown made none)
-- column total_ns: summed duration of the kernels in ns, over the ranks
-- column avg_ns: total_ns / calls
-- column min_rank_ns: the smallest of the ranks' summed durations in ns (0 for a rank that made no call)
-- column median_rank_ns: the median of the ranks' summed durations in ns (of an even number of ranks: the mean of the middle two, rounded down)
-- column max_rank_ns: the largest of the ranks' summed durations in ns: the rank that waited longest for the others (max_rank_ns - min_rank_ns is how much longer)
-- column least_rank: the rank (trace.rank; the trace id when it has none) with min_rank_ns: it waited least, so it arrived last: the likely straggler
-- column name: kernel name (kernel.short_name, else kernel.name)
-- label calls: calls
-- label matched: matched
-- label min_calls: min calls
-- label total_ns: total
-- label avg_ns: avg
-- label min_rank_ns: rank min
-- label median_rank_ns: rank median
-- label max_rank_ns: rank max
-- label least_rank: arrived last
--
-- The ranks of the rows shown are the traces in the workspace (or the one of --trace) that
-- ran at least one communication kernel of any name: a rank that ran none of a name counts
-- with 0 calls and 0 ns in its min_calls and min_rank_ns. A tie of least_rank goes to the
-- lowest rank. --where filters kernel rows (e.g. "device_id = 0").
WITH comm AS (
    SELECT k.trace_id, coalesce(k.short_name, k.name) AS name, k.name AS full_name, k.dur
    FROM kernel k
    JOIN launch l ON l.trace_id = k.trace_id AND l.op_id = k.kernel_id AND l.op_kind = 'kernel'
    WHERE ($trace_id IS NULL OR k.trace_id = $trace_id) AND l.category = 'communication'
      AND /* where */ TRUE
),
per_rank AS (
    SELECT trace_id, name, any_value(full_name) AS full_name, count(*) AS calls, CAST(sum(dur) AS BIGINT) AS total_ns
    FROM comm
    GROUP BY trace_id, name
),
ranks AS (  -- every trace with communication, each with its label
    SELECT DISTINCT c.trace_id, t.rank, coalesce(t.rank, t.trace_id) AS label
    FROM comm c JOIN trace t ON t.trace_id = c.trace_id
),
grid AS (  -- every (rank, name): 0 calls where a rank ran none of that name
    SELECT r.trace_id, r.rank, r.label, n.name, coalesce(p.calls, 0) AS calls, coalesce(p.total_ns, 0) AS total_ns
    FROM ranks r
    CROSS JOIN (SELECT DISTINCT name FROM per_rank) n
    LEFT JOIN per_rank p ON p.trace_id = r.trace_id AND p.name = n.name
),
names AS (
    SELECT name, any_value(full_name) AS full_name FROM per_rank GROUP BY name
)
SELECT
    CASE WHEN $per_trace THEN g.trace_id END AS trace_id,
    CASE WHEN $per_trace THEN any_value(g.rank) END AS rank,
    nullif(regexp_extract(n.full_name,
        '(AllReduce|ReduceScatter|AllGather|Broadcast|AllToAll|SendRecv|Reduce|Send|Recv|all_?reduce|reduce_?scatter|all_?gather|all_?to_?all)',
        1), '') AS collective,
    count(*) FILTER (WHERE g.calls > 0) AS ranks,
    CAST(sum(g.calls) AS BIGINT) AS calls,
    min(g.calls) = max(g.calls) AS matched,
    min(g.calls) AS min_calls,
    CAST(sum(g.total_ns) AS BIGINT) AS total_ns,
    CAST(sum(g.total_ns) / nullif(sum(g.calls), 0) AS BIGINT) AS avg_ns,
    min(g.total_ns) AS min_rank_ns,
    CAST(floor(median(g.total_ns)) AS BIGINT) AS median_rank_ns,
    max(g.total_ns) AS max_rank_ns,
    arg_min(g.label, (g.total_ns, g.label)) AS least_rank,
    g.name
FROM grid g
JOIN names n ON n.name = g.name
WHERE NOT $per_trace OR g.calls > 0
GROUP BY CASE WHEN $per_trace THEN g.trace_id END, g.name, n.full_name
ORDER BY trace_id NULLS FIRST, total_ns DESC, g.name;
