-- _internal/folded: kernel time per call stack and kernel, the rows of `traceql export --format folded` (flame graphs: flamegraph.pl, inferno, speedscope).
-- param trace_id: only this trace (NULL: every trace in the workspace)
-- column trace_id: trace of the row (trace.trace_id)
-- column frames: the user's frames of the kernels' call stack (op_stack, call_stack.is_user), outermost first; all of its frames when none is the user's; NULL for kernels without a known stack
-- column kernel: kernel name without template arguments and parameters (kernel.short_name, else kernel.name)
-- column kernels: kernel executions
-- column kernel_ns: their summed duration in ns (over all rows: the trace's kernel time)
WITH frames AS (
    SELECT trace_id, stack_id,
           CASE WHEN count(*) FILTER (WHERE is_user) > 0 THEN list(frame ORDER BY level) FILTER (WHERE is_user)
                ELSE list(frame ORDER BY level) END AS frames
    FROM call_stack
    WHERE $trace_id IS NULL OR trace_id = $trace_id
    GROUP BY trace_id, stack_id
)
SELECT k.trace_id, f.frames, coalesce(k.short_name, k.name) AS kernel, count(*) AS kernels,
       CAST(sum(k.dur) AS BIGINT) AS kernel_ns
FROM kernel k
LEFT JOIN op_stack s ON s.trace_id = k.trace_id AND s.op_id = k.kernel_id
LEFT JOIN frames f ON f.trace_id = s.trace_id AND f.stack_id = s.stack_id
WHERE $trace_id IS NULL OR k.trace_id = $trace_id
GROUP BY k.trace_id, f.frames, coalesce(k.short_name, k.name)
ORDER BY trace_id, kernel_ns DESC, frames NULLS LAST, kernel;
