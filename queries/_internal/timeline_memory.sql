-- _internal/timeline_memory: each GPU's memory in use over time, for the counter tracks of `traceql export --format perfetto`: the levels of memory_event at each time in the window, the last one when several events share a time.
-- param trace_id: the trace
-- param start: window start in ns on the trace clock (NULL: open)
-- param end: window end in ns on the trace clock (NULL: open)
-- param origin: ns subtracted from ts (the trace's start for epoch-clock traces, else 0)
-- column device_id: the GPU (memory_event.device_id)
-- column ts: time of the events in ns (trace clock)
-- column ts_text: ts - origin in microseconds as the timeline writes times (three decimals for the nanoseconds, then a 4)
-- column allocated: bytes of device memory allocated after the last event at ts (memory_event.allocated)
-- column reserved: bytes the allocator reserved then (memory_event.reserved); NULL when not recorded
SELECT device_id, ts,
       printf('%s%d.%03d4', CASE WHEN ts - $origin < 0 THEN '-' ELSE '' END, abs(ts - $origin) // 1000,
              abs(ts - $origin) % 1000) AS ts_text,
       arg_max(allocated, memory_event_id) AS allocated, arg_max(reserved, memory_event_id) AS reserved
FROM memory_event
WHERE trace_id = $trace_id AND mem_kind = 'Device' AND device_id IS NOT NULL
  AND ($start IS NULL OR ts >= $start) AND ($end IS NULL OR ts < $end)
GROUP BY device_id, ts
ORDER BY device_id, ts;
