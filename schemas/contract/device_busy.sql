-- device_busy: one row per GPU of a trace that ran GPU operations: how many, how long it ran at least one (busy time, the GPU lines of `traceql summary`) and what kept it busy (compute, communication, memory; `report --by breakdown`), computed at ingest.
CREATE TABLE device_busy (
    trace_id          INTEGER NOT NULL, -- trace this row belongs to (trace.trace_id)
    device_id         INTEGER,          -- the GPU (device.device_id); NULL for operations the export gives no device for
    ops               BIGINT NOT NULL,  -- GPU operations the GPU ran: kernels, copies, memsets, and executions of CUDA graphs traced whole (graph_exec)
    busy_ns           BIGINT NOT NULL,  -- union of those operations' intervals in ns: overlapping streams counted once, not the summed durations; compute_ns + comm_exposed_ns + memory_exposed_ns
    compute_ns        BIGINT NOT NULL,  -- time at least one compute kernel (launch.category 'compute') or whole-graph execution (graph_exec) ran, in ns
    comm_ns           BIGINT NOT NULL,  -- time at least one communication kernel ran (NCCL and other collectives), in ns, overlapped with compute or not
    comm_exposed_ns   BIGINT NOT NULL,  -- time communication kernels ran while no compute kernel did (exposed communication), in ns
    memory_exposed_ns BIGINT NOT NULL   -- time only copies or memsets ran, no kernel (exposed memory operations), in ns
);
