-- memcpy: one row per memory copy executed by a GPU copy engine or kernel.
CREATE TABLE memcpy (
    trace_id          INTEGER NOT NULL, -- trace this row belongs to (trace.trace_id)
    memcpy_id         BIGINT NOT NULL,  -- id of the copy within its trace, unique across kernel, memcpy and memset (gpu_op.op_id)
    device_id         INTEGER,          -- GPU that executed the copy
    context_id        BIGINT,           -- CUDA context id
    stream_id         BIGINT,           -- CUDA stream id
    pid               BIGINT,           -- process that issued the copy
    correlation_id    BIGINT,           -- id of the launching API call within the process (api_call.correlation_id)
    ts                BIGINT NOT NULL,  -- GPU start in ns (trace clock)
    dur               BIGINT NOT NULL,  -- duration in ns
    bytes             BIGINT,           -- bytes copied
    copy_kind         VARCHAR,          -- direction: 'Host-to-Device', 'Device-to-Host', 'Device-to-Device', 'Peer-to-Peer', ...
    src_kind          VARCHAR,          -- memory kind of the source: 'Pageable', 'Pinned', 'Device', 'Array', 'Managed', ...
    dst_kind          VARCHAR,          -- memory kind of the destination, same labels as src_kind
    src_device_id     INTEGER,          -- device of the source memory, when recorded
    dst_device_id     INTEGER,          -- device of the destination memory, when recorded
    graph_node_id     BIGINT,           -- CUDA graph node that ran this copy, NULL outside graphs
    graph_id          BIGINT            -- CUDA graph that ran this copy when the export records it (nvprof); NULL otherwise: nsys copy records carry no graph id
);
