-- ingest_stats: diagnostics written by ingest: what was dropped, unmatched, guessed or unusual in each trace.
CREATE TABLE ingest_stats (
    trace_id          INTEGER NOT NULL, -- trace this row belongs to (trace.trace_id)
    key               VARCHAR NOT NULL, -- what is counted, e.g. 'api_call.backtrace_duplicates_dropped'
    value             BIGINT,           -- the count or number, NULL for purely textual notes
    severity          VARCHAR NOT NULL, -- 'info', 'warning' or 'error'
    detail            VARCHAR           -- one sentence explaining the row
);
