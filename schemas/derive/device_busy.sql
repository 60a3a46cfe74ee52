-- derived_device_busy: per GPU of the trace being ingested (getvariable('trace_id')), or of every
-- trace in the workspace when the variable is unset (NULL: how a workspace made before the
-- device_busy table existed gets it, see traceql/workspace.py and create_contract in
-- traceql/ingest.py), its GPU operations, busy time and the busy time's breakdown (HTA's temporal
-- breakdown). Each time is the length of a union of intervals, so concurrent streams count once:
-- of all operations (busy), of all kernels, of compute kernels and of communication kernels
-- (launch.category). One sweep per GPU and set in start order: each operation adds the part of
-- its interval that lies beyond the latest end seen before it. A trace without communication
-- kernels (most) needs no separate compute sweep: its compute time is its kernel time.
-- CUDA graphs traced whole (graph_exec: nsys --cuda-graph-trace=graph) have no kernel rows: each
-- execution is one operation of category 'compute', start to end, gaps between its nodes
-- included. Graphs traced node by node (nsys --cuda-graph-trace=node, every Kineto trace) are
-- their kernels, and count as such.
CREATE OR REPLACE TEMP VIEW derived_device_busy AS
WITH ops AS (
    SELECT o.trace_id, o.device_id, o.ts, o.dur, CAST(l.category AS VARCHAR) AS category
    FROM gpu_op o
    JOIN launch l ON l.trace_id = o.trace_id AND l.op_id = o.op_id
    WHERE getvariable('trace_id') IS NULL OR o.trace_id = getvariable('trace_id')
    UNION ALL
    SELECT trace_id, device_id, ts, dur, 'compute'
    FROM graph_exec
    WHERE getvariable('trace_id') IS NULL OR trace_id = getvariable('trace_id')
),
comm_traces AS (
    SELECT DISTINCT trace_id FROM ops WHERE category = 'communication'
),
parts AS (
    SELECT trace_id, device_id, ts, dur, 'all' AS part FROM ops
    UNION ALL
    SELECT trace_id, device_id, ts, dur, 'kernel' FROM ops WHERE category <> 'memory'
    UNION ALL
    SELECT trace_id, device_id, ts, dur, 'communication' FROM ops WHERE category = 'communication'
    UNION ALL
    SELECT trace_id, device_id, ts, dur, 'compute' FROM ops SEMI JOIN comm_traces USING (trace_id)
    WHERE category = 'compute'
),
swept AS (
    /* include: busy_sweep(rows = parts; partition = trace_id, device_id, part; order = ts, dur) */
),
unions AS (
    SELECT trace_id, device_id, part, count(*) AS ops,
           CAST(sum(greatest(0, ts + dur - greatest(ts, coalesce(covered_until, ts)))) AS BIGINT) AS busy_ns
    FROM swept
    GROUP BY trace_id, device_id, part
),
per_gpu AS (
    SELECT trace_id, device_id,
           max(ops) FILTER (WHERE part = 'all') AS ops,
           max(busy_ns) FILTER (WHERE part = 'all') AS busy_ns,
           coalesce(max(busy_ns) FILTER (WHERE part = 'kernel'), 0) AS kernel_ns,
           coalesce(max(busy_ns) FILTER (WHERE part = 'communication'), 0) AS comm_ns,
           max(busy_ns) FILTER (WHERE part = 'compute') AS compute_only_ns
    FROM unions
    GROUP BY trace_id, device_id
)
SELECT trace_id, device_id, ops, busy_ns,
       CASE WHEN comm_ns = 0 THEN kernel_ns ELSE coalesce(compute_only_ns, 0) END AS compute_ns,
       comm_ns,
       kernel_ns - CASE WHEN comm_ns = 0 THEN kernel_ns ELSE coalesce(compute_only_ns, 0) END AS comm_exposed_ns,
       busy_ns - kernel_ns AS memory_exposed_ns
FROM per_gpu;
