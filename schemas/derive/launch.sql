-- derived_launch: every GPU operation of the trace being ingested (getvariable('trace_id')) joined
-- to its launching API call: the same correlation id within the same process. Correlation ids
-- repeat across processes, so the process is part of the key. Should two calls share the key,
-- the runtime call is preferred, then the earliest.
CREATE OR REPLACE TEMP VIEW derived_launch_all AS
SELECT
    o.trace_id, o.op_id, o.op_kind, a.api_id, o.pid, a.tid,
    a.ts AS api_ts, a.dur AS api_dur, a.name AS api_name,
    CASE WHEN o.ts - (a.ts + a.dur) >= 0 THEN o.ts - (a.ts + a.dur) END AS queue_delay,
    a.api_kind
FROM gpu_op o
LEFT JOIN api_call a
  ON a.trace_id = o.trace_id AND a.pid = o.pid AND a.correlation_id = o.correlation_id
WHERE o.trace_id = getvariable('trace_id');

CREATE OR REPLACE TEMP VIEW derived_launch AS
SELECT * EXCLUDE (api_kind)
FROM derived_launch_all
QUALIFY row_number() OVER (PARTITION BY op_id ORDER BY api_kind = 'runtime' DESC, api_ts, api_id) = 1;

-- derived_launch_first: the same when no two calls share a key, as in most traces: then every
-- operation has one row already, and the ranking above (5 s of 8.6 s for the 15 M operations
-- of the L benchmark) is not needed. Ingest writes these rows and, should an operation have
-- got two, replaces them with derived_launch's.
CREATE OR REPLACE TEMP VIEW derived_launch_first AS
SELECT * EXCLUDE (api_kind) FROM derived_launch_all;
