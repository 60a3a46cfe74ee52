-- busy_overlap(rows): the part of each interval of {rows} (trace_id, device_id, op_id, ts, end_ts)
-- during which its GPU was busy, after busy_islands (its `covered`, partitioned by trace_id,
-- device_id): covered(end_ts) - covered(ts), each looked up with an ASOF join. No interval join.
-- Defines `overlapped`: the rows of {rows} with overlapped_ns.
at_start AS (
    SELECT k.trace_id, k.op_id, coalesce(c.before_ns + least(k.ts, c.end_ts) - c.ts, 0) AS covered_ns
    FROM {rows} k
    ASOF LEFT JOIN covered c ON c.trace_id = k.trace_id AND c.device_id = k.device_id AND c.ts <= k.ts
),
at_end AS (
    SELECT k.trace_id, k.op_id, coalesce(c.before_ns + least(k.end_ts, c.end_ts) - c.ts, 0) AS covered_ns
    FROM {rows} k
    ASOF LEFT JOIN covered c ON c.trace_id = k.trace_id AND c.device_id = k.device_id AND c.ts <= k.end_ts
),
overlapped AS (
    SELECT k.*, e.covered_ns - s.covered_ns AS overlapped_ns
    FROM {rows} k
    JOIN at_start s ON s.trace_id = k.trace_id AND s.op_id = k.op_id
    JOIN at_end e ON e.trace_id = k.trace_id AND e.op_id = k.op_id
)
