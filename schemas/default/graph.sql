-- Defaults of the graph adapter views, for a format that records no CUDA/HIP graph executions or graph
-- events: both views empty, with the columns the contract tables graph_exec and graph_event are
-- filled from. Ingest runs this file before a format's own graph.sql, which replaces them. The
-- formats without one: rocpd; Kineto (kernels run by a CUDA graph are ordinary kernel events
-- without graph ids); nvprof (CUPTI's GRAPH_TRACE activity came after nvprof; graph-launched
-- kernels, copies and memsets are ordinary rows with graphNodeId and graphId, Version 16).
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
