-- analyze/allocator_churn: device memory allocated and given back to the driver again and again inside steady-state iterations: per GPU, iteration and size, the pairs of a device allocation (cudaMalloc) and a free (cudaFree) of the same size, when there are at least min_pairs; each such call synchronizes the device and costs far more than reusing a cached block.
-- param trace_id: only this trace (NULL: every trace in the workspace)
-- param name: use the NVTX ranges of this grouping name (nvtx_range.group_name) as the iterations instead of PyTorch's ProfilerStep ranges
-- param skip_iterations: the first iterations left out as warm-up (the caching allocator reserves its segments in them)
-- default skip_iterations: 1
-- param min_pairs: a GPU, iteration and size count when at least this many allocation/free pairs of that size happen in the iteration
-- default min_pairs: 2
-- advice: Keep device memory allocated across iterations: allocate buffers once and reuse them, let PyTorch's caching allocator keep its segments (no torch.cuda.empty_cache() in the loop; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True when fragmentation forces new segments), use a memory pool (cudaMallocAsync / cudaMemPool, CUDA graphs' private pools) instead of cudaMalloc/cudaFree per step.
-- finding: size in an iteration, sizes in iterations
-- cost: memory
-- group: source
-- total: pairs
-- show: device_id, iteration, size_bytes, pairs, allocations, frees, churned_bytes
-- column trace_id: trace (trace.trace_id)
-- column device_id: the GPU (memory_event.device_id)
-- column iteration: the iteration's range name (e.g. 'ProfilerStep#3')
-- column source: what the allocations are: 'cudaMalloc' (nsys's CUDA_GPU_MEMORY_USAGE_EVENTS: driver allocations) or 'reserved' (changes of the PyTorch caching allocator's Total Reserved: the segments it takes from and gives back to the driver)
-- column size_bytes: the size of each allocation and free
-- column pairs: allocation/free pairs of this size in the iteration: the smaller of allocations and frees
-- column allocations: device allocations of this size in the iteration
-- column frees: frees of this size in the iteration
-- column churned_bytes: pairs * size_bytes
-- column recoverable_ns: 0: the rule counts allocator calls, not their time (NULL on an abstention row)
-- column note: why the rule abstains (one row per trace with GPU memory events but no device allocations to see or no iterations), else NULL
-- label size_bytes: size
-- label churned_bytes: churned
-- label recoverable_ns: recoverable
--
-- PyTorch's '[memory]' events are the caching allocator's blocks, most of them served from memory
-- it keeps reserved: they are no driver calls. What reaches the driver shows as a change of Total
-- Reserved between two events (one segment reserved or released); PyTorch traces before 2022
-- record no reserved total, and the rule abstains on them.
WITH
/* include: memory_steps */,
sourced AS (
    SELECT i.trace_id, i.device_id, i.step, i.step_name, i.memory_event_id,
           CASE WHEN t.source_format = 'kineto'
                THEN i.reserved - lag(i.reserved) OVER (PARTITION BY i.trace_id, i.device_id ORDER BY i.memory_event_id)
                ELSE i.bytes END AS segment_bytes,
           CASE WHEN t.source_format = 'kineto' THEN 'reserved' ELSE 'cudaMalloc' END AS source
    FROM in_step i
    JOIN trace t ON t.trace_id = i.trace_id
),
sized AS (
    SELECT trace_id, device_id, step, step_name AS iteration, source, abs(segment_bytes) AS size_bytes,
           count(*) FILTER (WHERE segment_bytes > 0) AS allocations, count(*) FILTER (WHERE segment_bytes < 0) AS frees
    FROM sourced
    WHERE step > $skip_iterations AND segment_bytes <> 0
    GROUP BY ALL
),
found AS (
    SELECT trace_id, device_id, iteration, source, size_bytes, least(allocations, frees) AS pairs, allocations, frees,
           least(allocations, frees) * size_bytes AS churned_bytes, CAST(0 AS BIGINT) AS recoverable_ns,
           CAST(NULL AS VARCHAR) AS note, step
    FROM sized
    WHERE least(allocations, frees) >= $min_pairs
),
traces AS (
    SELECT trace_id, bool_or(segment_bytes IS NOT NULL) AS sees_driver,
           count(DISTINCT step) FILTER (WHERE step > $skip_iterations) AS iterations
    FROM sourced GROUP BY ALL
),
abstain AS (
    SELECT trace_id, CAST(NULL AS BIGINT) AS recoverable_ns,
           CASE WHEN NOT sees_driver
                THEN 'the trace records the caching allocator''s blocks only, not its device allocations (no Total Reserved: PyTorch before 2022)'
                ELSE 'GPU memory events in no steady-state iteration (after skipping ' || $skip_iterations || ')'
                     || CASE WHEN $name IS NULL THEN ' (iterations: ProfilerStep ranges; another NVTX range: --param name=RANGE)'
                             ELSE ' (iterations: NVTX ranges named ' || $name || ')' END END AS note
    FROM traces
    WHERE NOT sees_driver OR iterations = 0
)
SELECT * EXCLUDE (step) FROM (SELECT * FROM found UNION ALL BY NAME SELECT * FROM abstain)
ORDER BY recoverable_ns DESC NULLS LAST, churned_bytes DESC NULLS LAST, trace_id, device_id, step, size_bytes;
