-- jobs: which traces of the workspace make one job (the ranks of one run, pooled by the reports) and which are unrelated (a before and an after run, files from different machines and days): one row per trace with its job and why a new job starts there.
-- param trace_id: only this trace (NULL: every trace in the workspace)
-- default gap_ns: 60000000000
-- param gap_ns: a trace that starts more than this many ns after every earlier trace (by UTC start) ended begins a new job
-- column trace_id: trace (trace.trace_id)
-- column job: the job of the trace, named by its lowest trace id
-- column rank: rank of the trace (trace.rank)
-- column host: the profiled machine (trace.host)
-- column started_ns: UTC start of the trace's first event after the first event of its job, in ns (0 for the first; NULL when the trace records no UTC start)
-- column gap_ns: for the first trace of a job that starts after others ended: how long after the latest end before it, in ns (NULL otherwise)
-- column reason: why the trace begins a job of its own ('first trace', 'no UTC start recorded', 'starts 440 days after the traces before it ended', 'rank 0 appears in another trace of the same time', 'world sizes 16 and 1 differ'); NULL for a trace that joins the job before it
-- label started_ns: started
-- label gap_ns: gap
--
-- The rule: traces are laid on the UTC axis (trace.start_ts/end_ts + utc_offset_ns) and taken
-- in order of their start; a trace joins the job before it when it starts at most gap_ns
-- after the latest end so far (the ranks of one run overlap in time). A trace with no UTC
-- start is a job of its own. When the traces of one such run contradict each other as ranks
-- of one job (a rank recorded twice, or different world sizes), none of them is pooled: each
-- is a job of its own.
WITH t AS (
    SELECT trace_id, rank, host, world_size,
           start_ts + utc_offset_ns AS start_utc, end_ts + utc_offset_ns AS end_utc
    FROM trace
    WHERE ($trace_id IS NULL OR trace_id = $trace_id)
),
ordered AS (
    SELECT *, max(end_utc) OVER (ORDER BY start_utc NULLS LAST, trace_id
                                 ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before_end
    FROM t
),
starts AS (
    SELECT *, (start_utc IS NULL OR before_end IS NULL OR start_utc > before_end + $gap_ns) AS new_run
    FROM ordered
),
runs AS (  -- runs of traces that overlap in time (within gap_ns)
    SELECT *, sum(CASE WHEN new_run THEN 1 ELSE 0 END)
                  OVER (ORDER BY start_utc NULLS LAST, trace_id ROWS UNBOUNDED PRECEDING) AS run
    FROM starts
),
stats AS (  -- each run: its first trace and start, and whether its traces contradict one job
    SELECT run, min(trace_id) AS first_id, min(start_utc) AS run_start, count(*) AS traces,
           count(rank) > count(DISTINCT rank) AS rank_twice,
           coalesce(min(world_size) <> max(world_size), FALSE) AS sizes_differ,
           min(world_size) AS min_world, max(world_size) AS max_world
    FROM runs
    GROUP BY run
),
checked AS (
    SELECT r.*, s.first_id, s.run_start, s.traces, s.min_world, s.max_world,
           (s.rank_twice OR s.sizes_differ) AS apart
    FROM runs r
    JOIN stats s ON s.run = r.run
)
SELECT trace_id,
       CASE WHEN apart THEN trace_id ELSE first_id END AS job,
       rank, host,
       CASE WHEN apart THEN 0 ELSE start_utc - run_start END AS started_ns,
       CASE WHEN new_run AND before_end IS NOT NULL THEN start_utc - before_end END AS gap_ns,
       CASE WHEN start_utc IS NULL THEN 'no UTC start recorded'
            WHEN apart AND min_world <> max_world
                THEN 'world sizes ' || CAST(min_world AS VARCHAR) || ' and ' || CAST(max_world AS VARCHAR) || ' differ'
            WHEN apart THEN 'a rank appears in more than one trace of the same time'
            WHEN NOT new_run THEN NULL
            WHEN before_end IS NULL THEN 'first trace'
            ELSE 'starts ' || CASE
                WHEN start_utc - before_end >= 2 * 86400000000000
                    THEN CAST(floor((start_utc - before_end) / 86400000000000) AS BIGINT) || ' days'
                WHEN start_utc - before_end >= 2 * 3600000000000
                    THEN CAST(floor((start_utc - before_end) / 3600000000000) AS BIGINT) || ' hours'
                ELSE CAST(floor((start_utc - before_end) / 60000000000) AS BIGINT) || ' minutes' END
                || ' after the traces before it ended'
       END AS reason
FROM checked
ORDER BY job, started_ns, trace_id;
