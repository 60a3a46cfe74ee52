-- src_nvtx_event: the ranges of a Kineto trace, with the event category as their domain:
--   'cpu_op' (2020-2021: 'Operator')  a PyTorch operator (RecordFunction), on its CPU thread;
--   'user_annotation'                 a torch.profiler.record_function block, ProfilerStep#N, an
--                                     optimizer step, DDP's forward, ..., on its CPU thread;
--   'gpu_user_annotation'             the GPU-side span Kineto draws for a user annotation on a
--                                     stream: from the first to the last GPU work launched inside it.
-- Complete events ('X') on one thread nest by time, so cpu_op and user_annotation ranges are
-- push/pop ranges of their thread: ingest derives depth, parent and path from their times as for
-- NVTX. gpu_user_annotation ranges sit on a GPU stream (tid = stream id), not on a thread: they are
-- start/end ranges with no process (pid NULL), so they hold no GPU work under the attribution rule
-- (their CPU-side user_annotation does); they are kept for GPU-time breakdowns by annotation.
-- 2020-2021 files wrote every RecordFunction as 'Operator', record_function blocks too: the names
-- with a '#' and no '::' ('ProfilerStep#5', 'Optimizer.step#SGD.step',
-- 'enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__') are user_annotation ranges here, as
-- later files write them (operators are namespaced: 'aten::add_', or backward nodes: 'AddBackward0').
-- args is the event's argument object as JSON text, without the writer's blanks (DuckDB's json()):
-- 'Sequence number', 'Input Dims', 'Input type', 'Concrete Inputs', ..., which
-- schemas/derive/torch_op.sql reads for cpu_op ranges.
-- Kineto has no marks.
CREATE OR REPLACE TEMP VIEW src_nvtx_event AS
SELECT
    r.src_row,
    'range'                                                   AS kind,
    CASE WHEN r.kind = 'gpu_user_annotation' THEN 'start/end' ELSE 'push/pop' END AS style,
    CASE WHEN r.kind = 'gpu_user_annotation' THEN NULL ELSE r.pid END AS pid,
    CASE WHEN r.kind = 'gpu_user_annotation'
         THEN coalesce(TRY_CAST(json_extract_string(r.args, '$.stream') AS BIGINT), r.tid) ELSE r.tid END AS tid,
    CAST(NULL AS BIGINT)                                      AS end_tid,
    r.ts,
    r.ts + r.dur                                              AS end_ts,
    r.name,
    CASE WHEN r.cat = 'Operator' AND contains(r.name, '#') AND NOT contains(r.name, '::') THEN 'user_annotation'
         ELSE r.kind END                                      AS domain,
    CAST(NULL AS BIGINT)                                      AS color,
    CAST(NULL AS BIGINT)                                      AS category,
    json(r.args)                                              AS args
FROM raw.kineto_typed r
WHERE r.kind IN ('cpu_op', 'user_annotation', 'gpu_user_annotation') AND r.ts IS NOT NULL;
