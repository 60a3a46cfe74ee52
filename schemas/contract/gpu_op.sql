-- gpu_op: every GPU activity (kernel, memcpy, memset) in one view, for timelines and busy-time questions.
CREATE VIEW gpu_op AS
SELECT
    trace_id,                              -- trace this row belongs to (trace.trace_id)
    'kernel' AS op_kind,                   -- 'kernel', 'memcpy' or 'memset'
    kernel_id AS op_id,                    -- kernel_id, memcpy_id or memset_id: unique within the trace
    device_id,                             -- GPU that executed the operation
    stream_id,                             -- CUDA stream id
    pid,                                   -- process that issued the operation
    correlation_id,                        -- id of the launching API call within the process
    ts,                                    -- GPU start in ns (trace clock)
    dur,                                   -- duration in ns
    name,                                  -- kernel name, or '[CUDA memcpy <kind>]' / '[CUDA memset]' ('[HIP memcpy <kind>]' / '[HIP memset]' on traces whose trace.gpu_api is 'HIP')
    CAST(NULL AS BIGINT) AS bytes          -- bytes moved by a memcpy or memset, NULL for kernels
FROM kernel
UNION ALL
SELECT c.trace_id, 'memcpy', c.memcpy_id, c.device_id, c.stream_id, c.pid, c.correlation_id, c.ts, c.dur,
       '[' || coalesce(t.gpu_api, 'CUDA') || ' memcpy ' || coalesce(c.copy_kind, 'Unknown') || ']', c.bytes
FROM memcpy c
LEFT JOIN trace t ON t.trace_id = c.trace_id
UNION ALL
SELECT s.trace_id, 'memset', s.memset_id, s.device_id, s.stream_id, s.pid, s.correlation_id, s.ts, s.dur,
       '[' || coalesce(t.gpu_api, 'CUDA') || ' memset]', s.bytes
FROM memset s
LEFT JOIN trace t ON t.trace_id = s.trace_id;
