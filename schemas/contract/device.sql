-- device: one row per CUDA GPU described by the trace (non-CUDA display adapters are left out).
CREATE TABLE device (
    trace_id          INTEGER NOT NULL, -- trace this row belongs to (trace.trace_id)
    device_id         INTEGER NOT NULL, -- CUDA device id as used by kernel.device_id, memcpy.device_id, ...
    name              VARCHAR,          -- marketing name, e.g. 'NVIDIA H100 80GB HBM3'
    sm_count          INTEGER,          -- number of streaming multiprocessors
    memory_bandwidth  BIGINT,           -- peak memory bandwidth in bytes per second
    clock_rate        BIGINT,           -- peak SM clock in Hz
    total_memory      BIGINT,           -- device memory in bytes
    l2_cache_size     BIGINT,           -- L2 cache in bytes
    compute_major     INTEGER,          -- compute capability, major part (8 for sm_80)
    compute_minor     INTEGER,          -- compute capability, minor part (0 for sm_80)
    bus_location      VARCHAR,          -- PCI bus location, e.g. '0000:3b:00.0'
    uuid              VARCHAR           -- GPU UUID when the exporter records it
);
