-- busy_sweep(rows; partition; order): the rows of {rows} (with ts and dur) in start order within
-- each {partition}, each with covered_until: the latest end (ts + dur) of the rows before it in
-- the order {order}, NULL for the first. One window sweep, no interval join: a row adds to the
-- union of the intervals (busy time) the part of it after covered_until,
-- greatest(0, ts + dur - greatest(ts, coalesce(covered_until, ts))), and starts after an idle
-- gap of ts - covered_until when that is positive.
SELECT *,
       max(ts + dur) OVER (PARTITION BY {partition} ORDER BY {order}
                           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS covered_until
FROM {rows}
