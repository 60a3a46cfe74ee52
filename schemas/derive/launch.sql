-- derived_launch: every GPU operation of the trace being ingested (getvariable('trace_id')) joined
-- to its launching API call: the same correlation id within the same process. Correlation ids
-- repeat across processes, so the process is part of the key.
--
-- launch_shared_keys: how many (process, correlation id) keys more than one API call of the
-- trace carries (a damaged or edited export, or runtime and driver calls sharing an id), and
-- those calls. Ingest reads it first: with no shared key every operation has at most one
-- candidate and derived_launch_first is the answer; else derived_launch picks one call per
-- operation without ever pairing every operation of a key with every call of it (a trace whose
-- correlation ids are all 1 would give operations x calls rows).
CREATE OR REPLACE TEMP TABLE launch_shared_keys AS
SELECT getvariable('trace_id')::INTEGER AS trace_id, count(*) AS keys, coalesce(sum(n), 0) AS calls
FROM (SELECT count(*) AS n
      FROM api_call
      WHERE trace_id = getvariable('trace_id') AND correlation_id IS NOT NULL
      GROUP BY pid, correlation_id
      HAVING count(*) > 1);

-- launch_comm_names: the distinct kernel names of the trace that are communication (collectives and
-- point-to-point transfers run as kernels): NCCL, RCCL and MSCCL kernels (ncclKernel_*,
-- ncclDevKernel_*), and collectives of other libraries named for what they do (all_reduce,
-- all_gather, reduce_scatter, all_to_all in either spelling, vLLM's cross_device_reduce), ignoring
-- case. This is the one place launch.category, and through it device_busy and traceql analyze,
-- tell communication from compute. Names are matched once each, not once per kernel, and only
-- those holding 'ccl', 'all' or 'reduce' (any case; every match holds one) meet the expression:
-- on C++ kernel names of a few hundred characters it cost 0.3 ms a name (0.015 CPU s of a small
-- export's ingest), the substring test a hundredth of that. The distinct names are MATERIALIZED:
-- from a subquery DuckDB pushed both tests below the DISTINCT, onto every kernel (16 against 10
-- ms of cs336-jsun's ingest, 17 k kernels of 56 names).
CREATE OR REPLACE TEMP TABLE launch_comm_names AS
WITH names AS MATERIALIZED (
    SELECT DISTINCT name FROM kernel WHERE trace_id = getvariable('trace_id') AND name IS NOT NULL
)
SELECT name
FROM names
WHERE (contains(lower(name), 'ccl') OR contains(lower(name), 'all') OR contains(lower(name), 'reduce'))
  AND regexp_matches(name, '(?i)(nccl|rccl|msccl|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|cross_device_reduce)');

-- derived_launch_first: the plain equi-join, right when no two calls share a key, as in most
-- traces (the ranking this needed before cost 5 s of 8.6 s for the 15 M operations of the L
-- benchmark).
CREATE OR REPLACE TEMP VIEW derived_launch_first AS
SELECT
    o.trace_id, o.op_id, o.op_kind, a.api_id, o.pid, a.tid,
    a.ts AS api_ts, a.dur AS api_dur, a.name AS api_name,
    CASE WHEN o.ts - (a.ts + a.dur) >= 0 THEN o.ts - (a.ts + a.dur) END AS queue_delay,
    CASE WHEN o.op_kind <> 'kernel' THEN 'memory' WHEN c.name IS NOT NULL THEN 'communication' ELSE 'compute' END
        AS category
FROM gpu_op o
LEFT JOIN api_call a
  ON a.trace_id = o.trace_id AND a.pid = o.pid AND a.correlation_id = o.correlation_id
LEFT JOIN launch_comm_names c ON c.name = o.name
WHERE o.trace_id = getvariable('trace_id');

-- derived_launch: when calls share keys, each operation takes, among the calls of its key, the
-- runtime call that started last at or before the operation's start; else such a driver (or
-- other) call; else the earliest call of the key (runtime first). For a key of one call that
-- is that call, as derived_launch_first says. Two ASOF joins and one aggregate: linear.
CREATE OR REPLACE TEMP VIEW derived_launch AS
WITH ops AS (
    SELECT trace_id, op_id, op_kind, pid, correlation_id, ts
    FROM gpu_op WHERE trace_id = getvariable('trace_id') AND correlation_id IS NOT NULL
),
calls AS (
    SELECT api_id, pid, correlation_id, ts, api_kind = 'runtime' AS runtime
    FROM api_call WHERE trace_id = getvariable('trace_id') AND correlation_id IS NOT NULL
),
rt AS (SELECT * FROM calls WHERE runtime),
nrt AS (SELECT * FROM calls WHERE NOT runtime),
earliest AS (
    SELECT pid, correlation_id, arg_min(api_id, (NOT runtime, ts, api_id)) AS api_id
    FROM calls GROUP BY pid, correlation_id
),
chosen AS (
    SELECT o.op_id, coalesce(r.api_id, d.api_id, e.api_id) AS api_id
    FROM ops o
    ASOF LEFT JOIN rt r ON r.pid = o.pid AND r.correlation_id = o.correlation_id AND o.ts >= r.ts
    ASOF LEFT JOIN nrt d ON d.pid = o.pid AND d.correlation_id = o.correlation_id AND o.ts >= d.ts
    LEFT JOIN earliest e ON e.pid = o.pid AND e.correlation_id = o.correlation_id
)
SELECT
    o.trace_id, o.op_id, o.op_kind, a.api_id, o.pid, a.tid,
    a.ts AS api_ts, a.dur AS api_dur, a.name AS api_name,
    CASE WHEN o.ts - (a.ts + a.dur) >= 0 THEN o.ts - (a.ts + a.dur) END AS queue_delay,
    CASE WHEN o.op_kind <> 'kernel' THEN 'memory' WHEN n.name IS NOT NULL THEN 'communication' ELSE 'compute' END
        AS category
FROM gpu_op o
LEFT JOIN chosen c ON c.op_id = o.op_id
LEFT JOIN api_call a ON a.trace_id = o.trace_id AND a.api_id = c.api_id
LEFT JOIN launch_comm_names n ON n.name = o.name
WHERE o.trace_id = getvariable('trace_id');
