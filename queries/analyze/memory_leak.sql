-- analyze/memory_leak: GPU memory that grows across iterations and is not given back: a GPU whose allocated memory at the end of every steady-state iteration is above its level at the end of the iteration before, by at least min_growth_bytes in all; one row per GPU, with the allocations of those iterations still held at the capture's end and the range that made most of them.
-- param trace_id: only this trace (NULL: every trace in the workspace)
-- param name: use the NVTX ranges of this grouping name (nvtx_range.group_name) as the iterations instead of PyTorch's ProfilerStep ranges
-- param skip_iterations: the first iterations left out as warm-up (the caching allocator, cuDNN/cuBLAS workspaces and optimizer state fill up in them)
-- default skip_iterations: 1
-- param min_iterations: fewest steady-state iterations (after skip_iterations) with memory events to compare; a trace with memory events and fewer abstains
-- default min_iterations: 3
-- param min_growth_bytes: a GPU counts when its level at the end of the last steady-state iteration is at least this many bytes above the level at the end of the first
-- default min_growth_bytes: 1048576
-- advice: Find what the listed range keeps alive from one iteration to the next: tensors appended to a Python list or history (losses kept with their graph: use loss.item() or .detach()), caches keyed by step, hooks that store activations, a growing dataloader or metric buffer. torch.cuda.memory._record_memory_history() and torch.cuda.memory._dump_snapshot() show the stack of each block still held.
-- finding: GPU, GPUs
-- cost: memory
-- total: growth_bytes
-- show: device_id, iterations, first_end_bytes, last_end_bytes, growth_bytes, unfreed_bytes, holder
-- column trace_id: trace (trace.trace_id)
-- column device_id: the GPU (memory_event.device_id)
-- column iterations: steady-state iterations compared (those after skip_iterations that hold memory events)
-- column first_iteration: name of the first of them (e.g. 'ProfilerStep#2')
-- column last_iteration: name of the last
-- column first_end_bytes: allocated device memory after the last memory event of the first iteration (memory_event.allocated)
-- column last_end_bytes: allocated device memory after the last memory event of the last iteration
-- column growth_bytes: last_end_bytes - first_end_bytes
-- column growth_per_iteration_bytes: growth_bytes / (iterations - 1), rounded down
-- column unfreed_bytes: bytes of the allocations made in the compared iterations and not freed within the capture (free_event_id NULL); NULL when the source records no addresses (PyTorch before 2022), so frees cannot be paired
-- column unfreed_allocations: number of those allocations; NULL without addresses
-- column holder: the NVTX / op path (nvtx_range.path, a leading 'ProfilerStep#N' written 'ProfilerStep#*' so that the iterations add up) of the range that made the most unfreed bytes ('[outside every range]' when outside all); NULL without addresses or when every allocation was freed
-- column recoverable_ns: 0: a leak costs memory, not time (NULL on an abstention row)
-- column note: why the rule abstains (one row per trace with GPU memory events but too few iterations), else NULL
-- label first_end_bytes: first end
-- label last_end_bytes: last end
-- label growth_bytes: growth
-- label growth_per_iteration_bytes: per iteration
-- label unfreed_bytes: unfreed
-- label unfreed_allocations: unfreed allocs
-- label recoverable_ns: recoverable
--
-- The level of an iteration is taken after its last GPU memory event (in memory_event_id order);
-- iterations without memory events on the GPU are not compared. Every steady-state iteration must
-- end above the one before (a strict rise each time): memory that grows and is given back between
-- iterations is no leak.
WITH
/* include: memory_steps */,
ends AS (
    SELECT trace_id, device_id, step, step_name, arg_max(allocated, memory_event_id) AS end_bytes
    FROM in_step
    WHERE step > $skip_iterations
    GROUP BY ALL
),
rises AS (
    SELECT *, end_bytes > lag(end_bytes) OVER (PARTITION BY trace_id, device_id ORDER BY step) AS rose
    FROM ends
),
per_gpu AS (
    SELECT trace_id, device_id, count(*) AS iterations,
           arg_min(step_name, step) AS first_iteration, arg_max(step_name, step) AS last_iteration,
           arg_min(end_bytes, step) AS first_end_bytes, arg_max(end_bytes, step) AS last_end_bytes,
           count(*) FILTER (WHERE rose) AS rising
    FROM rises
    GROUP BY trace_id, device_id
),
leaking AS (
    SELECT * FROM per_gpu
    WHERE iterations >= $min_iterations AND rising = iterations - 1
      AND last_end_bytes - first_end_bytes >= $min_growth_bytes
),
unfreed AS (
    SELECT i.trace_id, i.device_id,
           coalesce(regexp_replace(r.path, '^ProfilerStep#[0-9]+', 'ProfilerStep#*'), '[outside every range]') AS holder,
           sum(i.bytes) AS bytes, count(*) AS allocations
    FROM in_step i
    JOIN leaking g ON g.trace_id = i.trace_id AND g.device_id = i.device_id
    LEFT JOIN nvtx_range r ON r.trace_id = i.trace_id AND r.range_id = i.range_id
    WHERE i.step > $skip_iterations AND i.bytes > 0 AND i.address IS NOT NULL
      AND i.free_event_id IS NULL
    GROUP BY ALL
),
addressed AS (
    SELECT trace_id, device_id, bool_and(address IS NOT NULL) AS with_address FROM gpu_mem GROUP BY ALL
),
unfreed_gpu AS (
    SELECT trace_id, device_id, sum(bytes) AS bytes, sum(allocations) AS allocations,
           arg_max(holder, bytes) AS holder
    FROM unfreed GROUP BY ALL
),
found AS (
    SELECT g.trace_id, g.device_id, g.iterations, g.first_iteration, g.last_iteration,
           g.first_end_bytes, g.last_end_bytes, g.last_end_bytes - g.first_end_bytes AS growth_bytes,
           (g.last_end_bytes - g.first_end_bytes) // (g.iterations - 1) AS growth_per_iteration_bytes,
           CASE WHEN a.with_address THEN coalesce(u.bytes, 0) END AS unfreed_bytes,
           CASE WHEN a.with_address THEN coalesce(u.allocations, 0) END AS unfreed_allocations,
           CASE WHEN a.with_address THEN u.holder END AS holder,
           CAST(0 AS BIGINT) AS recoverable_ns, CAST(NULL AS VARCHAR) AS note
    FROM leaking g
    JOIN addressed a ON a.trace_id = g.trace_id AND a.device_id = g.device_id
    LEFT JOIN unfreed_gpu u ON u.trace_id = g.trace_id AND u.device_id = g.device_id
),
compared AS (
    SELECT trace_id, max(iterations) AS iterations FROM per_gpu GROUP BY ALL
),
abstain AS (
    SELECT DISTINCT m.trace_id, CAST(NULL AS INTEGER) AS device_id, coalesce(c.iterations, 0) AS iterations,
           NULL AS first_iteration, NULL AS last_iteration, NULL AS first_end_bytes, NULL AS last_end_bytes,
           NULL AS growth_bytes, NULL AS growth_per_iteration_bytes, NULL AS unfreed_bytes,
           NULL AS unfreed_allocations, NULL AS holder, CAST(NULL AS BIGINT) AS recoverable_ns,
           'GPU memory events in ' || coalesce(c.iterations, 0) || ' steady-state iterations (after skipping '
               || $skip_iterations || '), fewer than min_iterations = ' || $min_iterations
               || CASE WHEN $name IS NULL THEN ' (iterations: ProfilerStep ranges; another NVTX range: --param name=RANGE)'
                       ELSE ' (iterations: NVTX ranges named ' || $name || ')' END AS note
    FROM gpu_mem m
    LEFT JOIN compared c ON c.trace_id = m.trace_id
    WHERE coalesce(c.iterations, 0) < $min_iterations
)
SELECT * FROM found
UNION ALL BY NAME
SELECT * FROM abstain
ORDER BY recoverable_ns DESC NULLS LAST, growth_bytes DESC NULLS LAST, trace_id, device_id;
