-- thread: one row per OS thread seen in the trace (named, or issuing API calls or NVTX events).
CREATE TABLE thread (
    trace_id          INTEGER NOT NULL, -- trace this row belongs to (trace.trace_id)
    pid               BIGINT NOT NULL,  -- operating-system process id
    tid               BIGINT NOT NULL,  -- operating-system thread id
    thread_name       VARCHAR,          -- thread name (OS or nvtxNameOsThread), NULL when unnamed
    process_name      VARCHAR           -- process name or command, NULL when unknown
);
