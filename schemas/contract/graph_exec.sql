-- graph_exec: one row per execution of a whole CUDA graph recorded by graph-level tracing (nsys --cuda-graph-trace=graph, the default, CUPTI_ACTIVITY_KIND_GRAPH_TRACE): GPU time that has no kernel, memcpy or memset row (the graph's nodes are not traced one by one), shown in `report --by gpu` and `traceql summary` as '[CUDA graph N]'; it counts as GPU busy and as compute (device_busy, the breakdown, gpu_gaps, low_utilization) but is not in gpu_op, launch or the range reports.
CREATE TABLE graph_exec (
    trace_id          INTEGER NOT NULL, -- trace this row belongs to (trace.trace_id)
    exec_row_id       BIGINT NOT NULL,  -- id of the execution within its trace (0, 1, ... in ts order); its own id space, not a gpu_op.op_id
    device_id         INTEGER,          -- GPU that ran the graph (device.device_id)
    context_id        BIGINT,           -- CUDA context id
    stream_id         BIGINT,           -- CUDA stream the graph was launched into
    pid               BIGINT,           -- process that launched the graph
    correlation_id    BIGINT,           -- id of the launching call within the process (api_call.correlation_id), as for kernels
    ts                BIGINT NOT NULL,  -- GPU start of the execution in ns (trace clock)
    dur               BIGINT NOT NULL,  -- GPU duration of the whole execution in ns, start to end (gaps between its nodes included)
    graph_id          BIGINT,           -- CUDA graph id: the graph the executable graph was instantiated from (graph_event.graph_id)
    graph_exec_id     BIGINT,           -- executable graph id (cudaGraphExec_t) that ran (graph_event.graph_exec_id)
    api_id            BIGINT,           -- the launching call, e.g. cudaGraphLaunch (api_call.api_id): same correlation id in the same process, chosen as for launch; NULL when none
    api_name          VARCHAR,          -- name of the launching call, e.g. 'cudaGraphLaunch'
    queue_delay       BIGINT            -- GPU start minus the end of the launching call in ns; NULL when negative or unknown
);
