-- derived_graph_exec, derived_graph_event: the CUDA graph executions and graph lifecycle events
-- of the trace being ingested (getvariable('trace_id')), from the adapters' src_graph_exec and
-- src_graph_event, numbered in (ts, source row) order, each with the API call behind it. Both
-- are small (one row per graph launch or graph/node event): only the API calls of their keys
-- or threads are read, and every join is a hash or ASOF join.

-- A graph execution's launching call is found as a kernel's is (schemas/derive/launch.sql): the
-- same correlation id in the same process; should several calls share that key, the runtime
-- call that started last at or before the execution, else such a driver (or other) call, else
-- the key's earliest call (runtime first).
CREATE OR REPLACE TEMP VIEW derived_graph_exec AS
WITH g AS (
    SELECT *, row_number() OVER (ORDER BY ts, src_row) - 1 AS exec_row_id FROM src_graph_exec
),
calls AS (
    SELECT a.api_id, a.pid, a.correlation_id, a.ts, a.api_kind = 'runtime' AS runtime
    FROM api_call a
    SEMI JOIN (SELECT DISTINCT pid, correlation_id FROM g) k
      ON k.pid = a.pid AND k.correlation_id = a.correlation_id
    WHERE a.trace_id = getvariable('trace_id')
),
rt AS (SELECT * FROM calls WHERE runtime),
nrt AS (SELECT * FROM calls WHERE NOT runtime),
earliest AS (
    SELECT pid, correlation_id, arg_min(api_id, (NOT runtime, ts, api_id)) AS api_id
    FROM calls GROUP BY pid, correlation_id
),
chosen AS (
    SELECT g.src_row, coalesce(r.api_id, d.api_id, e.api_id) AS api_id
    FROM g
    ASOF LEFT JOIN rt r ON r.pid = g.pid AND r.correlation_id = g.correlation_id AND g.ts >= r.ts
    ASOF LEFT JOIN nrt d ON d.pid = g.pid AND d.correlation_id = g.correlation_id AND g.ts >= d.ts
    LEFT JOIN earliest e ON e.pid = g.pid AND e.correlation_id = g.correlation_id
)
SELECT
    getvariable('trace_id')::INTEGER AS trace_id, g.exec_row_id,
    g.device_id, g.context_id, g.stream_id, g.pid, g.correlation_id, g.ts, g.dur,
    g.graph_id, g.graph_exec_id,
    a.api_id, a.name AS api_name,
    CASE WHEN g.ts - (a.ts + a.dur) >= 0 THEN g.ts - (a.ts + a.dur) END AS queue_delay
FROM g
JOIN chosen c USING (src_row)
LEFT JOIN api_call a ON a.trace_id = getvariable('trace_id') AND a.api_id = c.api_id;

-- A graph event's call is the API call of its thread that started last at or before the event
-- and had not ended yet: cudaStreamBeginCapture for a captured graph (the graph is created when
-- capture begins), cudaGraphInstantiate for an executable graph and the node clones it makes,
-- cudaGraphAddKernelNode or the captured launch for a node. Calls on one thread overlap only
-- when one nests in another: then the one that started last is taken, and no call is named when
-- it ended before the event.
CREATE OR REPLACE TEMP VIEW derived_graph_event AS
WITH e AS (
    SELECT *, row_number() OVER (ORDER BY ts, src_row) - 1 AS graph_event_id FROM src_graph_event
),
calls AS (
    SELECT a.api_id, a.pid, a.tid, a.ts, a.dur, a.name
    FROM api_call a
    SEMI JOIN (SELECT DISTINCT pid, tid FROM e) t ON t.pid = a.pid AND t.tid = a.tid
    WHERE a.trace_id = getvariable('trace_id')
)
SELECT
    getvariable('trace_id')::INTEGER AS trace_id, e.graph_event_id,
    e.pid, e.tid, e.ts, e.dur, e.kind, e.name,
    e.graph_id, e.original_graph_id, e.graph_exec_id, e.graph_node_id, e.original_graph_node_id,
    CASE WHEN e.ts <= a.ts + a.dur THEN a.api_id END AS api_id,
    CASE WHEN e.ts <= a.ts + a.dur THEN a.name END AS api_name
FROM e
ASOF LEFT JOIN calls a ON a.pid = e.pid AND a.tid = e.tid AND e.ts >= a.ts;
