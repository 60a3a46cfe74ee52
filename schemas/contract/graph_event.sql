-- graph_event: one row per CUDA graph lifecycle event the export records on the CPU (nsys CUDA_GRAPH_EVENTS, CUDA_GRAPH_NODE_EVENTS): a graph created (by stream capture or cudaGraphCreate), cloned, instantiated into an executable graph, or a graph node created or cloned, with the API call it happened in.
CREATE TABLE graph_event (
    trace_id          INTEGER NOT NULL, -- trace this row belongs to (trace.trace_id)
    graph_event_id    BIGINT NOT NULL,  -- id of the event within its trace (0, 1, ... in ts order)
    pid               BIGINT,           -- process of the event
    tid               BIGINT,           -- thread of the event
    ts                BIGINT NOT NULL,  -- when it happened in ns (trace clock)
    dur               BIGINT,           -- duration in ns as recorded (0 in the exports seen: an instant)
    kind              VARCHAR,          -- 'graph creation', 'graph exec creation' (instantiation), 'graph clone', 'node creation', 'node clone', 'exec node set params', or 'other class N' (N: the export's event class)
    name              VARCHAR,          -- the event's name as the export has it, e.g. 'Graph Creation', 'GraphExec Creation'
    graph_id          BIGINT,           -- graph created, cloned or instantiated (graph_exec.graph_id, kernel.graph_id); NULL for node events
    original_graph_id BIGINT,           -- for a clone: the graph it was cloned from; NULL otherwise
    graph_exec_id     BIGINT,           -- for an instantiation: the executable graph made from graph_id (graph_exec.graph_exec_id); NULL otherwise
    graph_node_id     BIGINT,           -- for a node event: the node created or cloned (kernel.graph_node_id); NULL for graph events
    original_graph_node_id BIGINT,      -- for a cloned node (e.g. at instantiation): the node it was cloned from; NULL otherwise
    api_id            BIGINT,           -- the CUDA API call on the same thread that was running at ts (api_call.api_id), e.g. cudaStreamBeginCapture or cudaGraphInstantiate; NULL when none
    api_name          VARCHAR           -- name of that call
);
