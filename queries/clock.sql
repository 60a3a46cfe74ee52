-- clock: how the traces' clocks line up. Every trace's times go on one axis, UTC epoch ns (ts + trace.utc_offset_ns); the clocks of different hosts still disagree by a residual skew, estimated here from collectives: the i-th kernel of a collective (NCCL AllReduce, ReduceScatter, AllGather ...) ends at the same moment on every rank, so the median gap between one host's ends and the reference host's is that host's skew.
-- input: kernel
-- param trace_id: only this trace (NULL: every trace in the workspace; the estimate needs several)
-- param per_trace: accepted for symmetry with the other reports: every row is one trace already
-- column trace_id: trace (trace.trace_id)
-- column rank: rank of the trace (trace.rank)
-- column host: the profiled machine (trace.host): the ranks of one host share its clock; a trace without a host is a clock of its own
-- column clock: 'session' (ts counts from the session start) or 'epoch' (ts is UTC epoch ns already; trace.clock)
-- column started_ns: when the trace's first event happened on the UTC axis (trace.start_ts + trace.utc_offset_ns, by its own clock, skew not taken off), after the earliest first event of the traces shown, in ns; NULL when the trace does not record its UTC offset, and it is left out of the estimate
-- column collectives: collective kernels of this trace's clock matched with the reference clock's (by name and order); 0 for a clock that shares none
-- column skew_ns: the clock's estimated skew against the reference clock in ns: the median, over the matched collectives, of (its ranks' median end - the reference ranks' median end), on the UTC axis; subtract it to align (NULL when nothing is matched; 0 for the reference)
-- column min_gap_ns: the smallest of those gaps in ns: with max_gap_ns, how far single collectives disagree with skew_ns (ranks that leave a collective at different times, or a drifting clock)
-- column max_gap_ns: the largest of those gaps in ns
-- column reference: true for the traces on the reference clock: the host of the lowest rank (of the lowest trace id without ranks)
-- label started_ns: started
-- label skew_ns: skew
-- label min_gap_ns: min gap
-- label max_gap_ns: max gap
--
-- A collective counts for a clock when every trace on the workspace's clocks (with a UTC
-- offset and communication kernels) ran it as often: the first n calls of a kernel name are
-- matched, n the fewest any trace made. Within a clock the ranks' ends are reduced to their
-- median first. Ends are measured from the earliest end of each matched collective, so the
-- medians stay exact integers of ns. Nothing here changes any ts: `export --format perfetto
-- --align-clocks` subtracts skew_ns on request (traceql/clocks.py).
WITH traces AS (
    SELECT trace_id, rank, host, clock, utc_offset_ns, start_ts, coalesce(host, '#' || trace_id) AS clock_id
    FROM trace
),
comm AS (
    SELECT k.trace_id, coalesce(k.short_name, k.name) AS name, k.ts + k.dur + t.utc_offset_ns AS end_utc,
           row_number() OVER (PARTITION BY k.trace_id, coalesce(k.short_name, k.name) ORDER BY k.ts, k.kernel_id) AS i
    FROM kernel k
    JOIN launch l ON l.trace_id = k.trace_id AND l.op_id = k.kernel_id AND l.op_kind = 'kernel'
    JOIN traces t ON t.trace_id = k.trace_id
    WHERE l.category = 'communication' AND t.utc_offset_ns IS NOT NULL AND $per_trace IS NOT NULL
      AND /* where */ TRUE
),
counts AS (  -- kernel names every trace with communication ran, and how often at least
    SELECT name, min(n) AS n
    FROM (SELECT trace_id, name, count(*) AS n FROM comm GROUP BY trace_id, name)
    GROUP BY name
    HAVING count(*) = (SELECT count(DISTINCT trace_id) FROM comm)
),
matched AS (
    SELECT c.trace_id, t.clock_id, c.name, c.i, c.end_utc,
           c.end_utc - min(c.end_utc) OVER (PARTITION BY c.name, c.i) AS since_first
    FROM comm c
    JOIN counts n ON n.name = c.name AND c.i <= n.n
    JOIN traces t ON t.trace_id = c.trace_id
),
per_clock AS (
    SELECT clock_id, name, i, median(since_first) AS end_ns FROM matched GROUP BY clock_id, name, i
),
ref AS (
    SELECT clock_id FROM traces WHERE utc_offset_ns IS NOT NULL
    ORDER BY rank NULLS LAST, trace_id LIMIT 1
),
gaps AS (
    SELECT p.clock_id, p.end_ns - r.end_ns AS gap
    FROM per_clock p
    JOIN per_clock r ON r.name = p.name AND r.i = p.i AND r.clock_id = (SELECT clock_id FROM ref)
),
estimate AS (
    SELECT clock_id, count(*) AS collectives, CAST(floor(median(gap)) AS BIGINT) AS skew_ns,
           CAST(floor(min(gap)) AS BIGINT) AS min_gap_ns, CAST(floor(max(gap)) AS BIGINT) AS max_gap_ns
    FROM gaps
    GROUP BY clock_id
)
SELECT t.trace_id, t.rank, t.host, t.clock,
       t.start_ts + t.utc_offset_ns - min(t.start_ts + t.utc_offset_ns) OVER () AS started_ns,
       coalesce(e.collectives, 0) AS collectives,
       e.skew_ns, e.min_gap_ns, e.max_gap_ns, t.clock_id = (SELECT clock_id FROM ref) AS reference
FROM traces t
LEFT JOIN estimate e ON e.clock_id = CASE WHEN t.utc_offset_ns IS NOT NULL THEN t.clock_id END  -- not a condition on t: a nested loop
WHERE ($trace_id IS NULL OR t.trace_id = $trace_id)
ORDER BY t.rank NULLS LAST, t.trace_id;
