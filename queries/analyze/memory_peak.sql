-- analyze/memory_peak: GPUs whose memory in use came within headroom_pct of the GPU's memory: the peak of allocated memory, or of the allocator's reserved memory where the source records it, against the device's total memory as the trace records it; one row per GPU. A run this close to the limit fails with out-of-memory on a larger batch or input, or on a GPU with less memory.
-- param trace_id: only this trace (NULL: every trace in the workspace)
-- param headroom_pct: a GPU counts when its peak in use leaves at most this percentage of its memory free
-- default headroom_pct: 10
-- advice: Make room before it fails: activation checkpointing (torch.utils.checkpoint), mixed precision (bf16/fp16 activations), a smaller micro-batch with gradient accumulation, sharding optimizer state and parameters (ZeRO, FSDP), freeing tensors sooner (del, set_to_none=True for gradients); when reserved is far above allocated, fragmentation: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.
-- finding: GPU, GPUs
-- cost: memory
-- total: peak_bytes
-- show: device_id, peak_bytes, peak_reserved_bytes, capacity_bytes, peak_pct, peak_at_ns
-- column trace_id: trace (trace.trace_id)
-- column device_id: the GPU (memory_event.device_id)
-- column peak_bytes: the GPU's peak of allocated device memory (the largest memory_event.allocated)
-- column peak_reserved_bytes: the largest reserved (memory_event.reserved); NULL when the source does not record it
-- column capacity_bytes: the GPU's memory in bytes (device.total_memory)
-- column in_use_bytes: the larger of peak_bytes and peak_reserved_bytes: what the process held of the GPU's memory at most
-- column peak_pct: in_use_bytes as a percentage of capacity_bytes
-- column headroom_bytes: capacity_bytes - in_use_bytes
-- column peak_at_ns: when in_use_bytes was first reached, in ns after the trace's start
-- column recoverable_ns: 0: a peak costs memory, not time (NULL on an abstention row)
-- column note: why the rule abstains (one row per GPU with memory events whose memory the trace does not record), else NULL
-- label peak_bytes: peak allocated
-- label peak_reserved_bytes: peak reserved
-- label capacity_bytes: GPU memory
-- label in_use_bytes: in use
-- label peak_pct: % of GPU
-- label headroom_bytes: headroom
-- label peak_at_ns: peak at
-- label recoverable_ns: recoverable
--
-- Other processes on the same GPU and the CUDA context itself (a few hundred MB) use memory the
-- trace does not show, so the real headroom is smaller than headroom_bytes.
WITH gpu_mem AS (
    SELECT trace_id, memory_event_id, device_id, ts, allocated, reserved,
           greatest(allocated, coalesce(reserved, 0)) AS in_use,
           max(greatest(allocated, coalesce(reserved, 0))) OVER (PARTITION BY trace_id, device_id) AS top
    FROM memory_event
    WHERE ($trace_id IS NULL OR trace_id = $trace_id) AND mem_kind = 'Device' AND device_id IS NOT NULL
),
peaks AS (
    SELECT trace_id, device_id, max(allocated) AS peak_bytes, max(reserved) AS peak_reserved_bytes,
           max(in_use) AS in_use_bytes,
           arg_min(ts, memory_event_id) FILTER (WHERE in_use = top) AS peak_ts
    FROM gpu_mem
    GROUP BY trace_id, device_id
),
sized AS (
    SELECT p.*, d.total_memory AS capacity_bytes, p.peak_ts - t.start_ts AS peak_at_ns
    FROM peaks p
    JOIN trace t ON t.trace_id = p.trace_id
    LEFT JOIN device d ON d.trace_id = p.trace_id AND d.device_id = p.device_id
)
SELECT trace_id, device_id, peak_bytes, peak_reserved_bytes, capacity_bytes, in_use_bytes,
       round(100.0 * in_use_bytes / capacity_bytes, 2) AS peak_pct, capacity_bytes - in_use_bytes AS headroom_bytes,
       peak_at_ns,
       CASE WHEN capacity_bytes > 0 THEN CAST(0 AS BIGINT) END AS recoverable_ns,
       CASE WHEN NOT capacity_bytes > 0 OR capacity_bytes IS NULL
            THEN 'the trace does not record the memory of GPU ' || device_id || ' (device.total_memory)' END AS note
FROM sized
WHERE NOT capacity_bytes > 0 OR capacity_bytes IS NULL OR 100.0 * in_use_bytes / capacity_bytes >= 100 - $headroom_pct
ORDER BY peak_pct DESC NULLS LAST, trace_id, device_id;
