-- derived_launch: every GPU operation of the trace being ingested (getvariable('trace_id')) joined
-- to its launching API call: the same correlation id within the same process. Correlation ids
-- repeat across processes, so the process is part of the key. Should two calls share the key,
-- the runtime call is preferred, then the earliest.
CREATE OR REPLACE TEMP VIEW derived_launch AS
SELECT
    o.trace_id, o.op_id, o.op_kind, a.api_id, o.pid, a.tid,
    a.ts AS api_ts, a.dur AS api_dur, a.name AS api_name,
    CASE WHEN o.ts - (a.ts + a.dur) >= 0 THEN o.ts - (a.ts + a.dur) END AS queue_delay
FROM gpu_op o
LEFT JOIN api_call a
  ON a.trace_id = o.trace_id AND a.pid = o.pid AND a.correlation_id = o.correlation_id
WHERE o.trace_id = getvariable('trace_id')
QUALIFY row_number() OVER (PARTITION BY o.op_id ORDER BY a.api_kind = 'runtime' DESC, a.ts, a.api_id) = 1;
