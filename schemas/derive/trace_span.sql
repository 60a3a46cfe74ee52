-- derived_trace_span: per trace, the earliest start and the latest end of any event.
/* include: nvtx_range_any */

CREATE OR REPLACE TEMP VIEW derived_trace_span AS
SELECT trace_id, min(ts) AS start_ts, max(ts + coalesce(dur, 0)) AS end_ts
FROM (SELECT trace_id, ts, dur FROM kernel
      UNION ALL SELECT trace_id, ts, dur FROM memcpy
      UNION ALL SELECT trace_id, ts, dur FROM memset
      UNION ALL SELECT trace_id, ts, dur FROM api_call
      UNION ALL SELECT trace_id, ts, dur FROM nvtx_range_any
      UNION ALL SELECT trace_id, ts, 0 FROM nvtx_mark)
GROUP BY trace_id;
