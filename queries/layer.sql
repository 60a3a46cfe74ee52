-- layer: GPU work per layer of the PyProf 'layer:NAME' NVTX annotation (nested layers joined by ':'), forward and backward, with FLOPs and achieved TFLOP/s; backward kernels count for the layer of their forward op.
-- input: kernel_op
-- param trace_id: only this trace (NULL: every trace in the workspace)
-- param per_trace: true to give each trace its own rows, percentages taken within the trace
-- column trace_id if per_trace: trace of the row (trace.trace_id)
-- column layer: layer path, outermost first (kernel_op.layer); '[no layer]' for PyTorch kernels outside every 'layer:' range
-- column kernels: kernels launched in the layer
-- column fwd_ns: summed duration of its forward kernels in ns
-- column bwd_ns: summed duration of its backward kernels in ns
-- column total_ns: fwd_ns + bwd_ns (summed, not wall time)
-- column pct: total_ns as a percentage of the summed duration of all kernels in the report (after --where; within the trace with per_trace)
-- column range_pct if range: with --range: the row's time as a percentage of the GPU time of the matching ranges (the summed durations of the GPU operations they hold, each once: kernels, copies, memsets and whole-graph executions), not of the report's rows
-- column flops: algorithmic FLOPs of its costed calls; NULL when none has a formula
-- column bytes: algorithmic DRAM bytes of its costed calls whose bytes are known
-- column tflops: achieved TFLOP/s: flops over the summed duration of the kernels of the costed calls
-- label pct: Time(%) of all kernels
-- label range_pct: Range(%) of its GPU time
WITH input AS (
    SELECT *
    FROM kernel_op
    WHERE ($trace_id IS NULL OR trace_id = $trace_id)
      AND /* where */ TRUE
),
grouped AS (
    SELECT
        CASE WHEN $per_trace THEN i.trace_id END AS trace_id,
        coalesce(i.layer, '[no layer]') AS layer,
        count(*) AS kernels,
        coalesce(sum(k.dur) FILTER (WHERE i.direction = 'forward'), 0) AS fwd_ns,
        coalesce(sum(k.dur) FILTER (WHERE i.direction = 'backward'), 0) AS bwd_ns,
        sum(i.flops) AS flops,
        sum(i.bytes) AS bytes,
        sum(k.dur) FILTER (WHERE i.flops IS NOT NULL) AS flops_ns
    FROM input i
    JOIN kernel k ON k.trace_id = i.trace_id AND k.kernel_id = i.kernel_id
    GROUP BY 1, 2
)
SELECT
    trace_id, layer, kernels,
    TRY_CAST(fwd_ns AS BIGINT) AS fwd_ns,
    TRY_CAST(bwd_ns AS BIGINT) AS bwd_ns,
    TRY_CAST(fwd_ns + bwd_ns AS BIGINT) AS total_ns,
    100.0 * (fwd_ns + bwd_ns) / nullif(sum(fwd_ns + bwd_ns) OVER (PARTITION BY trace_id), 0) AS pct,
    TRY_CAST(flops AS BIGINT) AS flops,
    TRY_CAST(bytes AS BIGINT) AS bytes,
    round(flops / nullif(flops_ns, 0) / 1e3, 3) AS tflops
FROM grouped
ORDER BY trace_id NULLS FIRST, layer = '[no layer]', total_ns DESC, layer;
