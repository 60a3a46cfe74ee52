-- api_trace: one row per CUDA runtime or driver API call in time order, like nvprof --print-api-trace and nsys nvprof's API trace.
-- input: api_call
-- param trace_id: only this trace (NULL: every trace in the workspace)
-- param per_trace: true to give each trace its rows apart (a trace_id column first)
-- column trace_id if per_trace: trace of the row (trace.trace_id)
-- column start_ns: call start in ns after the trace's first recorded event (trace.start_ts; add it back for the trace clock)
-- column dur_ns: call duration in ns
-- column name: API function name without the _vNNNN version suffix (api_call.name)
-- column api_kind: 'runtime' or 'driver'
-- column result: CUDA result code the call returned (0 = success), when recorded
-- column correlation_id: links the call to the GPU work it launched, unique within one process
-- column pid: process that made the call
-- column tid: thread that made the call
-- column thread_name: that thread's name, when known (thread.thread_name)
-- column api_id: the call (api_call.api_id)
-- label correlation_id: CorrId
WITH input AS (
    SELECT *
    FROM api_call
    WHERE ($trace_id IS NULL OR trace_id = $trace_id)
      AND /* where */ TRUE
)
SELECT
    CASE WHEN $per_trace THEN a.trace_id END AS trace_id,
    a.ts - t.start_ts AS start_ns,
    a.dur AS dur_ns,
    a.name,
    a.api_kind,
    a.return_value AS result,
    a.correlation_id,
    a.pid,
    a.tid,
    h.thread_name,
    a.api_id
FROM input a
JOIN trace t ON t.trace_id = a.trace_id
LEFT JOIN thread h ON h.trace_id = a.trace_id AND h.pid = a.pid AND h.tid = a.tid
ORDER BY a.trace_id, a.ts, a.api_id;
