-- op: PyTorch ops with their forward and backward GPU time, kernels per call, FLOPs, achieved TFLOP/s and roofline efficiency; backward kernels count for the forward op their autograd node was paired with.
-- input: kernel_op
-- param trace_id: only this trace (NULL: every trace in the workspace)
-- param per_trace: true to give each trace its own rows, percentages taken within the trace
-- param with_shapes: true to split each op by the input sizes of its calls
-- param level: 'top' to report the outermost op of each call stack (aten::linear), 'leaf' the op that launched the kernels (aten::addmm)
-- param peak_tflops: peak TFLOP/s to use for every kernel instead of device_peak (NULL: device_peak)
-- param peak_gbps: peak memory bandwidth in GB/s instead of device_peak.memory_bandwidth (NULL: device_peak)
-- param filtered: true when a --where filter selects the kernels; it leaves the '[no op]' row out
-- column trace_id if per_trace: trace of the row (trace.trace_id)
-- column op: op name (torch_op.name; 'module.op' for a PyProf marker without an emit_nvtx op); backward kernels without a forward partner under their backward node's name; '[no op]' for kernels outside every PyTorch op of a trace that has PyTorch ops (a trace without any has no rows)
-- column sizes if with_shapes: input sizes of the op's calls (torch_op.sizes, else those of its PyProf marker)
-- column calls: op calls (forward op instances) that launched kernels, forward or backward
-- column fwd_ns: summed duration of the forward kernels in ns (NULL for '[no op]': no direction is known)
-- column bwd_ns: summed duration of the backward kernels in ns (NULL for '[no op]')
-- column total_ns: summed duration of the row's kernels in ns, fwd_ns + bwd_ns (summed, not wall time)
-- column pct: total_ns as a percentage of the summed duration of all kernels in the report (after --where; within the trace with per_trace)
-- column range_pct if range: with --range: the row's time as a percentage of the GPU time of the matching ranges (the summed durations of the GPU operations they hold, each once: kernels, copies, memsets and whole-graph executions), not of the report's rows
-- column kernels_per_call: kernels (forward and backward) per call
-- column flops: algorithmic FLOPs of the calls that have a formula (kernel_op.flops); NULL when none has
-- column bytes: algorithmic DRAM bytes of the calls whose bytes are known
-- column tflops: achieved TFLOP/s: flops over the summed duration of the kernels of the costed calls
-- column ideal_ns: roofline time of the costed calls: per call max(flops / peak FLOP/s, bytes / peak bandwidth), peaks by the kernel's dtype and tensor-core use (device_peak, or --peak-tflops/--peak-gbps); NULL when a peak, the FLOPs or the bytes are unknown
-- column efficiency_pct: ideal_ns as a percentage of the summed duration of the kernels of those calls
-- label pct: Time(%) of all kernels
-- label efficiency_pct: Roofline eff(%)
-- label range_pct: Range(%) of its GPU time
WITH input AS (
    SELECT *
    FROM kernel_op
    WHERE ($trace_id IS NULL OR trace_id = $trace_id)
      AND /* where */ TRUE
),
keyed AS (
    SELECT i.*, k.dur, k.device_id,
           CASE WHEN i.fwd_range_id IS NOT NULL THEN
                    CASE WHEN $level = 'leaf' THEN i.fwd_range_id ELSE coalesce(f.top_range_id, i.fwd_range_id) END
                WHEN i.direction = 'backward' AND i.node_range_id IS NOT NULL THEN i.node_range_id
                WHEN i.op_range_id IS NOT NULL THEN i.op_range_id
                ELSE i.marker_range_id END AS key_id
    FROM input i
    JOIN kernel k ON k.trace_id = i.trace_id AND k.kernel_id = i.kernel_id
    LEFT JOIN torch_op f ON f.trace_id = i.trace_id AND f.range_id = i.fwd_range_id
),
peaked AS (
    SELECT q.*, o.name AS key_name, o.kind AS key_kind, o.module AS key_module,
           coalesce(o.sizes, m.sizes) AS key_sizes,
           CASE WHEN $peak_tflops IS NOT NULL THEN $peak_tflops * 1e12
                WHEN q.tensor_core THEN CASE q.dtype WHEN 'fp16' THEN p.fp16_tc_flops WHEN 'bf16' THEN p.bf16_tc_flops
                    WHEN 'tf32' THEN p.tf32_tc_flops WHEN 'fp32' THEN p.tf32_tc_flops WHEN 'fp8' THEN p.fp8_tc_flops
                    WHEN 'int8' THEN p.int8_tc_ops END
                ELSE CASE q.dtype WHEN 'fp64' THEN p.fp64_flops WHEN 'fp32' THEN p.fp32_flops WHEN 'tf32' THEN p.fp32_flops
                    WHEN 'fp16' THEN p.fp16_flops WHEN 'bf16' THEN p.fp16_flops END END AS peak_flops,
           CASE WHEN $peak_gbps IS NOT NULL THEN $peak_gbps * 1e9 ELSE p.memory_bandwidth END AS peak_bw
    FROM keyed q
    LEFT JOIN torch_op o ON o.trace_id = q.trace_id AND o.range_id = q.key_id
    LEFT JOIN torch_op m ON m.trace_id = q.trace_id AND m.range_id = o.marker_range_id
    LEFT JOIN device_peak p ON p.trace_id = q.trace_id AND p.device_id = q.device_id
),
costed AS (
    SELECT *,
           CASE WHEN key_kind = 'pyprof' THEN key_module || '.' || key_name ELSE coalesce(key_name, '[unnamed]') END AS op,
           CASE WHEN flops IS NULL OR bytes IS NULL OR (flops > 0 AND peak_flops IS NULL)
                     OR (bytes > 0 AND peak_bw IS NULL) THEN NULL
                ELSE greatest(CASE WHEN flops > 0 THEN flops / peak_flops ELSE 0 END,
                              CASE WHEN bytes > 0 THEN bytes / peak_bw ELSE 0 END) * 1e9 END AS ideal
    FROM peaked
    WHERE key_id IS NOT NULL
),
per_op AS (
    SELECT
        CASE WHEN $per_trace THEN trace_id END AS trace_id,
        op,
        CASE WHEN $with_shapes THEN key_sizes END AS sizes,
        count(DISTINCT (trace_id, key_id)) AS calls,
        coalesce(sum(dur) FILTER (WHERE direction = 'forward'), 0) AS fwd_ns,
        coalesce(sum(dur) FILTER (WHERE direction = 'backward'), 0) AS bwd_ns,
        sum(dur) AS total_ns,
        count(*) AS kernels,
        sum(flops) AS flops,
        sum(bytes) AS bytes,
        sum(dur) FILTER (WHERE flops IS NOT NULL) AS flops_ns,
        sum(ideal) AS ideal_ns,
        sum(dur) FILTER (WHERE ideal IS NOT NULL) AS ideal_measured_ns
    FROM costed
    GROUP BY 1, 2, 3
),
outside AS (
    SELECT
        CASE WHEN $per_trace THEN k.trace_id END AS trace_id,
        '[no op]' AS op, NULL AS sizes, NULL AS calls, NULL AS fwd_ns, NULL AS bwd_ns, sum(k.dur) AS total_ns,
        count(*) AS kernels,
        NULL AS flops, NULL AS bytes, NULL AS flops_ns, NULL AS ideal_ns, NULL AS ideal_measured_ns
    FROM kernel k
    WHERE ($trace_id IS NULL OR k.trace_id = $trace_id) AND NOT coalesce($filtered, false)
      AND k.trace_id IN (SELECT DISTINCT trace_id FROM torch_op)
      AND NOT EXISTS (SELECT 1 FROM kernel_op o WHERE o.trace_id = k.trace_id AND o.kernel_id = k.kernel_id
                        AND coalesce(o.fwd_range_id, o.node_range_id, o.op_range_id, o.marker_range_id) IS NOT NULL)
    GROUP BY 1
),
rows AS (SELECT * FROM per_op UNION ALL SELECT * FROM outside)
SELECT
    trace_id, op, sizes,
    TRY_CAST(calls AS BIGINT) AS calls,
    TRY_CAST(fwd_ns AS BIGINT) AS fwd_ns,
    TRY_CAST(bwd_ns AS BIGINT) AS bwd_ns,
    TRY_CAST(total_ns AS BIGINT) AS total_ns,
    100.0 * total_ns / nullif(sum(total_ns) OVER (PARTITION BY trace_id), 0) AS pct,
    round(kernels / calls, 2) AS kernels_per_call,
    TRY_CAST(flops AS BIGINT) AS flops,
    TRY_CAST(bytes AS BIGINT) AS bytes,
    round(flops / nullif(flops_ns, 0) / 1e3, 3) AS tflops,
    round(ideal_ns, 1) AS ideal_ns,
    round(100.0 * ideal_ns / nullif(ideal_measured_ns, 0), 2) AS efficiency_pct
FROM rows
ORDER BY trace_id NULLS FIRST, total_ns DESC, op, sizes;
