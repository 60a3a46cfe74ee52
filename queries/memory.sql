-- memory: each GPU's peak of allocated memory, when it was reached (time and iteration), and who held the memory then: the allocations live at the peak grouped by the op / NVTX path and the code line that made them, largest first; with per_iteration, the peak of each iteration.
-- input: memory_event
-- shown: device, peak_bytes, peak_at_ns, iteration, start_bytes, end_bytes, reserved_bytes, holder, location, live_bytes, allocations, pct
-- param trace_id: only this trace (NULL: every trace in the workspace)
-- param per_trace: accepted for symmetry with the other reports: every row is one trace's GPU already
-- param per_iteration: true for the peak of each iteration (and who held the memory then) instead of the capture's
-- default per_iteration: false
-- param name: the NVTX ranges of this grouping name (nvtx_range.group_name) are the iterations instead of PyTorch's ProfilerStep ranges
-- column trace_id: trace of the GPU (trace.trace_id)
-- column device: GPU (memory_event.device_id)
-- column peak_bytes: the GPU's peak of allocated device memory (the largest memory_event.allocated: the allocator's recorded total, or the running sum of the capture's allocations and frees), over the capture or, with per_iteration, over the iteration's events
-- column peak_at_ns: when the GPU first reached its peak, in ns after the trace's start
-- column iteration: the iteration open at the peak (the PyTorch profiler step, ProfilerStep#N, or the range named by name); NULL when none is
-- column step if per_iteration: the iteration's number, 1 for the first by start
-- column start_bytes if per_iteration: allocated device memory when the iteration began: after the GPU's last memory event before it (when none: before its first event, the recorded total or running sum less that event's bytes)
-- column end_bytes if per_iteration: allocated device memory after the GPU's last memory event of the iteration
-- column reserved_bytes: bytes the allocator had reserved at the peak (memory_event.reserved); NULL when the source does not record it
-- column peak_reserved_bytes: the largest reserved over the capture (the iteration, with per_iteration); NULL when not recorded
-- column holder: the NVTX / op path (nvtx_range.path) of the range open where the live allocations were made; '[outside every range]' for allocations made outside every range; '[before the capture]' for what the recorded total held beyond the capture's live allocations; '[unknown: no addresses]' when the source records no addresses (PyTorch before 2022), so frees cannot be paired
-- column op: the innermost range of that path (its grouping name, nvtx_range.group_name)
-- column location: the code line the allocations were made from: the innermost frame of the user's code in their Python stack (memory_event.stack_id; call_stack.is_user, else the innermost frame), as report --by source names it; NULL when the trace records no stack (PyTorch profiler traces without with_stack=True, nsys)
-- column live_bytes: bytes of the holder's allocations live at the peak
-- column allocations: number of those allocations
-- column pct: live_bytes as a percentage of peak_bytes
-- label peak_at_ns: peak at
-- label start_bytes: at start
-- label end_bytes: at end
-- label reserved_bytes: reserved at peak
-- label peak_reserved_bytes: peak reserved
-- label live_bytes: live at peak
-- label pct: % of peak
--
-- The peak is the GPU's first event whose level equals the largest level (ties: the earliest),
-- over the capture or, with per_iteration, over the events inside each iteration (events between
-- iterations belong to none). A live allocation at the peak: an allocation of that GPU's device
-- memory at or before the peak event (in memory_event_id order, made in that iteration or
-- before) whose free (free_event_id) comes after it or not within the capture. Iterations: one
-- ASOF join of the events with the iterations of schemas/include/memory_iterations.sql.
WITH input AS (
    SELECT *
    FROM memory_event
    WHERE ($trace_id IS NULL OR trace_id = $trace_id) AND mem_kind = 'Device' AND device_id IS NOT NULL
      AND $per_trace IS NOT NULL  -- every row is one trace's GPU, with or without per_trace
      AND /* where */ TRUE
),
gpu_mem AS (
    SELECT * FROM input
),
/* include: memory_iterations */,
scoped AS (
    -- the scope of a peak: the whole capture (0), or with per_iteration the iteration
    SELECT *, CASE WHEN $per_iteration THEN step ELSE 0 END AS scope
    FROM in_step
    WHERE NOT $per_iteration OR step IS NOT NULL
),
levels AS (
    SELECT trace_id, device_id, scope, max(allocated) AS peak_bytes, max(reserved) AS peak_reserved_bytes,
           arg_max(allocated, memory_event_id) AS end_bytes, min(memory_event_id) AS first_id,
           -- the level before the scope's first event, from that event (a free that the level leaves out, of a
           -- block allocated before the capture, did not change it)
           arg_min(allocated - CASE WHEN level_source = 'running_sum' AND bytes < 0 AND address IS NOT NULL
                                         AND alloc_event_id IS NULL THEN 0 ELSE bytes END,
                   memory_event_id) AS first_before
    FROM scoped
    GROUP BY trace_id, device_id, scope
),
peak AS (
    SELECT i.trace_id, i.device_id, i.scope, l.peak_bytes, l.peak_reserved_bytes, l.end_bytes, l.first_id, l.first_before,
           arg_min(i.memory_event_id, i.memory_event_id) AS peak_id, arg_min(i.ts, i.memory_event_id) AS ts,
           arg_min(i.reserved, i.memory_event_id) AS reserved_bytes,
           arg_min(i.step, i.memory_event_id) AS step, arg_min(i.step_name, i.memory_event_id) AS iteration
    FROM scoped i
    JOIN levels l ON l.trace_id = i.trace_id AND l.device_id = i.device_id AND l.scope = i.scope
                 AND l.peak_bytes = i.allocated
    GROUP BY ALL
),
before AS (
    -- each iteration's level at its start: after the GPU's last event before the iteration's first (one ASOF
    -- join), else from that first event
    SELECT p.trace_id, p.device_id, p.scope, coalesce(b.allocated, p.first_before) AS start_bytes
    FROM peak p
    ASOF LEFT JOIN input b ON b.trace_id = p.trace_id AND b.device_id = p.device_id AND b.memory_event_id < p.first_id
),
without_address AS (
    SELECT trace_id, device_id, bool_or(address IS NULL) AS without_address FROM input GROUP BY ALL
),
placed AS (
    SELECT p.*, b.start_bytes, w.without_address
    FROM peak p
    JOIN before b ON b.trace_id = p.trace_id AND b.device_id = p.device_id AND b.scope = p.scope
    JOIN without_address w ON w.trace_id = p.trace_id AND w.device_id = p.device_id
),
live AS (
    SELECT p.trace_id, p.device_id, p.scope, a.bytes, a.range_id, a.stack_id
    FROM input a
    JOIN placed p ON p.trace_id = a.trace_id AND p.device_id = a.device_id
    WHERE a.bytes > 0 AND a.address IS NOT NULL AND a.memory_event_id <= p.peak_id
      AND (a.free_event_id IS NULL OR a.free_event_id > p.peak_id)
),
stacks AS (
    -- the code line of each stack live allocations were made from
    SELECT c.trace_id, c.stack_id,
           coalesce(arg_max(c.frame, c.level) FILTER (WHERE c.is_user), arg_max(c.frame, c.level)) AS location
    FROM call_stack c
    JOIN (SELECT DISTINCT trace_id, stack_id FROM live) l ON l.trace_id = c.trace_id AND l.stack_id = c.stack_id
    GROUP BY c.trace_id, c.stack_id
),
held AS (
    SELECT l.trace_id, l.device_id, l.scope, coalesce(r.path, '[outside every range]') AS holder, r.group_name AS op,
           s.location, sum(l.bytes) AS live_bytes, count(*) AS allocations
    FROM live l
    LEFT JOIN nvtx_range r ON r.trace_id = l.trace_id AND r.range_id = l.range_id
    LEFT JOIN stacks s ON s.trace_id = l.trace_id AND s.stack_id = l.stack_id
    GROUP BY ALL
),
held_total AS (
    SELECT trace_id, device_id, scope, sum(live_bytes) AS live_bytes FROM held GROUP BY ALL
),
rest AS (
    -- what the recorded total held beyond the capture's live allocations, and traces without addresses
    SELECT p.trace_id, p.device_id, p.scope,
           CASE WHEN p.without_address THEN '[unknown: no addresses]' ELSE '[before the capture]' END AS holder,
           CAST(NULL AS VARCHAR) AS op, CAST(NULL AS VARCHAR) AS location,
           p.peak_bytes - coalesce(h.live_bytes, 0) AS live_bytes,
           CAST(NULL AS BIGINT) AS allocations
    FROM placed p
    LEFT JOIN held_total h ON h.trace_id = p.trace_id AND h.device_id = p.device_id AND h.scope = p.scope
),
holders AS (
    SELECT * FROM held
    UNION ALL
    SELECT * FROM rest WHERE live_bytes <> 0
)
SELECT p.trace_id, p.device_id AS device, p.peak_bytes, p.ts - t.start_ts AS peak_at_ns, p.iteration, p.step,
       p.start_bytes, p.end_bytes, p.reserved_bytes, p.peak_reserved_bytes, h.holder, h.op, h.location,
       CAST(h.live_bytes AS BIGINT) AS live_bytes, h.allocations,
       100.0 * h.live_bytes / nullif(p.peak_bytes, 0) AS pct
FROM placed p
JOIN trace t ON t.trace_id = p.trace_id
LEFT JOIN holders h ON h.trace_id = p.trace_id AND h.device_id = p.device_id AND h.scope = p.scope
ORDER BY p.trace_id, p.device_id, p.scope, h.live_bytes DESC NULLS LAST, h.holder, h.location;
