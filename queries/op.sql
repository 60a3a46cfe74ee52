-- op: PyTorch ops with their forward, backward, recompute and communication GPU time, kernels per call, FLOPs, achieved TFLOP/s and roofline efficiency; backward kernels count for the forward op their autograd node was paired with.
-- input: kernel_op
-- param trace_id: only this trace (NULL: every trace in the workspace)
-- param per_trace: true to give each trace its own rows, percentages taken within the trace
-- param with_shapes: true to split each op by the input sizes of its calls
-- param level: 'top' to report the outermost op of each call stack (aten::linear), 'leaf' the op that launched the kernels (aten::addmm)
-- param peak_tflops: peak TFLOP/s to use for every kernel instead of device_peak (NULL: device_peak)
-- param peak_gbps: peak memory bandwidth in GB/s instead of device_peak.memory_bandwidth (NULL: device_peak)
-- param filtered: true when a --where filter selects the kernels; it leaves the '[no op: ...]' rows out
-- column trace_id if per_trace: trace of the row (trace.trace_id)
-- column op: op name (torch_op.name; 'module.op' for a PyProf marker without an emit_nvtx op); backward kernels without a forward partner under their backward node's name; kernels outside every PyTorch op of a trace that has PyTorch ops (a trace without any has no rows) in one row per reason, first that applies: '[no op: communication]' (a communication kernel, launch.category), '[no op: graph replay]' (a node of a CUDA graph launch: kernel.graph_id, or launched by cudaGraphLaunch), '[no op: launch not captured]' (no launching API call in the trace: launched before the capture began, or the call was trimmed away), '[no op: outside ops]' (launched by a call outside every op)
-- column sizes if with_shapes: input sizes of the op's calls (torch_op.sizes, else those of its PyProf marker)
-- column calls: op calls (forward op instances, not recomputed ones) that launched kernels, forward or backward
-- column fwd_ns: summed duration of the forward compute kernels in ns, recompute and communication kernels not included (NULL for '[no op: ...]' rows: no direction is known)
-- column bwd_ns: summed duration of the backward compute kernels in ns, communication kernels not included (NULL for '[no op: ...]')
-- column recompute_ns: summed duration of the compute kernels of the op's recomputed calls in ns: forward work that activation checkpointing ran again inside the backward pass (kernel_op.recompute); NULL for '[no op: ...]'
-- column comm_ns: summed duration of the communication kernels (launch.category 'communication': NCCL and other collectives) the op's calls launched, in ns, forward and backward: DDP's all-reduces launched from AccumulateGrad hooks, FSDP's all-gathers from pre-forward hooks; all of it on '[no op: communication]'
-- column total_ns: summed duration of the row's kernels in ns, fwd_ns + bwd_ns + recompute_ns + comm_ns (summed, not wall time)
-- column pct: total_ns as a percentage of the summed duration of all kernels in the report (after --where; within the trace with per_trace)
-- column range_pct if range: with --range: the row's time as a percentage of the GPU time of the matching ranges (the summed durations of the GPU operations they hold, each once: kernels, copies, memsets and whole-graph executions), not of the report's rows
-- column kernels_per_call: kernels (forward, backward and communication) of the calls per call; the kernels of recomputed calls, and the backward kernels paired with them (reentrant checkpointing), not included
-- column flops: algorithmic FLOPs of the calls that have a formula (kernel_op.flops); NULL when none has
-- column bytes: algorithmic DRAM bytes of the calls whose bytes are known
-- column tflops: achieved TFLOP/s: flops over the summed duration of the kernels of the costed calls
-- column ideal_ns: roofline time of the costed calls: per call max(flops / peak FLOP/s, bytes / peak bandwidth), peaks by the kernel's dtype and tensor-core use (device_peak, or --peak-tflops/--peak-gbps); NULL when a peak, the FLOPs or the bytes are unknown
-- column efficiency_pct: ideal_ns as a percentage of the summed duration of the kernels of those calls
-- column collectives: the collectives of the row's communication kernels, distinct, joined by ', ': the record_param_comms op's 'Collective name' (torch_op.collective) around the launch, else the operation the kernel name says (AllReduce, SendRecv, ... as report --by collective reads it); NULL when none
-- column comm_bytes: summed message size in bytes of the row's collectives whose size the trace records (torch_op.comm_bytes, each collective call once); NULL when none does
-- label pct: Time(%) of all kernels
-- label efficiency_pct: Roofline eff(%)
-- label range_pct: Range(%) of its GPU time
-- label recompute_ns: recompute
-- label comm_ns: comm
-- label comm_bytes: comm bytes
-- label kernels_per_call: kernels per call
WITH input AS (
    SELECT *
    FROM kernel_op
    WHERE ($trace_id IS NULL OR trace_id = $trace_id)
      AND /* where */ TRUE
),
-- communication kernels with the collective call around their launch (the op call itself or
-- its parent: record_param_comms sits inside c10d::allreduce_) and what it records
comm AS (
    SELECT l.trace_id, l.op_id AS kernel_id,
           coalesce(c.collective, cp.collective,
                    nullif(regexp_extract(k.name,  -- the words of queries/collective.sql
                        '(AllReduce|ReduceScatter|AllGather|Broadcast|AllToAll|SendRecv|Reduce|Send|Recv|all_?reduce|reduce_?scatter|all_?gather|all_?to_?all)',
                        1), '')) AS collective,
           CASE WHEN c.collective IS NOT NULL THEN c.range_id WHEN cp.collective IS NOT NULL THEN cp.range_id END
               AS coll_range_id,
           CASE WHEN c.collective IS NOT NULL THEN c.comm_bytes WHEN cp.collective IS NOT NULL THEN cp.comm_bytes END
               AS coll_bytes
    FROM launch l
    JOIN kernel k ON k.trace_id = l.trace_id AND k.kernel_id = l.op_id
    LEFT JOIN kernel_op o ON o.trace_id = l.trace_id AND o.kernel_id = l.op_id
    LEFT JOIN torch_op c ON c.trace_id = o.trace_id AND c.range_id = o.op_range_id
    LEFT JOIN torch_op cp ON cp.trace_id = c.trace_id AND cp.range_id = c.parent_op_range_id
    WHERE ($trace_id IS NULL OR l.trace_id = $trace_id) AND l.category = 'communication' AND l.op_kind = 'kernel'
),
-- a collective call's message size is counted once, on its first communication kernel
comm_once AS (
    SELECT *, CASE WHEN coll_range_id IS NULL
                   OR row_number() OVER (PARTITION BY trace_id, coll_range_id ORDER BY kernel_id) = 1 THEN coll_bytes END
                  AS comm_bytes
    FROM comm
),
keyed AS (
    SELECT i.*, k.dur, k.device_id, c.kernel_id IS NOT NULL AS is_comm, c.collective, c.comm_bytes,
           CASE WHEN i.fwd_range_id IS NOT NULL THEN
                    CASE WHEN $level = 'leaf' THEN i.fwd_range_id ELSE coalesce(f.top_range_id, i.fwd_range_id) END
                WHEN i.direction = 'backward' AND i.node_range_id IS NOT NULL THEN i.node_range_id
                WHEN i.op_range_id IS NOT NULL THEN i.op_range_id
                ELSE i.marker_range_id END AS key_id
    FROM input i
    JOIN kernel k ON k.trace_id = i.trace_id AND k.kernel_id = i.kernel_id
    LEFT JOIN torch_op f ON f.trace_id = i.trace_id AND f.range_id = i.fwd_range_id
    LEFT JOIN comm_once c ON c.trace_id = i.trace_id AND c.kernel_id = i.kernel_id
),
peaked AS (
    SELECT q.*, o.name AS key_name, o.kind AS key_kind, o.module AS key_module,
           coalesce(o.recompute, false) AS key_recompute,
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
        count(DISTINCT (trace_id, key_id)) FILTER (WHERE NOT key_recompute) AS calls,
        coalesce(sum(dur) FILTER (WHERE direction = 'forward' AND NOT recompute AND NOT is_comm), 0) AS fwd_ns,
        coalesce(sum(dur) FILTER (WHERE direction = 'backward' AND NOT is_comm), 0) AS bwd_ns,
        coalesce(sum(dur) FILTER (WHERE recompute AND NOT is_comm), 0) AS recompute_ns,
        coalesce(sum(dur) FILTER (WHERE is_comm), 0) AS comm_ns,
        sum(dur) AS total_ns,
        count(*) FILTER (WHERE NOT key_recompute) AS kernels,
        sum(flops) AS flops,
        sum(bytes) AS bytes,
        sum(dur) FILTER (WHERE flops IS NOT NULL) AS flops_ns,
        sum(ideal) AS ideal_ns,
        sum(dur) FILTER (WHERE ideal IS NOT NULL) AS ideal_measured_ns,
        string_agg(DISTINCT collective, ', ' ORDER BY collective) FILTER (WHERE is_comm) AS collectives,
        sum(comm_bytes) FILTER (WHERE is_comm) AS comm_bytes
    FROM costed
    GROUP BY 1, 2, 3
),
-- kernels outside every op, each with its reason
outside_kernels AS (
    SELECT k.trace_id, k.dur, c.collective, c.comm_bytes,
           CASE WHEN c.kernel_id IS NOT NULL THEN '[no op: communication]'
                WHEN k.graph_id IS NOT NULL OR l.api_name LIKE 'cu%GraphLaunch%' THEN '[no op: graph replay]'
                WHEN l.api_id IS NULL THEN '[no op: launch not captured]'
                ELSE '[no op: outside ops]' END AS op
    FROM kernel k
    LEFT JOIN launch l ON l.trace_id = k.trace_id AND l.op_id = k.kernel_id
    LEFT JOIN comm_once c ON c.trace_id = k.trace_id AND c.kernel_id = k.kernel_id
    WHERE ($trace_id IS NULL OR k.trace_id = $trace_id) AND NOT coalesce($filtered, false)
      AND k.trace_id IN (SELECT DISTINCT trace_id FROM torch_op)
      AND NOT EXISTS (SELECT 1 FROM kernel_op o WHERE o.trace_id = k.trace_id AND o.kernel_id = k.kernel_id
                        AND coalesce(o.fwd_range_id, o.node_range_id, o.op_range_id, o.marker_range_id) IS NOT NULL)
),
outside AS (
    SELECT
        CASE WHEN $per_trace THEN trace_id END AS trace_id,
        op, NULL AS sizes, NULL AS calls, NULL AS fwd_ns, NULL AS bwd_ns, NULL AS recompute_ns,
        CASE WHEN op = '[no op: communication]' THEN sum(dur) END AS comm_ns, sum(dur) AS total_ns,
        count(*) AS kernels,
        NULL AS flops, NULL AS bytes, NULL AS flops_ns, NULL AS ideal_ns, NULL AS ideal_measured_ns,
        string_agg(DISTINCT collective, ', ' ORDER BY collective) AS collectives,
        sum(comm_bytes) AS comm_bytes
    FROM outside_kernels
    GROUP BY 1, 2
),
rows AS (SELECT * FROM per_op UNION ALL SELECT * FROM outside)
SELECT
    trace_id, op, sizes,
    TRY_CAST(calls AS BIGINT) AS calls,
    TRY_CAST(fwd_ns AS BIGINT) AS fwd_ns,
    TRY_CAST(bwd_ns AS BIGINT) AS bwd_ns,
    TRY_CAST(recompute_ns AS BIGINT) AS recompute_ns,
    TRY_CAST(comm_ns AS BIGINT) AS comm_ns,
    TRY_CAST(total_ns AS BIGINT) AS total_ns,
    100.0 * total_ns / nullif(sum(total_ns) OVER (PARTITION BY trace_id), 0) AS pct,
    round(kernels / nullif(calls, 0), 2) AS kernels_per_call,
    TRY_CAST(flops AS BIGINT) AS flops,
    TRY_CAST(bytes AS BIGINT) AS bytes,
    round(flops / nullif(flops_ns, 0) / 1e3, 3) AS tflops,
    round(ideal_ns, 1) AS ideal_ns,
    round(100.0 * ideal_ns / nullif(ideal_measured_ns, 0), 2) AS efficiency_pct,
    collectives,
    TRY_CAST(comm_bytes AS BIGINT) AS comm_bytes
FROM rows
ORDER BY trace_id NULLS FIRST, total_ns DESC, op, sizes;
