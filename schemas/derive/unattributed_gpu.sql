-- derived_unattributed_gpu: the GPU work of the trace being ingested (getvariable('trace_id')), or
-- of every trace in the workspace when the variable is unset (NULL: how a workspace made before
-- the unattributed_gpu table existed gets it, see traceql/workspace.py and create_contract in
-- traceql/ingest.py), that no NVTX range encloses: operations without an op_range row (looked up
-- among the innermost rows only, one per attributed operation: on the L benchmark 4.0 s instead
-- of 6.2 s against all 34 M rows). Their
-- count and summed durations per kind, one row per trace that has any. Stored so that
-- `report --by range` need not anti-join every GPU operation against op_range at each call.
-- A sum beyond 2^63-1 ns (only a damaged export gets there: ends near 2^63) is stored as
-- 2^63-1 instead of failing the ingest.
CREATE OR REPLACE TEMP VIEW derived_unattributed_gpu AS
SELECT
    o.trace_id,
    count(*) AS ops,
    count(*) FILTER (WHERE o.op_kind = 'kernel') AS kernels,
    CAST(least(coalesce(sum(o.dur) FILTER (WHERE o.op_kind = 'kernel'), 0), 9223372036854775807) AS BIGINT) AS kernel_ns,
    CAST(least(coalesce(sum(o.dur) FILTER (WHERE o.op_kind = 'memcpy'), 0), 9223372036854775807) AS BIGINT) AS memcpy_ns,
    CAST(least(coalesce(sum(o.dur) FILTER (WHERE o.op_kind = 'memset'), 0), 9223372036854775807) AS BIGINT) AS memset_ns
FROM gpu_op o
WHERE (getvariable('trace_id') IS NULL OR o.trace_id = getvariable('trace_id'))
  AND NOT EXISTS (SELECT 1 FROM op_range r WHERE r.trace_id = o.trace_id AND r.op_id = o.op_id AND r.is_innermost)
GROUP BY o.trace_id;
