-- memset: memory sets grouped by the kind of memory written, with their time statistics, bytes and throughput (nsys stats lists them as '[CUDA memset]').
-- input: memset
-- param trace_id: only this trace (NULL: every trace in the workspace)
-- param per_trace: true to give each trace its own rows, percentages taken within the trace
-- column trace_id if per_trace: trace of the row (trace.trace_id)
-- column kind: memory kind written (memset.mem_kind), e.g. 'Device'; 'Unknown' when not recorded
-- column calls: number of memsets
-- column total_ns: summed memset time in ns
-- column pct: total_ns as a percentage of the summed time of all memsets in the report (after --where; within the trace with per_trace), not of wall time
-- column range_pct if range: with --range: the row's time as a percentage of the GPU time of the matching ranges (the summed durations of the GPU operations they hold, each once: kernels, copies, memsets and whole-graph executions), not of the report's rows
-- column avg_ns: mean memset time in ns, rounded to 0.1 ns
-- column med_ns: median memset time in ns (the mean of the two middle values for an even count)
-- column min_ns: shortest memset in ns
-- column max_ns: longest memset in ns
-- column stddev_ns: sample standard deviation of the memset time in ns (n - 1 denominator, as nsys stats), rounded to 0.1 ns; 0 for a single memset
-- column total_bytes: bytes set, summed
-- column avg_bytes: mean bytes per memset, rounded to 0.1
-- column min_bytes: smallest memset in bytes
-- column max_bytes: largest memset in bytes
-- column gb_per_s: throughput, total_bytes / total_ns (bytes per ns = GB/s with 1 GB = 1e9 bytes)
-- label pct: Time(%) of all memsets
-- label gb_per_s: GB/s
-- label range_pct: Range(%) of its GPU time
WITH input AS (
    SELECT *, coalesce(mem_kind, 'Unknown') AS kind
    FROM memset
    WHERE ($trace_id IS NULL OR trace_id = $trace_id)
      AND /* where */ TRUE
),
/* include: transfer_report */
