-- busy_islands: each GPU's busy time before any instant, from one window sweep (no interval join).
-- Reads the CTE busy_ops (trace_id, device_id, op_id, ts, end_ts: the operations that make the GPU
-- busy); defines `covered`: the GPU's busy islands (unions of overlapping operations) with ts,
-- end_ts and before_ns, the busy time of the islands before this one. The busy time before an
-- instant t is then c.before_ns + least(t, c.end_ts) - c.ts of the island c that started last at
-- or before t (an ASOF join), 0 when there is none.
swept AS (
    SELECT *, max(end_ts) OVER (PARTITION BY trace_id, device_id ORDER BY ts, end_ts, op_id
                                ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach
    FROM busy_ops
),
numbered AS (
    SELECT *, sum(CASE WHEN reach IS NULL OR ts > reach THEN 1 ELSE 0 END)
                  OVER (PARTITION BY trace_id, device_id ORDER BY ts, end_ts, op_id ROWS UNBOUNDED PRECEDING) AS island
    FROM swept
),
islands AS (
    SELECT trace_id, device_id, island, min(ts) AS ts, max(end_ts) AS end_ts
    FROM numbered GROUP BY trace_id, device_id, island
),
covered AS (
    SELECT *, coalesce(sum(end_ts - ts) OVER (PARTITION BY trace_id, device_id ORDER BY ts
                                              ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS before_ns
    FROM islands
)
