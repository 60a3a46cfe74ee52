-- derived_device_busy: per GPU of the trace being ingested (getvariable('trace_id')), or of every
-- trace in the workspace when the variable is unset (NULL: how a workspace made before the
-- device_busy table existed gets it, see traceql/workspace.py and create_contract in
-- traceql/ingest.py), its GPU operations and busy time. Busy time is the length of the union of
-- the operations' intervals, so concurrent streams count once. One sweep per GPU in start order:
-- each operation adds the part of its interval that lies beyond the latest end seen before it.
CREATE OR REPLACE TEMP VIEW derived_device_busy AS
WITH ops AS (
    SELECT trace_id, device_id, ts, dur,
           max(ts + dur) OVER (PARTITION BY trace_id, device_id ORDER BY ts, dur
                               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS covered_until
    FROM gpu_op
    WHERE getvariable('trace_id') IS NULL OR trace_id = getvariable('trace_id')
)
SELECT trace_id, device_id, count(*) AS ops,
       CAST(sum(greatest(0, ts + dur - greatest(ts, coalesce(covered_until, ts)))) AS BIGINT) AS busy_ns
FROM ops
GROUP BY trace_id, device_id;
