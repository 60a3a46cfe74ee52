-- thread: CUDA API calls per CPU thread: call time and the GPU work those calls launched.
-- input: api_call
-- param trace_id: only this trace (NULL: every trace in the workspace)
-- param per_trace: true to give each trace its own rows, percentages taken within the trace
-- column trace_id if per_trace: trace of the row (trace.trace_id)
-- column pid: process id
-- column tid: thread id
-- column thread: thread name (thread.thread_name), NULL when unnamed
-- column calls: CUDA API calls made on the thread
-- column total_ns: summed call time in ns
-- column pct: total_ns as a percentage of the summed time of all API calls in the report (every thread; after --where; within the trace with per_trace)
-- column avg_ns: mean call time in ns, rounded to 0.1 ns
-- column max_ns: longest call in ns
-- column gpu_ops: GPU operations (kernels, copies, memsets) launched by these calls (launch table)
-- column gpu_ns: summed GPU duration of those operations in ns
-- column process: process name (thread.process_name), NULL when unknown
-- label pct: Time(%) of all API calls
WITH input AS (
    SELECT *
    FROM api_call
    WHERE ($trace_id IS NULL OR trace_id = $trace_id)
      AND /* where */ TRUE
),
launched AS (
    SELECT l.trace_id, l.api_id, count(*) AS ops, sum(o.dur) AS gpu_ns
    FROM launch l
    JOIN gpu_op o ON o.trace_id = l.trace_id AND o.op_id = l.op_id
    WHERE l.api_id IS NOT NULL AND ($trace_id IS NULL OR l.trace_id = $trace_id)
    GROUP BY 1, 2
),
names AS (
    SELECT trace_id, pid, tid, min(thread_name) AS thread_name, min(process_name) AS process_name
    FROM thread
    GROUP BY 1, 2, 3
),
grouped AS (
    SELECT
        CASE WHEN $per_trace THEN i.trace_id END AS trace_id,
        i.pid,
        i.tid,
        min(n.thread_name) AS thread,
        count(*) AS calls,
        sum(i.dur) AS total_ns,
        round(avg(i.dur), 1) AS avg_ns,
        max(i.dur) AS max_ns,
        coalesce(sum(x.ops), 0) AS gpu_ops,
        coalesce(sum(x.gpu_ns), 0) AS gpu_ns,
        min(n.process_name) AS process
    FROM input i
    LEFT JOIN launched x ON x.trace_id = i.trace_id AND x.api_id = i.api_id
    LEFT JOIN names n ON n.trace_id = i.trace_id AND n.pid = i.pid AND n.tid = i.tid
    GROUP BY 1, 2, 3
)
SELECT
    trace_id, pid, tid, thread, calls,
    TRY_CAST(total_ns AS BIGINT) AS total_ns,
    100.0 * total_ns / nullif(sum(total_ns) OVER (PARTITION BY trace_id), 0) AS pct,
    avg_ns, max_ns,
    TRY_CAST(gpu_ops AS BIGINT) AS gpu_ops,
    TRY_CAST(gpu_ns AS BIGINT) AS gpu_ns,
    process
FROM grouped
ORDER BY trace_id NULLS FIRST, total_ns DESC, pid NULLS LAST, tid NULLS LAST;
