-- derived_range_gpu: per NVTX range instance of the trace being ingested (getvariable('trace_id')),
-- the GPU work launched inside it at any depth: counts, summed durations per kind, the busy time
-- (the union of the operations' intervals, so concurrent streams count once; computed by a
-- sweep: an operation starts a new busy segment when it starts after every earlier one ended)
-- and the projection (first start to last end).
CREATE OR REPLACE TEMP VIEW derived_range_gpu AS
WITH ops AS (
    SELECT r.range_id, o.op_id, o.op_kind, o.ts, o.ts + greatest(o.dur, 0) AS e, o.dur
    FROM op_range r
    JOIN gpu_op o ON o.trace_id = r.trace_id AND o.op_id = r.op_id
    WHERE r.trace_id = getvariable('trace_id')
),
ordered AS (
    SELECT *, max(e) OVER (PARTITION BY range_id ORDER BY ts, op_id
                           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
    FROM ops
),
segments AS (
    SELECT *, sum(CASE WHEN prev_end IS NULL OR ts > prev_end THEN 1 ELSE 0 END)
                  OVER (PARTITION BY range_id ORDER BY ts, op_id ROWS UNBOUNDED PRECEDING) AS seg
    FROM ordered
),
busy AS (
    SELECT range_id, sum(seg_end - seg_start) AS gpu_busy_ns
    FROM (SELECT range_id, seg, min(ts) AS seg_start, max(e) AS seg_end FROM segments GROUP BY range_id, seg)
    GROUP BY range_id
)
SELECT getvariable('trace_id')::INTEGER AS trace_id, ops.range_id,
       count(*) AS ops,
       count(*) FILTER (WHERE op_kind = 'kernel') AS kernels,
       coalesce(sum(dur) FILTER (WHERE op_kind = 'kernel'), 0) AS kernel_ns,
       coalesce(sum(dur) FILTER (WHERE op_kind = 'memcpy'), 0) AS memcpy_ns,
       coalesce(sum(dur) FILTER (WHERE op_kind = 'memset'), 0) AS memset_ns,
       any_value(busy.gpu_busy_ns) AS gpu_busy_ns,
       min(ts) AS proj_start, max(e) AS proj_end
FROM ops JOIN busy USING (range_id)
GROUP BY ops.range_id;
