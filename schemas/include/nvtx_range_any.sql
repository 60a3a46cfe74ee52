-- nvtx_range_any: the NVTX ranges of every trace, nested (nvtx_range) or waiting to be
-- (nvtx_range_source, schemas/nvtx_range_source.sql): a trace's ranges are in exactly one of the
-- two (traceql.store.families.derive moves them), so what reads this view needs no family built.
-- Columns: trace_id, range_id, ts, dur (NULL when never closed), end_tid (as in nvtx_range).
CREATE OR REPLACE TEMP VIEW nvtx_range_any AS
SELECT trace_id, range_id, ts, dur, end_tid FROM nvtx_range
UNION ALL
SELECT trace_id, range_id, ts, end_ts - ts, end_tid FROM nvtx_range_source;
