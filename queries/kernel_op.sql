-- kernel_op: one row per kernel with the PyTorch op that launched it, PyProf's per-kernel table: index, seq, thread, layer, direction, op, shapes, duration, tensor cores, launch geometry, FLOPs and bytes.
-- input: kernel
-- shown: idx, dir, sub, mod, op, kernel, params, sil
-- param trace_id: only this trace (NULL: every trace in the workspace)
-- param per_trace: true to number the kernels within each trace (a trace_id column first)
-- column trace_id if per_trace: trace of the row (trace.trace_id)
-- column idx: 1-based position of the kernel in GPU start order (within the trace with per_trace)
-- column seq: autograd seq of the kernel's op (forward) or backward node (kernel_op.seq)
-- column altseq: other seq numbers of the enclosing ops, joined by ',' (kernel_op.altseq)
-- column tid: thread of the launching call (launch.tid)
-- column layer: 'layer:' NVTX names around the launch (for backward kernels: around the forward op), joined by ':'
-- column trace: the code behind the kernel, PyProf's 'trace': the user's frames of its call stack (op_stack, call_stack.is_user: library frames left out as PyProf does), outermost first, joined by ' > '; a backward kernel has its forward op's (PyProf leaves it empty); NULL when no stack is known or none of its frames is the user's
-- column dir: PyProf's direction: 'fprop' (kernel_op.direction 'forward') or 'bprop' ('backward'); NULL outside every PyTorch op
-- column sub: index of the kernel within its op call (kernel_op.call_index)
-- column mod: PyProf's module: the module of the call PyProf names (kernel_op.call_range_id: the outermost PyProf marker), e.g. 'torch.nn.functional', 'Tensor', 'torch', or a wrapped class ('Foo'); NULL without PyProf markers
-- column op: PyProf's op: the op of the outermost PyProf marker around the launch (backward kernels: around their forward op), the call the user wrote ('linear', '__mul__', 'forward' of a wrapped module), and as PyProf 'bias' for a kernel of a linear call that its costed call says is no matrix product (the bias add); without markers: forward kernels the op that launched them, backward kernels the forward op their node was paired with, else the op that launched them
-- column aten_op: the innermost PyTorch op around the launch, the op that launched the kernel (e.g. 'mm' inside 'linear', 'aten::addmm'); NULL when the kernel ran directly in a backward node or outside every op
-- column node: backward kernels: the autograd node they ran in (e.g. 'AddmmBackward0')
-- column kernel: kernel name without template arguments and parameters (kernel.short_name)
-- column params: the kernel's parameters in PyProf's notation, e.g. 'M=200,N=(35,20),K=200,fp32' (kernel_op.params)
-- column sil: kernel duration in ns (PyProf's 'silicon time')
-- column range_pct if range: with --range: the row's time as a percentage of the GPU time of the matching ranges (the summed durations of the GPU operations they hold, each once: kernels, copies, memsets and whole-graph executions), not of the report's rows
-- column tc: '1' the kernel runs on tensor cores (its name matches a tensor-core pattern), '0' a matrix product, convolution or attention kernel that does not, '-' otherwise
-- column device: GPU (kernel.device_id)
-- column stream: CUDA stream (kernel.stream_id)
-- column grid: grid size 'x,y,z'
-- column block: block size 'x,y,z'
-- column flops: FLOPs of the costed call on its longest kernel, 0 on its others, NULL without a formula (kernel_op.flops)
-- column bytes: DRAM bytes, likewise (kernel_op.bytes)
-- column stack_id: the kernel's call stack (op_stack.stack_id; its frames: call_stack), whichever source it comes from (PyProf trace marker, PyTorch profiler Python stack, CUDA backtrace)
-- label sil: Sil
-- label range_pct: Range(%) of its GPU time
WITH input AS (
    SELECT *
    FROM kernel
    WHERE ($trace_id IS NULL OR trace_id = $trace_id)
      AND /* where */ TRUE
),
stacks AS (
    SELECT trace_id, stack_id, string_agg(frame, ' > ' ORDER BY level) FILTER (WHERE is_user) AS trace
    FROM call_stack
    WHERE $trace_id IS NULL OR trace_id = $trace_id
    GROUP BY trace_id, stack_id
)
SELECT
    CASE WHEN $per_trace THEN k.trace_id END AS trace_id,
    row_number() OVER (PARTITION BY CASE WHEN $per_trace THEN k.trace_id END ORDER BY k.trace_id, k.ts, k.kernel_id) AS idx,
    o.seq, o.altseq, l.tid, o.layer, sk.trace, CASE o.direction WHEN 'forward' THEN 'fprop' WHEN 'backward' THEN 'bprop' END AS dir, o.call_index AS sub,
    pc.module AS mod,
    CASE WHEN /* include: pyprof_bias(call = pc; family = o.op_family) */ THEN 'bias'
         WHEN pc.range_id IS NOT NULL THEN pc.name
         WHEN o.direction = 'backward' THEN coalesce(f.name, c.name)
         ELSE coalesce(c.name, m.name) END AS op,
    CASE WHEN c.kind = 'op' THEN c.name END AS aten_op,
    n.name AS node,
    k.short_name AS kernel, o.params, k.dur AS sil,
    CASE WHEN o.tensor_core THEN '1' WHEN o.op_family IN ('matmul', 'conv', 'attention') THEN '0' ELSE '-' END AS tc,
    k.device_id AS device, k.stream_id AS stream,
    concat_ws(',', k.grid_x, k.grid_y, k.grid_z) AS grid,
    concat_ws(',', k.block_x, k.block_y, k.block_z) AS block,
    o.flops, o.bytes, st.stack_id
FROM input k
LEFT JOIN kernel_op o ON o.trace_id = k.trace_id AND o.kernel_id = k.kernel_id
LEFT JOIN launch l ON l.trace_id = k.trace_id AND l.op_id = k.kernel_id
LEFT JOIN torch_op c ON c.trace_id = o.trace_id AND c.range_id = o.op_range_id
-- the forward op of a backward kernel: the id is NULL for other kernels (a condition on o in the ON clause
-- made DuckDB plan a blockwise nested loop, kernels x ops)
LEFT JOIN torch_op f ON f.trace_id = o.trace_id AND f.range_id = CASE WHEN o.direction = 'backward' THEN o.fwd_range_id END
LEFT JOIN torch_op n ON n.trace_id = o.trace_id AND n.range_id = o.node_range_id
LEFT JOIN torch_op m ON m.trace_id = o.trace_id AND m.range_id = o.marker_range_id
LEFT JOIN torch_op pc ON pc.trace_id = o.trace_id AND pc.range_id = o.call_range_id
LEFT JOIN op_stack st ON st.trace_id = k.trace_id AND st.op_id = k.kernel_id
LEFT JOIN stacks sk ON sk.trace_id = st.trace_id AND sk.stack_id = st.stack_id
ORDER BY k.trace_id, k.ts, k.kernel_id;
