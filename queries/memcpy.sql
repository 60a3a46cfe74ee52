-- memcpy: memory copies grouped by direction (copy kind) with their time statistics, bytes and throughput, like nsys stats cuda_gpu_mem_time_sum and cuda_gpu_mem_size_sum together.
-- input: memcpy
-- param trace_id: only this trace (NULL: every trace in the workspace)
-- param per_trace: true to give each trace its own rows, percentages taken within the trace
-- column trace_id if per_trace: trace of the row (trace.trace_id)
-- column kind: copy direction (memcpy.copy_kind), e.g. 'Host-to-Device'; 'Unknown' when not recorded
-- column calls: number of copies
-- column total_ns: summed copy time in ns
-- column pct: total_ns as a percentage of the summed time of all copies in the report (after --where; within the trace with per_trace), not of wall time
-- column range_pct if range: with --range: the row's time as a percentage of the GPU time of the matching ranges (the summed durations of the GPU operations they hold, each once: kernels, copies, memsets and whole-graph executions), not of the report's rows
-- column avg_ns: mean copy time in ns, rounded to 0.1 ns
-- column med_ns: median copy time in ns (the mean of the two middle values for an even count)
-- column min_ns: shortest copy in ns
-- column max_ns: longest copy in ns
-- column stddev_ns: sample standard deviation of the copy time in ns (n - 1 denominator, as nsys stats), rounded to 0.1 ns; 0 for a single copy
-- column total_bytes: bytes copied, summed
-- column avg_bytes: mean bytes per copy, rounded to 0.1
-- column min_bytes: smallest copy in bytes
-- column max_bytes: largest copy in bytes
-- column gb_per_s: throughput, total_bytes / total_ns (bytes per ns = GB/s with 1 GB = 1e9 bytes)
-- label pct: Time(%) of all copies
-- label gb_per_s: GB/s
-- label range_pct: Range(%) of its GPU time
WITH input AS (
    SELECT *, coalesce(copy_kind, 'Unknown') AS kind
    FROM memcpy
    WHERE ($trace_id IS NULL OR trace_id = $trace_id)
      AND /* where */ TRUE
),
/* include: transfer_report */
