-- gpu_trace: one row per GPU operation (kernel, copy, memset) in time order with its launch configuration, bytes, memory kinds, device, context and stream, like nvprof --print-gpu-trace and nsys nvprof's "CUDA Kernel & Memory Operations Trace".
-- input: gpu_op
-- param trace_id: only this trace (NULL: every trace in the workspace)
-- param per_trace: true to give each trace its rows apart (a trace_id column first)
-- column trace_id if per_trace: trace of the row (trace.trace_id)
-- column start_ns: start on the GPU in ns after the trace's first recorded event (trace.start_ts; add it back for the trace clock)
-- column dur_ns: duration in ns
-- column correlation_id: id of the launching API call within its process (api_call.correlation_id)
-- column grid: grid size in blocks, 'XxYxZ' as report --by kernel --with-dims writes it (kernels; NULL for copies and memsets)
-- column block: block size in threads, 'XxYxZ'
-- column registers: registers per thread
-- column static_smem: static shared memory per block in bytes
-- column dynamic_smem: dynamic shared memory per block in bytes
-- column bytes: bytes copied or set (copies and memsets; NULL for kernels)
-- column gb_per_s: throughput of a copy or memset, bytes / dur_ns (bytes per ns = GB/s with 1 GB = 1e9 bytes; nvprof's MB/s divided by 1000)
-- column src_kind: memory kind of a copy's source ('Pinned', 'Pageable', 'Device', ...)
-- column dst_kind: memory kind of a copy's destination, or of the memory a memset writes
-- column device: the GPU, its name and id as nvprof prints it ('NVIDIA GeForce RTX 3080 (0)'; the id alone when the trace names no GPU)
-- column context_id: CUDA context id
-- column stream_id: CUDA stream id
-- column name: kernel name, or '[CUDA memcpy <direction>]' / '[CUDA memset]'; copies of nvprof traces with nvprof's own direction labels ('[CUDA memcpy HtoD]'), those of other sources as gpu_op names them ('[CUDA memcpy Host-to-Device]')
-- column op_id: the operation (gpu_op.op_id)
-- label correlation_id: CorrId
-- label registers: Reg/Trd
-- label static_smem: StcSMem
-- label dynamic_smem: DymSMem
-- label gb_per_s: GB/s
-- label src_kind: SrcMemKd
-- label dst_kind: DstMemKd
-- label context_id: Ctx
-- label stream_id: Strm
--
-- Kernel, copy and memset rows are joined to their own table on (trace, id), each id once: hash
-- joins, no interval condition.
WITH input AS (
    SELECT *
    FROM gpu_op
    WHERE ($trace_id IS NULL OR trace_id = $trace_id)
      AND /* where */ TRUE
)
SELECT
    CASE WHEN $per_trace THEN g.trace_id END AS trace_id,
    g.ts - t.start_ts AS start_ns,
    g.dur AS dur_ns,
    g.correlation_id,
    CASE WHEN g.op_kind = 'kernel' THEN concat_ws('x', k.grid_x, k.grid_y, k.grid_z) END AS grid,
    CASE WHEN g.op_kind = 'kernel' THEN concat_ws('x', k.block_x, k.block_y, k.block_z) END AS block,
    k.registers_per_thread AS registers,
    k.static_shared_memory AS static_smem,
    k.dynamic_shared_memory AS dynamic_smem,
    g.bytes,
    CASE WHEN g.op_kind <> 'kernel' THEN g.bytes / nullif(g.dur, 0) END AS gb_per_s,
    c.src_kind,
    coalesce(c.dst_kind, s.mem_kind) AS dst_kind,
    CASE WHEN d.name IS NOT NULL THEN d.name || ' (' || CAST(g.device_id AS VARCHAR) || ')'
         ELSE CAST(g.device_id AS VARCHAR) END AS device,
    coalesce(k.context_id, c.context_id, s.context_id) AS context_id,
    g.stream_id,
    CASE WHEN g.op_kind = 'memcpy' AND t.source_format = 'nvprof' AND c.copy_kind IS NOT NULL
         THEN '[CUDA memcpy ' || replace(replace(replace(replace(replace(c.copy_kind, 'Host', 'H'), 'Device', 'D'),
                                                   'Array', 'A'), 'Peer', 'P'), '-to-', 'to') || ']'
         ELSE g.name END AS name,
    g.op_id
FROM input g
JOIN trace t ON t.trace_id = g.trace_id
-- each operation's own row, by equality keys alone (an id of another kind is NULL and matches
-- nothing): a condition on g alone in the ON clause made DuckDB loop over every pair (a blockwise
-- nested-loop join: 107 s for 250 k kernels, against a second)
LEFT JOIN kernel k ON k.trace_id = g.trace_id AND k.kernel_id = CASE WHEN g.op_kind = 'kernel' THEN g.op_id END
LEFT JOIN memcpy c ON c.trace_id = g.trace_id AND c.memcpy_id = CASE WHEN g.op_kind = 'memcpy' THEN g.op_id END
LEFT JOIN memset s ON s.trace_id = g.trace_id AND s.memset_id = CASE WHEN g.op_kind = 'memset' THEN g.op_id END
LEFT JOIN device d ON d.trace_id = g.trace_id AND d.device_id = g.device_id
ORDER BY g.trace_id, g.ts, g.op_id;
