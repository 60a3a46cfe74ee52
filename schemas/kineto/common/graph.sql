-- src_graph_exec, src_graph_event: Kineto records no whole-graph executions and no graph lifecycle
-- events (kernels run by a CUDA graph are ordinary kernel events without graph ids). Both views are
-- empty.
CREATE OR REPLACE TEMP VIEW src_graph_exec AS
SELECT
    CAST(NULL AS BIGINT) AS src_row, CAST(NULL AS BIGINT) AS device_id, CAST(NULL AS BIGINT) AS context_id,
    CAST(NULL AS BIGINT) AS stream_id, CAST(NULL AS BIGINT) AS pid, CAST(NULL AS BIGINT) AS correlation_id,
    CAST(NULL AS BIGINT) AS ts, CAST(NULL AS BIGINT) AS dur, CAST(NULL AS BIGINT) AS graph_id,
    CAST(NULL AS BIGINT) AS graph_exec_id
WHERE false;

CREATE OR REPLACE TEMP VIEW src_graph_event AS
SELECT
    CAST(NULL AS BIGINT) AS src_row, CAST(NULL AS BIGINT) AS pid, CAST(NULL AS BIGINT) AS tid,
    CAST(NULL AS BIGINT) AS ts, CAST(NULL AS BIGINT) AS dur, CAST(NULL AS VARCHAR) AS kind,
    CAST(NULL AS VARCHAR) AS name, CAST(NULL AS BIGINT) AS graph_id, CAST(NULL AS BIGINT) AS original_graph_id,
    CAST(NULL AS BIGINT) AS graph_exec_id, CAST(NULL AS BIGINT) AS graph_node_id,
    CAST(NULL AS BIGINT) AS original_graph_node_id
WHERE false;
