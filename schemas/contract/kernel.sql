-- kernel: one row per kernel execution on a GPU.
CREATE TABLE kernel (
    trace_id          INTEGER NOT NULL, -- trace this row belongs to (trace.trace_id)
    kernel_id         BIGINT NOT NULL,  -- id of the execution within its trace, unique across kernel, memcpy and memset (gpu_op.op_id)
    device_id         INTEGER,          -- GPU that ran the kernel (device.device_id)
    context_id        BIGINT,           -- CUDA context id
    stream_id         BIGINT,           -- CUDA stream id
    pid               BIGINT,           -- process that launched the kernel
    correlation_id    BIGINT,           -- id of the launching API call within the process (api_call.correlation_id)
    ts                BIGINT NOT NULL,  -- GPU start in ns (trace clock)
    dur               BIGINT NOT NULL,  -- GPU execution time in ns
    name              VARCHAR,          -- demangled kernel name, e.g. 'void gemm<float>(float const*, ...)'
    short_name        VARCHAR,          -- base name without template arguments or parameters, e.g. 'gemm'
    mangled_name      VARCHAR,          -- mangled symbol, e.g. '_Z4gemmIfEvPKf...', NULL when the source lacks it
    grid_x            INTEGER,          -- grid size in blocks, x
    grid_y            INTEGER,          -- grid size in blocks, y
    grid_z            INTEGER,          -- grid size in blocks, z
    block_x           INTEGER,          -- block size in threads, x
    block_y           INTEGER,          -- block size in threads, y
    block_z           INTEGER,          -- block size in threads, z
    registers_per_thread INTEGER,       -- registers per thread
    static_shared_memory BIGINT,        -- static shared memory per block in bytes
    dynamic_shared_memory BIGINT,       -- dynamic shared memory per block in bytes
    local_memory_per_thread BIGINT,     -- local memory per thread in bytes
    launch_type       VARCHAR,          -- 'Regular', 'Cooperative single device', 'Cooperative multi device', or NULL when unknown
    grid_id           BIGINT,           -- per-context launch sequence number assigned by CUDA
    graph_node_id     BIGINT,           -- CUDA graph node that ran this kernel, NULL outside graphs
    graph_id          BIGINT            -- CUDA graph id when recorded, NULL otherwise
);
