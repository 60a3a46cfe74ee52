-- rank: the ranks of a multi-rank job side by side, one row per trace (a rank's file): its span, and how its GPUs spent it (busy, computing, communicating, communication no computation hid, idle), with the job's median and the slowest rank to compare against.
-- input: device_busy
-- param trace_id: only this trace (NULL: every trace in the workspace)
-- param per_trace: accepted for symmetry with the other reports: every row is one trace already
-- column trace_id: trace (trace.trace_id)
-- column rank: rank of the trace in its job (trace.rank; NULL when unknown, see rank_source)
-- column host: the profiled machine (trace.host)
-- column gpus: GPUs of the trace that ran work (device_busy rows); the times below are summed over them
-- column span_ns: the trace's time span (trace.duration: first to last event of any kind) in ns
-- column busy_ns: time the rank's GPUs ran at least one operation, in ns (device_busy.busy_ns): compute_ns + comm_exposed_ns + the time only copies or memsets ran
-- column compute_ns: time at least one compute kernel ran, in ns (device_busy.compute_ns)
-- column comm_ns: all the time communication kernels (NCCL and other collectives, launch.category) ran, hidden behind computation or not, in ns (device_busy.comm_ns)
-- column comm_exposed_ns: time communication kernels ran while no compute kernel did: exposed communication, which the rank waited for, in ns (device_busy.comm_exposed_ns)
-- column idle_ns: time the GPUs ran nothing: span_ns x gpus - busy_ns, in ns
-- column compute_vs_median_pct: compute_ns against the median compute_ns of the rows shown, in percent (+30: this rank computed 30 % longer than the median rank: a straggler when its peers' comm_exposed_ns grows with it)
-- label trace_id: trace
-- label span_ns: span
-- label busy_ns: busy
-- label compute_ns: compute
-- label comm_ns: comm
-- label comm_exposed_ns: exposed
-- label idle_ns: idle
-- label compute_vs_median_pct: vs median %
--
-- The per-GPU figures of `report --by breakdown --per-trace` (device_busy, stored at ingest),
-- added up per trace; breakdown also has the memory-only time and the percentages. A trace
-- with no GPU work has gpus 0 and no GPU time, busy or idle. Rows are ordered by rank (traces
-- without one last, by trace id); trace.rank_source and host_source say where each rank and
-- host came from. --where filters device_busy rows (e.g. "device_id = 0").
WITH busy AS (
    SELECT *
    FROM device_busy
    WHERE ($trace_id IS NULL OR trace_id = $trace_id)
      AND /* where */ TRUE
),
per_trace AS (
    SELECT trace_id, count(*) AS gpus, sum(busy_ns) AS busy_ns, sum(compute_ns) AS compute_ns,
           sum(comm_ns) AS comm_ns, sum(comm_exposed_ns) AS comm_exposed_ns
    FROM busy
    GROUP BY trace_id
),
rows AS (
    SELECT t.trace_id, t.rank, t.host, coalesce(b.gpus, 0) AS gpus, t.duration AS span_ns,
           t.duration * coalesce(b.gpus, 0) AS gpu_span_ns,
           CAST(coalesce(b.busy_ns, 0) AS BIGINT) AS busy_ns, CAST(coalesce(b.compute_ns, 0) AS BIGINT) AS compute_ns,
           CAST(coalesce(b.comm_ns, 0) AS BIGINT) AS comm_ns,
           CAST(coalesce(b.comm_exposed_ns, 0) AS BIGINT) AS comm_exposed_ns
    FROM trace t
    LEFT JOIN per_trace b ON b.trace_id = t.trace_id
    WHERE ($trace_id IS NULL OR t.trace_id = $trace_id)
      AND $per_trace IS NOT NULL  -- every row is one trace, with or without per_trace
)
SELECT
    trace_id, rank, host, gpus, span_ns,
    busy_ns, compute_ns, comm_ns, comm_exposed_ns, gpu_span_ns - busy_ns AS idle_ns,
    100.0 * (compute_ns - median(compute_ns) OVER ()) / nullif(median(compute_ns) OVER (), 0) AS compute_vs_median_pct
FROM rows
ORDER BY rank NULLS LAST, trace_id;
