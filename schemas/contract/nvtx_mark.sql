-- nvtx_mark: one row per NVTX mark (an instantaneous event).
CREATE TABLE nvtx_mark (
    trace_id          INTEGER NOT NULL, -- trace this row belongs to (trace.trace_id)
    mark_id           BIGINT NOT NULL,  -- id of the mark within its trace, in time order
    pid               BIGINT,           -- process that emitted the mark
    tid               BIGINT,           -- thread that emitted the mark
    ts                BIGINT NOT NULL,  -- time of the mark in ns (trace clock)
    name              VARCHAR,          -- mark message text
    domain            VARCHAR NOT NULL, -- NVTX domain name; '' for the default domain
    color             BIGINT,           -- ARGB color, when any
    category          BIGINT            -- NVTX category id, when any
);
