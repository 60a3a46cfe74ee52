-- device: GPU work per GPU: operations, summed time by kind, busy time (overlapping operations counted once) and its share of the trace span.
-- input: gpu_op
-- param trace_id: only this trace (NULL: every trace in the workspace)
-- param per_trace: true to give each trace its own rows, percentages taken within the trace
-- column trace_id if per_trace: trace of the row (trace.trace_id)
-- column device_id: GPU (gpu_op.device_id); GPUs of different traces with the same id share a row unless per_trace
-- column device: GPU name (device.name)
-- column calls: GPU operations on the GPU (kernels, copies, memsets and executions of CUDA graphs traced whole, graph_exec)
-- column total_ns: summed duration of those operations in ns (concurrent streams overlap: not wall time)
-- column pct: total_ns as a percentage of the summed duration of all GPU operations in the report (every GPU; after --where; within the trace with per_trace)
-- column kernel_ns: summed kernel time in ns
-- column memcpy_ns: summed copy time in ns
-- column memset_ns: summed memset time in ns
-- column graph_ns: summed time of the executions of CUDA graphs traced whole (graph_exec: nsys --cuda-graph-trace=graph) in ns
-- column busy_ns: time the GPU ran at least one operation: the union of the operations' intervals in ns, computed per trace and summed
-- column span_ns: the trace's time span (trace.duration: first to last event of any kind) in ns, summed over the traces in the row
-- column busy_pct: busy_ns as a percentage of span_ns (the trace span, not the GPU's own first-to-last span)
-- label pct: Time(%) of all GPU operations
-- label busy_pct: Busy(%) of trace span
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
    /* include: busy_sweep(rows = input; partition = trace_id, device_id; order = ts, dur) */
),
per_device AS (
    SELECT
        trace_id,
        device_id,
        count(*) AS calls,
        sum(dur) AS total_ns,
        coalesce(sum(dur) FILTER (WHERE op_kind = 'kernel'), 0) AS kernel_ns,
        coalesce(sum(dur) FILTER (WHERE op_kind = 'memcpy'), 0) AS memcpy_ns,
        coalesce(sum(dur) FILTER (WHERE op_kind = 'memset'), 0) AS memset_ns,
        coalesce(sum(dur) FILTER (WHERE op_kind = 'graph'), 0) AS graph_ns,
        sum(greatest(0, ts + dur - greatest(ts, coalesce(covered_until, ts)))) AS busy_ns
    FROM swept
    GROUP BY 1, 2
),
grouped AS (
    SELECT
        CASE WHEN $per_trace THEN p.trace_id END AS trace_id,
        p.device_id,
        string_agg(DISTINCT d.name, ', ' ORDER BY d.name) AS device,
        sum(p.calls) AS calls,
        sum(p.total_ns) AS total_ns,
        sum(p.kernel_ns) AS kernel_ns,
        sum(p.memcpy_ns) AS memcpy_ns,
        sum(p.memset_ns) AS memset_ns,
        sum(p.graph_ns) AS graph_ns,
        sum(p.busy_ns) AS busy_ns,
        sum(t.duration) AS span_ns
    FROM per_device p
    JOIN trace t ON t.trace_id = p.trace_id
    LEFT JOIN device d ON d.trace_id = p.trace_id AND d.device_id = p.device_id
    GROUP BY 1, 2
)
SELECT
    trace_id, device_id, device,
    TRY_CAST(calls AS BIGINT) AS calls,
    TRY_CAST(total_ns AS BIGINT) AS total_ns,
    100.0 * total_ns / nullif(sum(total_ns) OVER (PARTITION BY trace_id), 0) AS pct,
    TRY_CAST(kernel_ns AS BIGINT) AS kernel_ns,
    TRY_CAST(memcpy_ns AS BIGINT) AS memcpy_ns,
    TRY_CAST(memset_ns AS BIGINT) AS memset_ns,
    TRY_CAST(graph_ns AS BIGINT) AS graph_ns,
    TRY_CAST(busy_ns AS BIGINT) AS busy_ns,
    TRY_CAST(span_ns AS BIGINT) AS span_ns,
    100.0 * busy_ns / nullif(span_ns, 0) AS busy_pct
FROM grouped
ORDER BY trace_id NULLS FIRST, device_id NULLS LAST;
