-- The API calls the ranges a --range filter names hold (traceql/rangefilter.py splices this
-- condition into a report's input with {key} its API call id column): a call lies wholly inside
-- a matching range (range start <= call start, call end <= range end; a range never closed is
-- open to the end of the trace) and was made by a thread of the range's process: the rule
-- op_range applies to launching calls, for every call. Matching as in range_ops.sql.
--
-- Linear, no interval join: per process, the matching ranges in start order with the furthest
-- end reached by any of them that started at or before each (a running max, peers included);
-- an ASOF join gives each call the latest such start at or before its own, and the call is held
-- exactly when that furthest end is at or after the call's end.
(trace_id, {key}) IN (
    SELECT c.trace_id, c.api_id
    FROM api_call c
    ASOF JOIN (
        SELECT r.trace_id, coalesce(r.pid, -1) AS pid, r.ts,
               max(coalesce(r.ts + r.dur, 9223372036854775807))
                   OVER (PARTITION BY r.trace_id, coalesce(r.pid, -1) ORDER BY r.ts) AS reach
        FROM nvtx_range r
        WHERE r.domain <> 'gpu_user_annotation' AND r.depth < $range_depth_cap
          AND (coalesce(list_contains($range_names, r.name), false)
               OR coalesce(list_contains($range_names, r.group_name), false)
               OR coalesce(list_contains($range_names, r.path), false)
               OR coalesce(len(list_filter($range_words, w -> contains(lower(r.name), lower(w)))) > 0, false))
    ) m ON m.trace_id = c.trace_id AND m.pid = coalesce(c.pid, -1) AND c.ts >= m.ts
    WHERE m.reach >= c.ts + c.dur
)
