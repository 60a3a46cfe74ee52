-- memset: one row per memory set executed on a GPU.
CREATE TABLE memset (
    trace_id          INTEGER NOT NULL, -- trace this row belongs to (trace.trace_id)
    memset_id         BIGINT NOT NULL,  -- id of the memset within its trace, unique across kernel, memcpy and memset (gpu_op.op_id)
    device_id         INTEGER,          -- GPU that executed the memset
    context_id        BIGINT,           -- CUDA context id
    stream_id         BIGINT,           -- CUDA stream id
    pid               BIGINT,           -- process that issued the memset
    correlation_id    BIGINT,           -- id of the launching API call within the process (api_call.correlation_id)
    ts                BIGINT NOT NULL,  -- GPU start in ns (trace clock)
    dur               BIGINT NOT NULL,  -- duration in ns
    bytes             BIGINT,           -- bytes set
    value             BIGINT,           -- byte value written
    mem_kind          VARCHAR,          -- memory kind written: 'Device', 'Managed', 'Pinned', ...
    graph_node_id     BIGINT,           -- CUDA graph node that ran this memset, NULL outside graphs
    graph_id          BIGINT            -- CUDA graph that ran this memset when the export records it (nvprof); NULL otherwise: nsys memset records carry no graph id
);
