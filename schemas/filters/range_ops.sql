-- The GPU operations the ranges a --range filter names hold (traceql/rangefilter.py splices
-- this condition into a report's input, in place of its '/* where */ TRUE' marker, with {key}
-- the input's operation id column). The attribution rule of op_range: an operation belongs to a
-- range when its launching call lies wholly inside the range and was made by a thread of the
-- range's process, at any depth; op_range holds exactly those pairs, so this reads them. An
-- operation several matching ranges hold (nested instances, several names) is in the set once.
-- A range matches when its full name, grouping name or nesting path is one of $range_names, or
-- its name contains one of $range_words (ignoring case). Ranges at or below the NVTX depth cap
-- ($range_depth_cap) hold nothing, as in op_range; GPU-side spans of PyTorch profiler traces
-- (domain gpu_user_annotation) hold nothing either.
(trace_id, {key}) IN (
    SELECT o.trace_id, o.op_id
    FROM op_range o
    JOIN nvtx_range r ON r.trace_id = o.trace_id AND r.range_id = o.range_id
    WHERE r.domain <> 'gpu_user_annotation' AND r.depth < $range_depth_cap
      AND (coalesce(list_contains($range_names, r.name), false)
           OR coalesce(list_contains($range_names, r.group_name), false)
           OR coalesce(list_contains($range_names, r.path), false)
           OR coalesce(len(list_filter($range_words, w -> contains(lower(r.name), lower(w)))) > 0, false))
)
