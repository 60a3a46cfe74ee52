-- api_call: one row per CUDA runtime or driver API call on a CPU thread (backtrace duplicate rows removed).
CREATE TABLE api_call (
    trace_id          INTEGER NOT NULL, -- trace this row belongs to (trace.trace_id)
    api_id            BIGINT NOT NULL,  -- id of the call within its trace, in start order
    pid               BIGINT,           -- process that made the call
    tid               BIGINT,           -- thread that made the call
    ts                BIGINT NOT NULL,  -- call start in ns (trace clock)
    dur               BIGINT NOT NULL,  -- call duration in ns
    name              VARCHAR,          -- API function name without the _vNNNN version suffix, e.g. 'cudaLaunchKernel'
    raw_name          VARCHAR,          -- API function name as the source stores it, e.g. 'cudaLaunchKernel_v7000'
    api_kind          VARCHAR NOT NULL, -- 'runtime' or 'driver' (or 'other class N' for rarer CUPTI event classes); AMD traces: 'hip' or 'hsa' (rocprof v1, rpd, whose tracer's own records are 'rpd'), the rocpd category lower-cased for rocprofv3 ('hip_runtime_api_ext', 'hsa_core_api', ...)
    correlation_id    BIGINT,           -- links the call to the GPU work it launched, unique within one process
    return_value      BIGINT,           -- CUDA result code the call returned (0 = success)
    stack_id          BIGINT            -- the call stack the trace recorded for the call (call_stack.stack_id): its native stack from an nsys CUDA backtrace (--cudabacktrace), its Python stack in a PyTorch profiler trace (with_stack=True); NULL when none
);
