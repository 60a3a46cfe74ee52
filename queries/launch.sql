-- launch: kernels grouped by name with the time of their launching API calls, their queue delay (launch call end to kernel start) and their execution time, like nsys stats cuda_kern_exec_sum.
-- input: kernel
-- param trace_id: only this trace (NULL: every trace in the workspace)
-- param per_trace: true to give each trace its own rows, percentages taken within the trace
-- column trace_id if per_trace: trace of the row (trace.trace_id)
-- column name: kernel name, demangled (kernel.name)
-- column calls: kernel executions
-- column launched: executions whose launching API call was found (launch.api_id not NULL)
-- column api_calls: distinct launching calls of those executions: one cudaGraphLaunch that ran several kernel nodes of this name (--cuda-graph-trace=node) counts once, an ordinary launch once per kernel
-- column api_total_ns: summed duration of the distinct launching calls in ns, each call once however many of the row's executions it launched (NULL when none was found); a call that launched kernels of several names counts in each of their rows
-- column api_avg_ns: mean duration of the distinct launching calls in ns (api_total_ns / api_calls), rounded to 0.1 ns
-- column queued: executions with a queue delay (the launch call ended before the kernel started)
-- column queue_avg_ns: mean queue delay in ns, rounded to 0.1 ns: kernel start minus the end of its launching call (launch.queue_delay), per execution: each graph-node kernel counts, its delay taken from the end of its cudaGraphLaunch
-- column queue_med_ns: median queue delay in ns
-- column queue_min_ns: shortest queue delay in ns
-- column queue_max_ns: longest queue delay in ns
-- column kernel_total_ns: summed kernel execution time in ns (not wall time)
-- column kernel_pct: kernel_total_ns as a percentage of the summed execution time of all kernels in the report (after --where; within the trace with per_trace)
-- column range_pct if range: with --range: the row's time as a percentage of the GPU time of the matching ranges (the summed durations of the GPU operations they hold, each once: kernels, copies, memsets and whole-graph executions), not of the report's rows
-- column kernel_avg_ns: mean kernel execution time in ns, rounded to 0.1 ns
-- column total_avg_ns: mean time from the start of the launching call to the later of the call's end and the kernel's end, in ns, rounded to 0.1 ns (nsys 'Total Dur'), per execution
-- column api_names: launching API functions seen, joined by ', '
-- label kernel_pct: Kernel time(%) of all kernels
-- label range_pct: Range(%) of its GPU time
--
-- Graph launches: under --cuda-graph-trace=node every node of a cudaGraphLaunch is a kernel row
-- whose correlation id is that call's, so N nodes name one call N times. The API figures take
-- each (row, call) pair once (first_of_call); counts of executions, queue delays and kernel
-- times stay per execution. Only the calls that launched several kernels (shared, usually
-- none) are ranked: on 300 k kernels this costs 0.06 s against 0.04 s without it, where a
-- ranking of every execution took 0.12 s. Whole-graph executions of --cuda-graph-trace=graph
-- are no kernels: they are in graph_exec and in report --by gpu, not here.
WITH input AS (
    SELECT *
    FROM kernel
    WHERE ($trace_id IS NULL OR trace_id = $trace_id)
      AND /* where */ TRUE
),
-- the (trace, call) pairs that launched more than one kernel: graph launches in node mode
shared AS (
    SELECT trace_id, api_id
    FROM launch
    WHERE op_kind = 'kernel' AND api_id IS NOT NULL AND ($trace_id IS NULL OR trace_id = $trace_id)
    GROUP BY trace_id, api_id
    HAVING count(*) > 1
),
-- of those, the executions after the first of each (trace, name, call): their call is counted already
repeated AS (
    SELECT k.trace_id, k.kernel_id
    FROM input k
    JOIN launch l ON l.trace_id = k.trace_id AND l.op_id = k.kernel_id AND l.op_kind = 'kernel'
    SEMI JOIN shared s ON s.trace_id = l.trace_id AND s.api_id = l.api_id
    QUALIFY row_number() OVER (PARTITION BY k.trace_id, k.name, l.api_id ORDER BY k.kernel_id) > 1
),
joined AS (
    SELECT
        k.trace_id, k.name, k.dur,
        l.api_id, l.api_dur, l.api_name, l.queue_delay,
        greatest(l.api_ts + l.api_dur, k.ts + k.dur) - l.api_ts AS launch_to_end,
        l.api_id IS NOT NULL AND r.kernel_id IS NULL AS first_of_call
    FROM input k
    LEFT JOIN launch l ON l.trace_id = k.trace_id AND l.op_id = k.kernel_id AND l.op_kind = 'kernel'
    LEFT JOIN repeated r ON r.trace_id = k.trace_id AND r.kernel_id = k.kernel_id
),
grouped AS (
    SELECT
        CASE WHEN $per_trace THEN trace_id END AS trace_id,
        name,
        count(*) AS calls,
        count(api_id) AS launched,
        count(*) FILTER (WHERE first_of_call) AS api_calls,
        sum(api_dur) FILTER (WHERE first_of_call) AS api_total_ns,
        round(avg(api_dur) FILTER (WHERE first_of_call), 1) AS api_avg_ns,
        count(queue_delay) AS queued,
        round(avg(queue_delay), 1) AS queue_avg_ns,
        median(queue_delay) AS queue_med_ns,
        min(queue_delay) AS queue_min_ns,
        max(queue_delay) AS queue_max_ns,
        sum(dur) AS kernel_total_ns,
        round(avg(dur), 1) AS kernel_avg_ns,
        round(avg(launch_to_end), 1) AS total_avg_ns,
        string_agg(DISTINCT api_name, ', ' ORDER BY api_name) AS api_names
    FROM joined
    GROUP BY 1, 2
)
SELECT
    trace_id, name, calls, launched, api_calls,
    TRY_CAST(api_total_ns AS BIGINT) AS api_total_ns, api_avg_ns,
    queued, queue_avg_ns, queue_med_ns, queue_min_ns, queue_max_ns,
    TRY_CAST(kernel_total_ns AS BIGINT) AS kernel_total_ns,
    100.0 * kernel_total_ns / nullif(sum(kernel_total_ns) OVER (PARTITION BY trace_id), 0) AS kernel_pct,
    kernel_avg_ns, total_avg_ns, api_names
FROM grouped
ORDER BY trace_id NULLS FIRST, kernel_total_ns DESC, name;
