-- memory_event: one row per memory allocation or free the profiler recorded (PyTorch profiler traces with profile_memory=True: the caching allocator's '[memory]' events; nsys exports with --cuda-memory-usage=true: CUDA_GPU_MEMORY_USAGE_EVENTS), with the bytes held after it and the range and call stack open on its thread at that moment.
CREATE TABLE memory_event (
    trace_id          INTEGER NOT NULL, -- trace this row belongs to (trace.trace_id)
    memory_event_id   BIGINT NOT NULL,  -- id of the event within its trace, in (ts, file) order
    device_id         INTEGER,          -- GPU whose memory it is (device.device_id); NULL for host memory of PyTorch's CPU allocator
    mem_kind          VARCHAR NOT NULL, -- memory kind: 'Device' (GPU memory), 'Host' (PyTorch's CPU allocator), nsys's 'Pinned', 'Managed', ...; levels are kept per device and kind
    pid               BIGINT,           -- process that allocated or freed
    tid               BIGINT,           -- thread that allocated or freed; NULL when the source does not say (nsys)
    ts                BIGINT NOT NULL,  -- time of the event in ns (trace clock)
    bytes             BIGINT NOT NULL,  -- bytes allocated (positive) or freed (negative)
    address           BIGINT,           -- address of the block; NULL when not recorded (PyTorch before 2022)
    correlation_id    BIGINT,           -- correlation id of the CUDA call behind it within the process (nsys, when recorded); NULL otherwise
    allocated         BIGINT NOT NULL,  -- bytes of this kind held on this device right after the event: the allocator's 'Total Allocated' where the source records it (level_source 'recorded'), else the running sum of bytes from the capture's start (level_source 'running_sum'), leaving out frees whose allocation the capture holds no record of, and raised by the bytes that frees show were held before the capture (when the sum of a source without addresses would go below zero), so never negative
    reserved          BIGINT,           -- bytes the allocator reserved on this device right after the event ('Total Reserved', PyTorch since 2022); NULL when not recorded
    level_source      VARCHAR NOT NULL, -- where allocated comes from: 'recorded' (the source's total) or 'running_sum' (computed from the capture's events)
    alloc_event_id    BIGINT,           -- for a free: its allocation (memory_event_id), the last earlier event at the same device, kind and address when that is an allocation; NULL when the capture holds none (the block was allocated before it began; counted in ingest_stats 'memory_event.free_without_allocation') or the address is not recorded
    free_event_id     BIGINT,           -- for an allocation: its free, the next event at the same device, kind and address when that is a free; NULL when not freed within the capture (live at its end) or the address is not recorded
    range_id          BIGINT,           -- innermost push/pop range (NVTX range or PyTorch op, nvtx_range.range_id) open on the event's thread at its time, ts <= event < end; NULL when none or the thread is unknown
    stack_id          BIGINT            -- the Python call stack open on the event's thread at its time (call_stack.stack_id; PyTorch profiler traces recorded with with_stack=True); NULL when none was recorded (nsys: not read)
);
