-- analyze/exposed_comm: communication kernels (NCCL and other collectives, launch.category) and the part of each that no compute kernel on the same GPU overlapped: exposed communication, which the whole job waits for.
-- param trace_id: only this trace (NULL: every trace in the workspace)
-- param min_exposed_ns: a communication kernel counts when at least this much of it was exposed, in ns
-- default min_exposed_ns: 1
-- advice: Overlap communication with computation: bucket gradients so that all-reduces start during the backward pass (DDP bucket_cap_mb, FSDP prefetching), run collectives on their own stream, avoid synchronizing before them; exposed time that remains is the network's share (larger messages, fewer collectives, faster links). A collective that waits for a slower rank shows as exposed too: compare ranks.
-- finding: communication kernel, communication kernels
-- group: device_id
-- total: comm_ns
-- show: at_ns, comm_ns, exposed_ns, overlap_pct, name
-- column trace_id: trace (trace.trace_id)
-- column device_id: GPU that ran the kernel
-- column stream_id: its stream
-- column ts: GPU start of the kernel in ns (trace clock)
-- column at_ns: GPU start in ns after the trace's start
-- column comm_ns: duration of the communication kernel in ns
-- column overlapped_ns: the part of it during which at least one compute kernel ran on the same GPU, in ns
-- column exposed_ns: comm_ns - overlapped_ns: the part no computation hid
-- column recoverable_ns: exposed_ns
-- column overlap_pct: overlapped_ns as a percentage of comm_ns
-- column name: kernel name (kernel.name)
-- column range_path: the innermost NVTX range holding its launching call (nvtx_range.path via op_range), NULL when none
-- column pid: process that launched it
-- column tid: thread that launched it
-- column thread: that thread's name (thread.thread_name)
-- label at_ns: at
-- label device_id: GPU
-- label comm_ns: comm
-- label overlapped_ns: overlapped
-- label exposed_ns: exposed
-- label recoverable_ns: recoverable
-- label overlap_pct: overlap %
--
-- The overlap of a kernel [s, e) with the GPU's compute is covered(e) - covered(s), covered(t)
-- being the compute busy time before t: the compute kernels' busy islands (one window sweep) with
-- their running sum, looked up by ASOF joins at both ends (schemas/include/busy_overlap.sql). No
-- interval join.
WITH cat AS (
    SELECT o.trace_id, o.device_id, o.stream_id, o.op_id, o.ts, o.ts + o.dur AS end_ts, o.name, l.category,
           l.pid, l.tid
    FROM gpu_op o
    JOIN launch l ON l.trace_id = o.trace_id AND l.op_id = o.op_id
    WHERE ($trace_id IS NULL OR o.trace_id = $trace_id) AND l.category IN ('compute', 'communication')
    UNION ALL  -- a CUDA graph traced whole (graph_exec) computes: it hides communication as a kernel does
    SELECT trace_id, device_id, stream_id, -1 - exec_row_id, ts, ts + dur, '[CUDA graph ' || coalesce(CAST(graph_id AS VARCHAR), '?') || ']',
           'compute', pid, CAST(NULL AS BIGINT)
    FROM graph_exec WHERE ($trace_id IS NULL OR trace_id = $trace_id)
),
comm AS (
    SELECT * FROM cat WHERE category = 'communication'
),
busy_ops AS (  -- the compute kernels of the GPUs that communicate
    SELECT c.* FROM cat c SEMI JOIN (SELECT DISTINCT trace_id, device_id FROM comm) d
      ON d.trace_id = c.trace_id AND d.device_id IS NOT DISTINCT FROM c.device_id
    WHERE c.category = 'compute'
),
/* include: busy_islands(rows = busy_ops; partition = trace_id, device_id; order = ts, end_ts, op_id) */,
/* include: busy_overlap(rows = comm) */,
measured AS (
    SELECT *, end_ts - ts AS comm_ns FROM overlapped
)
SELECT
    k.trace_id, k.device_id, k.stream_id, k.ts, k.ts - t.start_ts AS at_ns, k.comm_ns, k.overlapped_ns,
    k.comm_ns - k.overlapped_ns AS exposed_ns, k.comm_ns - k.overlapped_ns AS recoverable_ns,
    100.0 * k.overlapped_ns / nullif(k.comm_ns, 0) AS overlap_pct, k.name, r.path AS range_path,
    k.pid, k.tid, th.thread_name AS thread
FROM measured k
JOIN trace t ON t.trace_id = k.trace_id
LEFT JOIN op_range o ON o.trace_id = k.trace_id AND o.op_id = k.op_id AND o.is_innermost
LEFT JOIN nvtx_range r ON r.trace_id = o.trace_id AND r.range_id = o.range_id
LEFT JOIN thread th ON th.trace_id = k.trace_id AND th.pid = k.pid AND th.tid = k.tid
WHERE k.comm_ns - k.overlapped_ns >= $min_exposed_ns
ORDER BY recoverable_ns DESC, k.trace_id, k.ts;
