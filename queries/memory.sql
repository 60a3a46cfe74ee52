-- memory: each GPU's peak of allocated memory, when it was reached (time and iteration), and who held the memory then: the allocations live at the peak grouped by the op / NVTX path that made them, largest first.
-- input: memory_event
-- shown: device, peak_bytes, peak_at_ns, iteration, reserved_bytes, holder, live_bytes, allocations, pct
-- param trace_id: only this trace (NULL: every trace in the workspace)
-- param per_trace: accepted for symmetry with the other reports: every row is one trace's GPU already
-- column trace_id: trace of the GPU (trace.trace_id)
-- column device: GPU (memory_event.device_id)
-- column peak_bytes: the GPU's peak of allocated device memory (the largest memory_event.allocated: the allocator's recorded total, or the running sum of the capture's allocations and frees)
-- column peak_at_ns: when the GPU first reached its peak, in ns after the trace's start
-- column iteration: the PyTorch profiler step (ProfilerStep#N range) open at the peak; NULL when none is
-- column reserved_bytes: bytes the allocator had reserved at the peak (memory_event.reserved); NULL when the source does not record it
-- column peak_reserved_bytes: the largest reserved over the capture; NULL when not recorded
-- column holder: the NVTX / op path (nvtx_range.path) of the range open where the live allocations were made; '[outside every range]' for allocations made outside every range; '[before the capture]' for what the recorded total held beyond the capture's live allocations; '[unknown: no addresses]' when the source records no addresses (PyTorch before 2022), so frees cannot be paired
-- column op: the innermost range of that path (its grouping name, nvtx_range.group_name)
-- column live_bytes: bytes of the holder's allocations live at the peak
-- column allocations: number of those allocations
-- column pct: live_bytes as a percentage of peak_bytes
-- label peak_at_ns: peak at
-- label reserved_bytes: reserved at peak
-- label peak_reserved_bytes: peak reserved
-- label live_bytes: live at peak
-- label pct: % of peak
--
-- The peak is the GPU's first event whose level equals the largest level (ties: the earliest). A
-- live allocation at the peak: an allocation of that GPU's device memory at or before the peak
-- event (in memory_event_id order) whose free (free_event_id) comes after it or not within the
-- capture. The iteration is found by one ASOF join: the ProfilerStep range that started last at or
-- before the peak, when it is still open then.
WITH input AS (
    SELECT *
    FROM memory_event
    WHERE ($trace_id IS NULL OR trace_id = $trace_id) AND mem_kind = 'Device' AND device_id IS NOT NULL
      AND $per_trace IS NOT NULL  -- every row is one trace's GPU, with or without per_trace
      AND /* where */ TRUE
),
levels AS (
    SELECT trace_id, device_id, max(allocated) AS peak_bytes, max(reserved) AS peak_reserved_bytes,
           bool_or(address IS NULL) AS without_address
    FROM input
    GROUP BY trace_id, device_id
),
peak AS (
    SELECT i.trace_id, i.device_id, l.peak_bytes, l.peak_reserved_bytes, l.without_address,
           arg_min(i.memory_event_id, i.memory_event_id) AS peak_id, arg_min(i.ts, i.memory_event_id) AS ts,
           arg_min(i.reserved, i.memory_event_id) AS reserved_bytes,
           arg_min(i.level_source, i.memory_event_id) AS level_source
    FROM input i
    JOIN levels l ON l.trace_id = i.trace_id AND l.device_id = i.device_id AND l.peak_bytes = i.allocated
    GROUP BY ALL
),
steps AS (
    SELECT trace_id, ts, coalesce(ts + dur, 9223372036854775807) AS end_ts, name
    FROM nvtx_range
    WHERE starts_with(name, 'ProfilerStep#') AND ($trace_id IS NULL OR trace_id = $trace_id)
),
placed AS (
    SELECT p.*, CASE WHEN p.ts < s.end_ts THEN s.name END AS iteration
    FROM peak p
    ASOF LEFT JOIN steps s ON s.trace_id = p.trace_id AND s.ts <= p.ts
),
live AS (
    SELECT a.trace_id, a.device_id, a.bytes, a.range_id
    FROM input a
    JOIN placed p ON p.trace_id = a.trace_id AND p.device_id = a.device_id
    WHERE a.bytes > 0 AND a.address IS NOT NULL AND a.memory_event_id <= p.peak_id
      AND (a.free_event_id IS NULL OR a.free_event_id > p.peak_id)
),
held AS (
    SELECT l.trace_id, l.device_id, coalesce(r.path, '[outside every range]') AS holder, r.group_name AS op,
           sum(l.bytes) AS live_bytes, count(*) AS allocations
    FROM live l
    LEFT JOIN nvtx_range r ON r.trace_id = l.trace_id AND r.range_id = l.range_id
    GROUP BY ALL
),
rest AS (
    -- what the recorded total held beyond the capture's live allocations, and traces without addresses
    SELECT p.trace_id, p.device_id,
           CASE WHEN p.without_address THEN '[unknown: no addresses]' ELSE '[before the capture]' END AS holder,
           CAST(NULL AS VARCHAR) AS op,
           p.peak_bytes - coalesce((SELECT sum(h.live_bytes) FROM held h
                                    WHERE h.trace_id = p.trace_id AND h.device_id = p.device_id), 0) AS live_bytes,
           CAST(NULL AS BIGINT) AS allocations
    FROM placed p
),
holders AS (
    SELECT * FROM held
    UNION ALL
    SELECT * FROM rest WHERE live_bytes <> 0
)
SELECT p.trace_id, p.device_id AS device, p.peak_bytes, p.ts - t.start_ts AS peak_at_ns, p.iteration,
       p.reserved_bytes, p.peak_reserved_bytes, h.holder, h.op,
       CAST(h.live_bytes AS BIGINT) AS live_bytes, h.allocations,
       100.0 * h.live_bytes / nullif(p.peak_bytes, 0) AS pct
FROM placed p
JOIN trace t ON t.trace_id = p.trace_id
LEFT JOIN holders h ON h.trace_id = p.trace_id AND h.device_id = p.device_id
ORDER BY p.trace_id, p.device_id, h.live_bytes DESC NULLS LAST, h.holder;
