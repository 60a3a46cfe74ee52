-- nvtx_range: one row per NVTX range, push/pop (thread-local, nested) or start/end (may overlap and end on another thread); in Kineto traces one per cpu_op, user_annotation and gpu_user_annotation event.
CREATE TABLE nvtx_range (
    trace_id          INTEGER NOT NULL, -- trace this row belongs to (trace.trace_id)
    range_id          BIGINT NOT NULL,  -- id of the range within its trace, in start order
    pid               BIGINT,           -- process that opened the range
    tid               BIGINT,           -- thread that pushed or started the range
    end_tid           BIGINT,           -- thread that ended a start/end range when it differs from tid, else NULL
    ts                BIGINT NOT NULL,  -- range start in ns (trace clock)
    dur               BIGINT,           -- range duration in ns; NULL when the range was never closed
    name              VARCHAR,          -- range message text (registered strings resolved)
    group_name        VARCHAR,          -- name without its per-instance parts, to group by: PyTorch's ', seq = N, op_id = N, sizes = [..]' suffixes stripped, PyProf markers shortened to 'mod.op' or their call site (rule in schemas/derive/group_name.sql), NULL when name is NULL
    domain            VARCHAR NOT NULL, -- NVTX domain name; '' for the default domain; Kineto traces: the event category, 'cpu_op', 'user_annotation' or 'gpu_user_annotation'
    style             ENUM('push/pop', 'start/end') NOT NULL, -- 'push/pop' or 'start/end'
    depth             INTEGER NOT NULL, -- nesting level on its thread's push/pop stack, 0 = outermost; start/end ranges are not stacked and have 0
    parent_range_id   BIGINT,           -- range_id of the enclosing push/pop range on the same thread; NULL at depth 0
    path              VARCHAR NOT NULL, -- grouping names (group_name) from the outermost range down to this one, joined by ' > '; below the depth cap of 64 levels the levels between are shown as ' > … > '
    color             BIGINT,           -- ARGB color given by the application, when any
    category          BIGINT,           -- NVTX category id given by the application, when any
    args              VARCHAR           -- Kineto traces: the event's arguments as JSON text, e.g. '{"Sequence number":12,"Input Dims":[[32,400],[400,120]],"Input type":["float","float"],...}' (read with args->>'Input type'); NULL for NVTX ranges
);
