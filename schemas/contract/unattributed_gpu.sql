-- unattributed_gpu: one row per trace with GPU work launched outside every NVTX range: that work's totals (the '[unattributed]' row of `report --by range`), computed at ingest.
CREATE TABLE unattributed_gpu (
    trace_id          INTEGER NOT NULL, -- trace this row belongs to (trace.trace_id)
    ops               BIGINT NOT NULL,  -- GPU operations with no enclosing range (no op_range row): no range holds their launching call, or no launching call was found
    kernels           BIGINT NOT NULL,  -- kernels among them
    kernel_ns         BIGINT NOT NULL,  -- sum of their kernel durations in ns (summed, not wall time; these sums saturate at 2^63-1)
    memcpy_ns         BIGINT NOT NULL,  -- sum of their memcpy durations in ns
    memset_ns         BIGINT NOT NULL   -- sum of their memset durations in ns
);
