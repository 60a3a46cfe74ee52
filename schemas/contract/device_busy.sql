-- device_busy: one row per GPU of a trace that ran GPU operations: how many, and how long it ran at least one (busy time, the GPU lines of `traceql summary`), computed at ingest.
CREATE TABLE device_busy (
    trace_id          INTEGER NOT NULL, -- trace this row belongs to (trace.trace_id)
    device_id         INTEGER,          -- the GPU (device.device_id); NULL for operations the export gives no device for
    ops               BIGINT NOT NULL,  -- GPU operations (kernels, copies, memsets) the GPU ran
    busy_ns           BIGINT NOT NULL   -- union of those operations' intervals in ns: overlapping streams counted once, not the summed durations
);
