-- stream: GPU work per CUDA stream: operations, summed time by kind, and busy time (overlapping operations on the stream counted once).
-- input: gpu_op
-- param trace_id: only this trace (NULL: every trace in the workspace)
-- param per_trace: true to give each trace its own rows, percentages taken within the trace
-- column trace_id if per_trace: trace of the row (trace.trace_id)
-- column device_id: GPU of the stream (gpu_op.device_id)
-- column stream_id: CUDA stream id (gpu_op.stream_id); streams of different traces with the same ids share a row unless per_trace
-- column calls: GPU operations on the stream (kernels, copies, memsets and executions of CUDA graphs traced whole, graph_exec)
-- column total_ns: summed duration of those operations in ns
-- column pct: total_ns as a percentage of the summed duration of all GPU operations in the report (every stream; after --where; within the trace with per_trace), not of wall time
-- column kernels: kernels on the stream
-- column kernel_ns: summed kernel time in ns
-- column memcpys: copies on the stream
-- column memcpy_ns: summed copy time in ns
-- column memsets: memsets on the stream
-- column memset_ns: summed memset time in ns
-- column graphs: executions of CUDA graphs traced whole (graph_exec: nsys --cuda-graph-trace=graph) on the stream
-- column graph_ns: their summed time in ns
-- column busy_ns: union of the operations' intervals in ns (overlap counted once), computed per trace and summed
-- column first_ts: start of the stream's first operation (ns, trace clock); the earliest over traces unless per_trace
-- column last_end_ts: end of the stream's last operation (ns, trace clock); the latest over traces unless per_trace
-- label pct: Time(%) of all GPU operations
WITH ops AS (  -- GPU operations and executions of CUDA graphs traced whole (graph_exec)
    /* include: gpu_work(graph_op_id = CAST(NULL AS BIGINT)) */
),
input AS (
    SELECT *
    FROM ops
    WHERE ($trace_id IS NULL OR trace_id = $trace_id)
      AND /* where */ TRUE
),
-- sweep in start order: each operation adds the part of it that ends after every earlier one
swept AS (
    /* include: busy_sweep(rows = input; partition = trace_id, device_id, stream_id; order = ts, dur) */
),
grouped AS (
    SELECT
        CASE WHEN $per_trace THEN trace_id END AS trace_id,
        device_id,
        stream_id,
        count(*) AS calls,
        sum(dur) AS total_ns,
        count(*) FILTER (WHERE op_kind = 'kernel') AS kernels,
        coalesce(sum(dur) FILTER (WHERE op_kind = 'kernel'), 0) AS kernel_ns,
        count(*) FILTER (WHERE op_kind = 'memcpy') AS memcpys,
        coalesce(sum(dur) FILTER (WHERE op_kind = 'memcpy'), 0) AS memcpy_ns,
        count(*) FILTER (WHERE op_kind = 'memset') AS memsets,
        coalesce(sum(dur) FILTER (WHERE op_kind = 'memset'), 0) AS memset_ns,
        count(*) FILTER (WHERE op_kind = 'graph') AS graphs,
        coalesce(sum(dur) FILTER (WHERE op_kind = 'graph'), 0) AS graph_ns,
        sum(greatest(0, ts + dur - greatest(ts, coalesce(covered_until, ts)))) AS busy_ns,
        min(ts) AS first_ts,
        max(ts + dur) AS last_end_ts
    FROM swept
    GROUP BY 1, 2, 3
)
SELECT
    trace_id, device_id, stream_id, calls,
    TRY_CAST(total_ns AS BIGINT) AS total_ns,
    100.0 * total_ns / nullif(sum(total_ns) OVER (PARTITION BY trace_id), 0) AS pct,
    kernels, TRY_CAST(kernel_ns AS BIGINT) AS kernel_ns,
    memcpys, TRY_CAST(memcpy_ns AS BIGINT) AS memcpy_ns,
    memsets, TRY_CAST(memset_ns AS BIGINT) AS memset_ns,
    graphs, TRY_CAST(graph_ns AS BIGINT) AS graph_ns,
    TRY_CAST(busy_ns AS BIGINT) AS busy_ns, first_ts, last_end_ts
FROM grouped
ORDER BY trace_id NULLS FIRST, device_id NULLS LAST, stream_id NULLS LAST;
