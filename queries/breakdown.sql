-- breakdown: the temporal breakdown of each GPU (HTA's): the trace span split into time the GPU computed, communicated with no computation to hide it, only copied or set memory, and sat idle; the four add up to the span.
-- input: device_busy
-- param trace_id: only this trace (NULL: every trace in the workspace)
-- param per_trace: true to give each trace its own rows
-- column trace_id if per_trace: trace of the row (trace.trace_id)
-- column device_id: GPU (device_busy.device_id); GPUs of different traces with the same id share a row (their times and spans summed) unless per_trace
-- column device: GPU name (device.name; the names joined by ', ' when traces pooled in one row differ)
-- column span_ns: the trace's time span (trace.duration: first to last event of any kind) in ns, summed over the traces in the row: the denominator of every percentage here
-- column compute_ns: time at least one compute kernel or CUDA graph traced whole (graph_exec) ran, in ns (device_busy.compute_ns)
-- column compute_pct: compute_ns as a percentage of span_ns
-- column comm_ns: time communication kernels (NCCL and other collectives, launch.category) ran while no compute kernel did: exposed communication, in ns
-- column comm_pct: comm_ns as a percentage of span_ns
-- column memory_ns: time only copies or memsets ran, no kernel: exposed memory operations, in ns
-- column memory_pct: memory_ns as a percentage of span_ns
-- column idle_ns: time the GPU ran nothing: span_ns - compute_ns - comm_ns - memory_ns (gpu_gaps in traceql analyze says why)
-- column idle_pct: idle_ns as a percentage of span_ns
-- column comm_total_ns: all the time communication kernels ran, hidden behind computation or not, in ns
-- column comm_hidden_pct: the share of comm_total_ns during which a compute kernel ran too (HTA's communication/computation overlap), NULL without communication
-- label span_ns: span
-- label compute_ns: compute
-- label compute_pct: compute %
-- label comm_ns: comm
-- label comm_pct: comm %
-- label memory_ns: memory
-- label memory_pct: memory %
-- label idle_ns: idle
-- label idle_pct: idle %
-- label comm_total_ns: comm total
-- label comm_hidden_pct: comm hidden %
--
-- Stored at ingest (device_busy, schemas/derive/device_busy.sql): computation wins where kernels
-- overlap (a communication kernel running beside a compute kernel is hidden), kernels win over
-- copies. A CUDA graph traced as whole executions (graph_exec: nsys --cuda-graph-trace=graph)
-- computes from its start to its end; one traced node by node is its kernels.
WITH busy AS (
    SELECT *
    FROM device_busy
    WHERE ($trace_id IS NULL OR trace_id = $trace_id)
      AND /* where */ TRUE
),
rows AS (
    SELECT
        CASE WHEN $per_trace THEN b.trace_id END AS trace_id, b.device_id,
        string_agg(DISTINCT d.name, ', ' ORDER BY d.name) AS device,
        CAST(sum(t.duration) AS BIGINT) AS span_ns, CAST(sum(b.busy_ns) AS BIGINT) AS busy_ns,
        CAST(sum(b.compute_ns) AS BIGINT) AS compute_ns, CAST(sum(b.comm_exposed_ns) AS BIGINT) AS comm_ns,
        CAST(sum(b.memory_exposed_ns) AS BIGINT) AS memory_ns, CAST(sum(b.comm_ns) AS BIGINT) AS comm_total_ns
    FROM busy b
    JOIN trace t ON t.trace_id = b.trace_id
    LEFT JOIN device d ON d.trace_id = b.trace_id AND d.device_id IS NOT DISTINCT FROM b.device_id
    GROUP BY ALL
)
SELECT
    trace_id, device_id, device, span_ns,
    compute_ns, 100.0 * compute_ns / nullif(span_ns, 0) AS compute_pct,
    comm_ns, 100.0 * comm_ns / nullif(span_ns, 0) AS comm_pct,
    memory_ns, 100.0 * memory_ns / nullif(span_ns, 0) AS memory_pct,
    span_ns - busy_ns AS idle_ns, 100.0 * (span_ns - busy_ns) / nullif(span_ns, 0) AS idle_pct,
    comm_total_ns, 100.0 * (comm_total_ns - comm_ns) / nullif(comm_total_ns, 0) AS comm_hidden_pct
FROM rows
ORDER BY trace_id NULLS FIRST, device_id NULLS LAST;
