-- sync_event: one row per CUDA synchronization the profiler recorded (CUPTI synchronization activity): a host thread waiting for the device, a stream or an event, or a stream made to wait for an event, with the API call behind it. AMD tracers record no such activity: on an AMD trace each synchronizing HIP call (hipDeviceSynchronize, hipStreamSynchronize, hipEventSynchronize, hipEventQuery, hipStreamWaitEvent) is one row, timed as the call, with no device, stream or event.
CREATE TABLE sync_event (
    trace_id          INTEGER NOT NULL, -- trace this row belongs to (trace.trace_id)
    sync_id           BIGINT NOT NULL,  -- id of the synchronization within its trace, in start order
    kind              ENUM('device', 'stream', 'event', 'event_query', 'stream_wait', 'unknown') NOT NULL, -- what was waited for, from the API call: 'device' (cudaDeviceSynchronize, cuCtxSynchronize, hipDeviceSynchronize), 'stream' (cudaStreamSynchronize, hipStreamSynchronize), 'event' (cudaEventSynchronize, hipEventSynchronize), 'event_query' (cudaEventQuery, hipEventQuery: does not block), 'stream_wait' (cudaStreamWaitEvent, hipStreamWaitEvent: the GPU waits, the host does not), 'unknown' (no API call of that name found)
    device_id         INTEGER,          -- GPU of the synchronized context (device.device_id), when recorded
    context_id        BIGINT,           -- CUDA context id
    stream_id         BIGINT,           -- stream synchronized or made to wait; NULL when the record names none (device and event synchronizations)
    event_id          BIGINT,           -- CUDA event waited for or queried; NULL when the record names none
    pid               BIGINT,           -- process that synchronized
    tid               BIGINT,           -- thread of the API call behind it (api_call.tid); NULL when no call was found
    ts                BIGINT NOT NULL,  -- start of the synchronization on the CPU in ns (trace clock)
    dur               BIGINT NOT NULL,  -- its duration in ns: how long the host thread waited (for 'stream_wait' and 'event_query', the time the call took, not a wait)
    correlation_id    BIGINT,           -- correlation id of the API call within the process (api_call.correlation_id)
    api_id            BIGINT,           -- the API call behind it (api_call.api_id): same correlation id in the same process; NULL when none
    api_name          VARCHAR           -- name of that call, e.g. 'cudaDeviceSynchronize'
);
