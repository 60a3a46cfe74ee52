-- range_gpu: one row per NVTX range instance that launched GPU work: the work it caused and its GPU projection.
CREATE TABLE range_gpu (
    trace_id          INTEGER NOT NULL, -- trace this row belongs to (trace.trace_id)
    range_id          BIGINT NOT NULL,  -- the range (nvtx_range.range_id)
    ops               BIGINT NOT NULL,  -- GPU operations launched inside the range, at any depth below it
    kernels           BIGINT NOT NULL,  -- kernels among them
    kernel_ns         BIGINT NOT NULL,  -- sum of their kernel durations in ns (summed, not wall time)
    own_kernel_ns     BIGINT NOT NULL,  -- the part of kernel_ns launched by the thread that opened the range (op_range.attribution 'thread')
    other_kernel_ns   BIGINT NOT NULL,  -- the part of kernel_ns launched by other threads of its process while it was open, e.g. PyTorch's autograd threads (attribution 'process')
    memcpy_ns         BIGINT NOT NULL,  -- sum of their memcpy durations in ns
    memset_ns         BIGINT NOT NULL,  -- sum of their memset durations in ns
    gpu_busy_ns       BIGINT NOT NULL,  -- union of their GPU intervals in ns: overlapping streams counted once
    proj_start        BIGINT NOT NULL,  -- GPU projection: start of the first operation (ns, trace clock)
    proj_end          BIGINT NOT NULL   -- GPU projection: end of the last operation (ns, trace clock)
);
