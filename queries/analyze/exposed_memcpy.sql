-- analyze/exposed_memcpy: memory copies (host to device, device to host, device to device, peer) and the part of each during which no kernel ran on the same GPU: time the GPU only moved data, which a copy overlapped with computation, or not made at all, gives back.
-- param trace_id: only this trace (NULL: every trace in the workspace)
-- param min_exposed_ns: a copy counts when at least this much of it was exposed, in ns
-- default min_exposed_ns: 1
-- advice: Copy less, and overlap what remains: keep tensors on the GPU across iterations instead of moving them back and forth (the model, optimizer state, constants), copy the next batch while this one computes (pinned host memory, non_blocking=True, a side stream or DataLoader(pin_memory=True) with prefetching), move fewer bytes (a smaller dtype, only the slice needed), and batch many small copies into one. A device-to-device copy is often one a view would avoid (.contiguous(), .clone(), DDP's gradient copies: gradient_as_bucket_view=True). Exposed time that remains is the link's share: compare each direction's GB/s with the bus.
-- finding: copy, copies
-- group: copy_kind
-- total: copy_ns
-- show: at_ns, device_id, copy_ns, exposed_ns, bytes, gb_per_s, range_path
-- column trace_id: trace (trace.trace_id)
-- column device_id: GPU of the copy
-- column stream_id: its stream
-- column copy_kind: direction of the copy (memcpy.copy_kind)
-- column bytes: bytes copied
-- column ts: GPU start of the copy in ns (trace clock)
-- column at_ns: GPU start in ns after the trace's start
-- column copy_ns: GPU duration of the copy in ns
-- column overlapped_ns: the part of it during which at least one kernel (or a CUDA graph traced whole) ran on the same GPU, in ns
-- column exposed_ns: copy_ns - overlapped_ns: the part no kernel hid
-- column recoverable_ns: exposed_ns
-- column overlap_pct: overlapped_ns as a percentage of copy_ns
-- column gb_per_s: throughput, bytes / copy_ns (bytes per ns = GB/s with 1 GB = 1e9 bytes)
-- column range_path: the innermost NVTX range holding its launching call (nvtx_range.path via op_range), NULL when none
-- column pid: process that launched it
-- column tid: thread that launched it
-- column thread: that thread's name (thread.thread_name)
-- label at_ns: at
-- label device_id: GPU
-- label copy_ns: copy
-- label overlapped_ns: overlapped
-- label exposed_ns: exposed
-- label recoverable_ns: recoverable
-- label overlap_pct: overlap %
-- label gb_per_s: GB/s
--
-- As exposed_comm: the overlap of a copy [s, e) with the GPU's kernels is covered(e) - covered(s),
-- covered(t) being the kernels' busy time before t: their busy islands (one window sweep) with a
-- running sum, looked up by ASOF joins at both ends (schemas/include/busy_overlap.sql). No
-- interval join. Copies that overlap each
-- other each count their own exposed part (as the communication kernels of exposed_comm do);
-- `report --by breakdown` counts the GPU's copy-only time once.
WITH copies AS (
    SELECT m.trace_id, m.memcpy_id AS op_id, m.device_id, m.stream_id, m.copy_kind, m.bytes, m.ts,
           m.ts + m.dur AS end_ts, l.pid, l.tid
    FROM memcpy m
    LEFT JOIN launch l ON l.trace_id = m.trace_id AND l.op_id = m.memcpy_id AND l.op_kind = 'memcpy'
    WHERE ($trace_id IS NULL OR m.trace_id = $trace_id) AND m.dur > 0
),
kernels AS (  -- every kernel of the GPUs that copy, and CUDA graphs traced whole (they run kernels)
    SELECT w.trace_id, w.device_id, w.op_id, w.ts, w.ts + w.dur AS end_ts
    FROM (
        /* include: gpu_work(graph_op_id = -1 - exec_row_id) */
    ) w SEMI JOIN (SELECT DISTINCT trace_id, device_id FROM copies) d
      ON d.trace_id = w.trace_id AND d.device_id IS NOT DISTINCT FROM w.device_id
    WHERE w.op_kind IN ('kernel', 'graph') AND ($trace_id IS NULL OR w.trace_id = $trace_id)
),
/* include: busy_islands(rows = kernels; partition = trace_id, device_id; order = ts, end_ts, op_id) */,
/* include: busy_overlap(rows = copies) */,
measured AS (
    SELECT *, end_ts - ts AS copy_ns FROM overlapped
)
SELECT
    c.trace_id, c.device_id, c.stream_id, c.copy_kind, c.bytes, c.ts, c.ts - t.start_ts AS at_ns, c.copy_ns,
    c.overlapped_ns, c.copy_ns - c.overlapped_ns AS exposed_ns, c.copy_ns - c.overlapped_ns AS recoverable_ns,
    100.0 * c.overlapped_ns / c.copy_ns AS overlap_pct, c.bytes / c.copy_ns AS gb_per_s, r.path AS range_path,
    c.pid, c.tid, th.thread_name AS thread
FROM measured c
JOIN trace t ON t.trace_id = c.trace_id
LEFT JOIN op_range o ON o.trace_id = c.trace_id AND o.op_id = c.op_id AND o.is_innermost
LEFT JOIN nvtx_range r ON r.trace_id = o.trace_id AND r.range_id = o.range_id
LEFT JOIN thread th ON th.trace_id = c.trace_id AND th.pid = c.pid AND th.tid = c.tid
WHERE c.copy_ns - c.overlapped_ns >= $min_exposed_ns
ORDER BY recoverable_ns DESC, c.trace_id, c.ts;
