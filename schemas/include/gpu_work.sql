-- gpu_work(graph_op_id): the GPU's work: every GPU operation (gpu_op) and every execution of a
-- CUDA graph traced whole (graph_exec) as one operation of op_kind 'graph' named
-- '[CUDA graph <graph_id>]', with gpu_op's columns and api_id (a graph execution's launching call;
-- NULL for gpu_op's rows, whose call is in launch). A graph execution's op_id is {graph_op_id}:
-- CAST(NULL AS BIGINT) in the reports, -1 - exec_row_id where rows need a key (gpu_op.op_id is
-- never negative). A whole-graph execution is GPU work: busy, and no gap lies inside it.
SELECT trace_id, op_kind, op_id, device_id, stream_id, pid, correlation_id, ts, dur, name, bytes,
       CAST(NULL AS BIGINT) AS api_id
FROM gpu_op
UNION ALL
SELECT trace_id, 'graph', {graph_op_id}, device_id, stream_id, pid, correlation_id, ts, dur,
       '[CUDA graph ' || coalesce(CAST(graph_id AS VARCHAR), '?') || ']', CAST(NULL AS BIGINT), api_id
FROM graph_exec
