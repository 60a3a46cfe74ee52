-- analyze/tensor_cores: matrix products and convolutions (PyTorch op calls with a formula: kernel_op.op_family matmul, conv or attention) none of whose kernels ran on tensor cores, with the reason: a dtype tensor cores do not take, dimensions that are not multiples of 8, or kernels that did not use them although they could.
-- param trace_id: only this trace (NULL: every trace in the workspace)
-- param min_kernel_ns: an op call counts when its kernels ran at least this long in all, in ns
-- default min_kernel_ns: 0
-- advice: dtype: run the model in mixed precision (torch.autocast with float16 or bfloat16, NVIDIA AMP) or allow TF32 on Ampere and later (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32); shape: pad the dimensions to multiples of 8 (16 for 8-bit types); kernel: the library chose a kernel without tensor cores for these shapes: try other batch sizes, channels-last memory format for convolutions, or cuDNN benchmark mode.
-- finding: op call, op calls
-- group: reason
-- show: kernels, kernel_ns, dtype, reason, op, range_path
-- column trace_id: trace (trace.trace_id)
-- column op: the op call whose shapes cost the kernels (torch_op.name of kernel_op.unit_range_id), e.g. 'linear', 'aten::addmm', 'conv2d'
-- column op_family: formula family (kernel_op.op_family): 'matmul', 'conv' or 'attention'
-- column direction: 'forward' or 'backward' (kernel_op.direction)
-- column params: the parameters of the call's first kernel, PyProf's notation (kernel_op.params)
-- column dtype: element type of the call (kernel_op.dtype)
-- column reason: 'dtype' (fp32 or fp64: no tensor-core type; AMP or TF32 would make it one), 'shape' (a tensor-core type, but dimensions are not multiples of 8, 16 for 8-bit types), 'kernel' (eligible: kernel_op.tc_eligible, yet no kernel used tensor cores)
-- column kernels: kernels of the call
-- column kernel_ns: their summed GPU time in ns
-- column recoverable_ns: kernel_ns: an upper bound, the GPU time of the kernels that could move to tensor cores (they would run faster, not vanish)
-- column range_path: the NVTX path of the op call (nvtx_range.path)
-- column pid: process of the call
-- column tid: thread of the call
-- column thread: that thread's name (thread.thread_name)
-- column note: why the rule abstains (on the one row of a trace without PyTorch op calls to cost), else NULL
-- label kernel_ns: kernel time
-- label recoverable_ns: at most
--
-- Tensor-core use is a match of kernel names (schemas/torch/tensor_core_patterns.csv), eligibility
-- the dtype and dimensions of the call (kernel_op.tc_eligible); both need PyTorch op ranges
-- (emit_nvtx, nsys --pytorch, PyProf markers, or a PyTorch profiler trace).
WITH k AS (
    SELECT ko.trace_id, ko.unit_range_id, ko.kernel_id, ko.op_family, ko.direction, ko.params, ko.dtype,
           ko.tensor_core, ko.tc_eligible, kk.dur
    FROM kernel_op ko
    JOIN kernel kk ON kk.trace_id = ko.trace_id AND kk.kernel_id = ko.kernel_id
    WHERE ($trace_id IS NULL OR ko.trace_id = $trace_id)
      AND ko.op_family IN ('matmul', 'conv', 'attention') AND ko.unit_range_id IS NOT NULL
),
calls AS (
    SELECT trace_id, unit_range_id, any_value(op_family) AS op_family, any_value(direction) AS direction,
           arg_min(params, kernel_id) AS params, any_value(dtype) AS dtype, bool_or(tensor_core) AS uses_tc,
           bool_or(tc_eligible) AS eligible, count(*) AS kernels, CAST(sum(dur) AS BIGINT) AS kernel_ns
    FROM k
    GROUP BY trace_id, unit_range_id
    HAVING NOT bool_or(tensor_core) AND sum(dur) >= $min_kernel_ns
)
SELECT
    c.trace_id, u.name AS op, c.op_family, c.direction, c.params, c.dtype,
    CASE WHEN c.dtype IN ('fp32', 'fp64') THEN 'dtype' WHEN c.eligible THEN 'kernel' ELSE 'shape' END AS reason,
    c.kernels, c.kernel_ns, c.kernel_ns AS recoverable_ns, r.path AS range_path, u.pid, u.tid,
    th.thread_name AS thread, CAST(NULL AS VARCHAR) AS note
FROM calls c
LEFT JOIN torch_op u ON u.trace_id = c.trace_id AND u.range_id = c.unit_range_id
LEFT JOIN nvtx_range r ON r.trace_id = c.trace_id AND r.range_id = c.unit_range_id
LEFT JOIN thread th ON th.trace_id = u.trace_id AND th.pid = u.pid AND th.tid = u.tid
UNION ALL
SELECT t.trace_id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       'no matrix product or convolution with known shapes: tensor-core use is judged per PyTorch op call, '
       || 'and this trace has none (record emit_nvtx or nsys --pytorch=autograd-shapes-nvtx ranges, or a '
       || 'PyTorch profiler trace with record_shapes)'
FROM trace t
WHERE ($trace_id IS NULL OR t.trace_id = $trace_id)
  AND t.trace_id NOT IN (SELECT trace_id FROM k)
ORDER BY recoverable_ns DESC NULLS LAST, trace_id, range_path;
