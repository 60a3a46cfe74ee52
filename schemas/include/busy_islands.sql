-- busy_islands(rows; partition; order): the busy time before any instant, from one window sweep
-- (no interval join). Reads {rows}: intervals with ts and end_ts (and the {partition} and {order}
-- columns; {order} starts with ts and makes the order total). Defines `islands`: per {partition},
-- the unions of overlapping intervals (ts, end_ts, island number), and `covered`: the islands
-- with before_ns, the busy time of the partition's islands before this one. The busy time
-- before an instant t is then c.before_ns + least(t, c.end_ts) - c.ts of the island c that
-- started last at or before t (an ASOF join), 0 when there is none.
swept AS (
    SELECT *, max(end_ts) OVER (PARTITION BY {partition} ORDER BY {order}
                                ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach
    FROM {rows}
),
numbered AS (
    SELECT *, sum(CASE WHEN reach IS NULL OR ts > reach THEN 1 ELSE 0 END)
                  OVER (PARTITION BY {partition} ORDER BY {order} ROWS UNBOUNDED PRECEDING) AS island
    FROM swept
),
islands AS (
    SELECT {partition}, island, min(ts) AS ts, max(end_ts) AS end_ts
    FROM numbered GROUP BY {partition}, island
),
covered AS (
    SELECT *, coalesce(sum(end_ts - ts) OVER (PARTITION BY {partition} ORDER BY ts
                                              ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS before_ns
    FROM islands
)
