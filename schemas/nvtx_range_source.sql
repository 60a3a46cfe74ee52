-- nvtx_range_source: the NVTX ranges of a trace as read from its source, waiting for the family
-- 'nesting' (schemas/derive/graph.csv) to nest them into nvtx_range (schemas/derive/nvtx_range.sql)
-- when a query first reads nvtx_range; a trace's rows are deleted once nvtx_range holds them. Not a
-- contract table: nvtx_range is. A workspace without this table built nvtx_range at ingest.
CREATE TABLE IF NOT EXISTS nvtx_range_source (
    trace_id          INTEGER NOT NULL, -- trace this row belongs to (trace.trace_id)
    range_id          BIGINT NOT NULL,  -- nvtx_range.range_id: in (start, end descending) order; or, left
                                        -- for the nesting to number (an ingest that did not nest the
                                        -- ranges), -1 - the range's row in the source: negative
    pid               BIGINT,           -- nvtx_range.pid
    tid               BIGINT,           -- nvtx_range.tid
    end_tid           BIGINT,           -- nvtx_range.end_tid
    ts                BIGINT NOT NULL,  -- nvtx_range.ts
    end_ts            BIGINT,           -- nvtx_range.ts + nvtx_range.dur; NULL when the range was never closed
    name              VARCHAR,          -- nvtx_range.name
    domain            VARCHAR NOT NULL, -- nvtx_range.domain
    style             ENUM('push/pop', 'start/end') NOT NULL, -- nvtx_range.style
    color             BIGINT,           -- nvtx_range.color
    category          BIGINT,           -- nvtx_range.category
    args              VARCHAR           -- nvtx_range.args
);
