-- profiler_overhead: one row per interval in which the profiler itself kept a thread busy (Nsight Systems PROFILER_OVERHEAD: CUPTI buffer flushes, profiling initialization, library loads it intercepted): time the application could not use and cannot recover.
CREATE TABLE profiler_overhead (
    trace_id          INTEGER NOT NULL, -- trace this row belongs to (trace.trace_id)
    pid               BIGINT,           -- process the overhead was in
    tid               BIGINT,           -- thread it kept busy
    ts                BIGINT NOT NULL,  -- start in ns (trace clock)
    dur               BIGINT NOT NULL,  -- duration in ns
    name              VARCHAR           -- what the profiler did, e.g. 'CUPTI Buffer flush', 'CUDA profiling data flush on process exit'
);
