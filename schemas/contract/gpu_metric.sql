-- gpu_metric: one row per GPU metric sample (nsys --gpu-metrics-devices: SM activity, tensor activity, DRAM bandwidth, PCIe and NVLink throughput, sampled at a fixed rate); empty when the trace sampled none.
CREATE TABLE gpu_metric (
    trace_id          INTEGER NOT NULL, -- trace this row belongs to (trace.trace_id)
    device_id         INTEGER,          -- GPU sampled (device.device_id)
    ts                BIGINT NOT NULL,  -- sample time in ns (trace clock)
    metric            VARCHAR,          -- metric name as the profiler names it, e.g. 'SMs Active [Throughput %]', 'Tensor Active [Throughput %]'
    value             DOUBLE            -- sampled value in the unit the name states (mostly a percentage of the peak)
);
