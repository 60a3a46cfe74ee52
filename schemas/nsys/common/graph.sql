-- src_graph_exec: whole-graph executions from CUPTI_ACTIVITY_KIND_GRAPH_TRACE, written under
-- --cuda-graph-trace=graph (the default with CUDA 11.7+ drivers): one row per graph launch, whose
-- correlationId is that of the cudaGraphLaunch call, and no KERNEL/MEMCPY/MEMSET rows for the
-- graph's nodes. Under --cuda-graph-trace=node the nodes are ordinary KERNEL/MEMCPY/MEMSET rows
-- with graphNodeId (and, from schema 3.24 on, the kernel's graphId) set instead.
--
-- Without rows in these tables both views are empty: schemas/default/graph.sql's stand in
-- (traceql.sources.adapters.adapter_sql).
-- needs rows of: raw.CUPTI_ACTIVITY_KIND_GRAPH_TRACE, raw.CUDA_GRAPH_EVENTS, raw.CUDA_GRAPH_NODE_EVENTS
CREATE OR REPLACE TEMP VIEW src_graph_exec AS
SELECT
    g.rowid                          AS src_row,
    g.deviceId                       AS device_id,
    g.contextId                      AS context_id,
    g.streamId                       AS stream_id,
    (g.globalPid >> 24) & 16777215   AS pid,
    g.correlationId                  AS correlation_id,
    g.start                          AS ts,
    g."end" - g.start                AS dur,
    g.graphId                        AS graph_id,
    g.graphExecId                    AS graph_exec_id
FROM raw.CUPTI_ACTIVITY_KIND_GRAPH_TRACE g
WHERE g.start IS NOT NULL AND g."end" IS NOT NULL;

-- src_graph_event: CPU-side graph lifecycle events. 3.x: CUDA_GRAPH_EVENTS holds graph-level
-- events (eventClass 95 graph creation, 94 graph exec creation = instantiation, 96 graph clone;
-- graphId, originalGraphId, graphExecId) and CUDA_GRAPH_NODE_EVENTS node-level ones (77 node
-- creation, clones with originalGraphNodeId set). 2.9.1 had no CUDA_GRAPH_NODE_EVENTS: its
-- CUDA_GRAPH_EVENTS had the node layout (graphNodeId, originalGraphNodeId), read here as node
-- events. Node events carry no graph id in either layout.
CREATE OR REPLACE TEMP VIEW src_graph_event AS
WITH e AS (
    SELECT rowid * 2 AS src_row, start, "end", eventClass, globalTid, nameId,
           graphId, originalGraphId, graphExecId, graphNodeId, originalGraphNodeId,
           graphNodeId IS NOT NULL AS node_event
    FROM raw.CUDA_GRAPH_EVENTS
    UNION ALL
    SELECT rowid * 2 + 1, start, "end", eventClass, globalTid, nameId,
           NULL, NULL, NULL, graphNodeId, originalGraphNodeId, true
    FROM raw.CUDA_GRAPH_NODE_EVENTS
)
SELECT
    e.src_row,
    (e.globalTid >> 24) & 16777215   AS pid,
    e.globalTid & 16777215           AS tid,
    e.start                          AS ts,
    e."end" - e.start                AS dur,
    coalesce(CASE WHEN e.node_event THEN
                       CASE e.eventClass WHEN 77 THEN 'node creation' WHEN 96 THEN 'node clone'
                                         WHEN 111 THEN 'exec node set params' END
                  ELSE CASE e.eventClass WHEN 95 THEN 'graph creation' WHEN 94 THEN 'graph exec creation'
                                         WHEN 96 THEN 'graph clone' WHEN 111 THEN 'exec node set params' END END,
             'other class ' || coalesce(CAST(e.eventClass AS VARCHAR), 'NULL'))
                                     AS kind,
    s.value                          AS name,
    e.graphId                        AS graph_id,
    e.originalGraphId                AS original_graph_id,
    e.graphExecId                    AS graph_exec_id,
    e.graphNodeId                    AS graph_node_id,
    e.originalGraphNodeId            AS original_graph_node_id
FROM e
LEFT JOIN raw.StringIds s ON s.id = e.nameId
WHERE e.start IS NOT NULL;
