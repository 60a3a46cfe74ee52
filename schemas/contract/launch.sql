-- launch: one row per GPU operation (kernel, memcpy, memset) with the CUDA API call that launched it.
CREATE TABLE launch (
    trace_id          INTEGER NOT NULL, -- trace this row belongs to (trace.trace_id)
    op_id             BIGINT NOT NULL,  -- the GPU operation (gpu_op.op_id = kernel_id, memcpy_id or memset_id)
    op_kind           ENUM('kernel', 'memcpy', 'memset') NOT NULL, -- 'kernel', 'memcpy' or 'memset'
    api_id            BIGINT,           -- the launching call (api_call.api_id); NULL when no call with its correlation id exists in its process
    pid               BIGINT,           -- process of the operation
    tid               BIGINT,           -- thread that made the launching call
    api_ts            BIGINT,           -- start of the launching call in ns (trace clock)
    api_dur           BIGINT,           -- duration of the launching call in ns
    api_name          VARCHAR,          -- name of the launching call, e.g. 'cudaLaunchKernel'
    queue_delay       BIGINT,           -- GPU start minus the end of the launching call in ns; NULL when negative or unknown
    category          ENUM('compute', 'communication', 'memory') NOT NULL -- what the operation does: 'communication' for collective and peer-to-peer kernels (NCCL, RCCL, MSCCL, names with all_reduce, all_gather, reduce_scatter, all_to_all; schemas/derive/launch.sql), 'compute' for other kernels, 'memory' for copies and memsets
);
