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
    name,                                  -- kernel name, or '[CUDA memcpy <kind>]' / '[CUDA memset]'
    CAST(NULL AS BIGINT) AS bytes          -- bytes moved by a memcpy or memset, NULL for kernels
FROM kernel
UNION ALL
SELECT trace_id, 'memcpy', memcpy_id, device_id, stream_id, pid, correlation_id, ts, dur,
       '[CUDA memcpy ' || coalesce(copy_kind, 'Unknown') || ']', bytes
FROM memcpy
UNION ALL
SELECT trace_id, 'memset', memset_id, device_id, stream_id, pid, correlation_id, ts, dur,
       '[CUDA memset]', bytes
FROM memset;
