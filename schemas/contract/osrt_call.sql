-- osrt_call: one row per OS runtime library call that Nsight Systems traced (--trace osrt: pthread, file and socket I/O, sleeps, polls), to see what a CPU thread was waiting on.
CREATE TABLE osrt_call (
    trace_id          INTEGER NOT NULL, -- trace this row belongs to (trace.trace_id)
    osrt_id           BIGINT NOT NULL,  -- id of the call within its trace, in start order
    pid               BIGINT,           -- process that made the call
    tid               BIGINT,           -- thread that made the call
    ts                BIGINT NOT NULL,  -- call start in ns (trace clock)
    dur               BIGINT NOT NULL,  -- call duration in ns
    name              VARCHAR,          -- function name, e.g. 'pthread_cond_wait', 'read', 'poll', 'ioctl'
    return_value      BIGINT,           -- value the call returned
    nesting_level     INTEGER           -- nesting level of the call among the thread's OS runtime calls (0 = outermost), when recorded
);
