-- derived_range_gpu: per NVTX range instance of the trace being ingested (getvariable('trace_id')),
-- the GPU work launched inside it at any depth: counts, summed durations per kind, the busy time
-- and the projection (first start to last end). Busy time is the length of the union of the
-- operations' intervals, so concurrent streams count once. One sweep in start order: each
-- operation adds the part of its interval that lies beyond the latest end seen before it.
-- Kernel time is also split by who launched the kernel (op_range.attribution): the thread that
-- opened the range ('thread': own_kernel_ns) or another thread of its process ('process':
-- other_kernel_ns); the two add up to kernel_ns.
CREATE OR REPLACE TEMP VIEW derived_range_gpu AS
WITH ops AS (
    SELECT r.range_id, o.op_kind, r.attribution, o.ts, o.ts + greatest(o.dur, 0) AS e, o.dur,
           max(o.ts + greatest(o.dur, 0)) OVER (PARTITION BY r.range_id ORDER BY o.ts, o.op_id
               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
    FROM op_range r
    JOIN gpu_op o ON o.trace_id = r.trace_id AND o.op_id = r.op_id
    WHERE r.trace_id = getvariable('trace_id')
)
SELECT getvariable('trace_id')::INTEGER AS trace_id, range_id,
       count(*) AS ops,
       count(*) FILTER (WHERE op_kind = 'kernel') AS kernels,
       coalesce(sum(dur) FILTER (WHERE op_kind = 'kernel'), 0) AS kernel_ns,
       coalesce(sum(dur) FILTER (WHERE op_kind = 'kernel' AND attribution = 'thread'), 0) AS own_kernel_ns,
       coalesce(sum(dur) FILTER (WHERE op_kind = 'kernel' AND attribution = 'process'), 0) AS other_kernel_ns,
       coalesce(sum(dur) FILTER (WHERE op_kind = 'memcpy'), 0) AS memcpy_ns,
       coalesce(sum(dur) FILTER (WHERE op_kind = 'memset'), 0) AS memset_ns,
       sum(greatest(e - greatest(ts, coalesce(prev_end, ts)), 0)) AS gpu_busy_ns,
       min(ts) AS proj_start, max(e) AS proj_end
FROM ops
GROUP BY range_id;
