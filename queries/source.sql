-- source: GPU time per code location: the innermost frame of the user's code in the call stack behind each GPU operation (PyProf trace markers, PyTorch profiler Python stacks, nsys CUDA backtraces), or the whole stack; '[no stack]' for operations without one.
-- input: gpu_op
-- param trace_id: only this trace (NULL: every trace in the workspace)
-- param per_trace: true to give each trace its own rows, percentages taken within the trace
-- param group_by: 'frame' to group by the innermost frame of the user's code ('profile2.py:110', 'main'), 'stack' by the user's frames of the whole stack, outermost first, joined by ' > '
-- default group_by: frame
-- column trace_id if per_trace: trace of the row (trace.trace_id)
-- column location: the innermost user frame (call_stack.is_user; the innermost frame when the stack has none of the user's), or with group_by 'stack' the user's frames joined by ' > '; '[no stack]' for operations without a known stack
-- column source: where the stacks come from (call_stack.source): 'pyprof', 'python' or 'cuda_backtrace'; NULL for '[no stack]'
-- column ops: GPU operations (kernels, copies, memsets) whose stack it is (op_stack)
-- column kernels: the kernels among them
-- column total_ns: their summed GPU time in ns (operations on different streams overlap: not wall time)
-- column pct: total_ns as a percentage of the summed GPU time of all operations in the report (after --where; within the trace with per_trace), not of wall time
-- column range_pct if range: with --range: the row's time as a percentage of the GPU time of the matching ranges (the summed durations of the GPU operations they hold, each once: kernels, copies, memsets and whole-graph executions), not of the report's rows
-- column kernel_ns: the kernels' part of total_ns
-- column memcpy_ns: the copies' part
-- column memset_ns: the memsets' part
-- column stacks: distinct call stacks in the row
-- label pct: Time(%) of all GPU operations
-- label range_pct: Range(%) of its GPU time
--
-- A backward kernel, launched by PyTorch's autograd thread, takes its forward op's stack
-- (op_stack.via 'forward op', PyProf's way): its time counts at the code line of the layer.
WITH input AS (
    SELECT *
    FROM gpu_op
    WHERE ($trace_id IS NULL OR trace_id = $trace_id)
      AND /* where */ TRUE
),
stacks AS (
    SELECT trace_id, stack_id, any_value(source) AS source,
           coalesce(arg_max(frame, level) FILTER (WHERE is_user), arg_max(frame, level)) AS innermost,
           CASE WHEN count(*) FILTER (WHERE is_user) > 0
                THEN string_agg(frame, ' > ' ORDER BY level) FILTER (WHERE is_user)
                ELSE string_agg(frame, ' > ' ORDER BY level) END AS path
    FROM call_stack
    WHERE $trace_id IS NULL OR trace_id = $trace_id
    GROUP BY trace_id, stack_id
),
located AS (
    SELECT i.trace_id, i.op_kind, i.dur, s.stack_id, t.source,
           CASE WHEN t.stack_id IS NULL THEN '[no stack]'
                WHEN $group_by = 'stack' THEN t.path ELSE t.innermost END AS location
    FROM input i
    LEFT JOIN op_stack s ON s.trace_id = i.trace_id AND s.op_id = i.op_id
    LEFT JOIN stacks t ON t.trace_id = s.trace_id AND t.stack_id = s.stack_id
),
grouped AS (
    SELECT
        CASE WHEN $per_trace THEN trace_id END AS trace_id,
        location, source,
        count(*) AS ops,
        count(*) FILTER (WHERE op_kind = 'kernel') AS kernels,
        sum(dur) AS total_ns,
        coalesce(sum(dur) FILTER (WHERE op_kind = 'kernel'), 0) AS kernel_ns,
        coalesce(sum(dur) FILTER (WHERE op_kind = 'memcpy'), 0) AS memcpy_ns,
        coalesce(sum(dur) FILTER (WHERE op_kind = 'memset'), 0) AS memset_ns,
        count(DISTINCT (trace_id, stack_id)) FILTER (WHERE stack_id IS NOT NULL) AS stacks
    FROM located
    GROUP BY 1, 2, 3
)
SELECT trace_id, location, source, ops, kernels,
       TRY_CAST(total_ns AS BIGINT) AS total_ns,
       100.0 * total_ns / nullif(sum(total_ns) OVER (PARTITION BY trace_id), 0) AS pct,
       TRY_CAST(kernel_ns AS BIGINT) AS kernel_ns, TRY_CAST(memcpy_ns AS BIGINT) AS memcpy_ns,
       TRY_CAST(memset_ns AS BIGINT) AS memset_ns, stacks
FROM grouped
ORDER BY trace_id NULLS FIRST, location = '[no stack]', total_ns DESC, location, source;
