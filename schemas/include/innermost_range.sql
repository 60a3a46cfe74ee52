-- innermost_range: the innermost push/pop NVTX range open on a thread at an instant, for many
-- instants at once: one ASOF join per stack depth of the thread, never an interval join.
-- Reads the CTE probe_at: trace_id, pid, tid, ts (the thread and the instant) and the probe's own
-- key columns; defines at_range: probe_at's columns with range_path and range_id of the deepest
-- push/pop range of that thread open at ts (a probe inside no range has no row). Unclosed ranges
-- count as open to the end of the trace.
pushpop AS (
    SELECT trace_id, pid, tid, depth, ts, coalesce(ts + dur, 9223372036854775807) AS end_ts, path, range_id
    FROM nvtx_range WHERE style = 'push/pop' AND ($trace_id IS NULL OR trace_id = $trace_id)
),
levels AS (
    SELECT DISTINCT trace_id, pid, tid, depth FROM pushpop
),
probes AS (
    SELECT p.*, v.depth AS probe_depth
    FROM probe_at p JOIN levels v ON v.trace_id = p.trace_id AND v.pid = p.pid AND v.tid = p.tid
),
at_range AS (
    SELECT p.* EXCLUDE (probe_depth), arg_max(r.path, r.depth) AS range_path, arg_max(r.range_id, r.depth) AS range_id
    FROM probes p
    ASOF JOIN pushpop r
      ON r.trace_id = p.trace_id AND r.pid = p.pid AND r.tid = p.tid AND r.depth = p.probe_depth AND r.ts <= p.ts
    WHERE r.end_ts > p.ts
    GROUP BY ALL
)
