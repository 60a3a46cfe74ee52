-- _internal/diff_per_iteration: one side of `traceql diff`, iteration by iteration, for the paired comparison and the gate: the iterations of one anchor (the same on both sides) and, per iteration, the time each kernel, PyTorch op and NVTX range path took in it, and the GPU operation time.
-- param trace_id: only this trace (NULL: every trace in the workspace, pooled as one side: iteration k of each trace together)
-- param anchor_source: how the iterations are anchored: 'ProfilerStep' or 'nvtx' (the instances of an NVTX path family) or 'kernel pace' (the starts of one kernel)
-- param anchor_family: the NVTX path with numbers written '#' (analyze/iterations' family), or the pacing kernel's name
-- param anchor_leaf: match NVTX ranges by their own grouping name with numbers written '#' (the last part of the family) instead of the whole path: the same range nested differently on the other side
-- default anchor_leaf: false
-- param max_iterations: only the first this many iterations of each trace (the pairs they give are plenty for the tests, and the rows stay few on traces of tens of thousands of iterations)
-- default max_iterations: 2000
-- param kernel_key: 'name' to align kernels by their demangled name, 'short_name' by their short name
-- default kernel_key: name
-- column section: 'iteration' (key 'iteration time': the iteration's duration; key 'iterations', on iteration 0: in total_ns the number of iterations, also beyond max_iterations), 'total' ('GPU operations': summed kernel, copy and memset time; 'communication': summed time of communication kernels, launch.category), 'kernel', 'op' (a PyTorch op and its direction: the kernels launched inside its calls) or 'range' (an NVTX range path: CPU time of its instances)
-- column key: the alignment key, as in diff/side: kernel name, 'op name (direction)', NVTX path ('ProfilerStep#N' written 'ProfilerStep#*'); for totals the metric
-- column iteration: 1-based index of the iteration (per trace; the traces of one side share the index)
-- column calls: instances in the iteration (for 'iteration time' the traces)
-- column total_ns: their summed duration in ns (for 'iteration time' the longest of the traces' iteration k: the anchor range's duration, or from one start of the pacing kernel to the next)
-- column communication: the key's kernels are communication kernels (launch.category 'communication'; for ops: one of their kernels is)
--
-- An iteration is an instance of the anchor range (the thread with the most instances of the family
-- in each trace) or, for kernel pace, the time from one start of the pacing kernel to the next (the
-- device with the most of its instances). Its work is what starts from its start to the next
-- iteration's start (the last: to its end), so that a range that covers part of the loop still
-- holds all of it. GPU work belongs to the iteration in which its launching call started when the
-- anchor is an NVTX range (the GPU runs behind the CPU), to the one in which it started itself for
-- kernel pace; NVTX ranges by their start. Work outside every iteration is left out. An event is
-- placed by sweeping the iteration starts and the events in time order (the last start before it)
-- and kept when it lies before that iteration's end (the running maximum of the window ends): no
-- interval join.
WITH anchor_ranges AS (
    SELECT r.trace_id, r.pid, r.tid, r.ts, r.dur
    FROM nvtx_range r
    WHERE $anchor_source <> 'kernel pace' AND ($trace_id IS NULL OR r.trace_id = $trace_id) AND r.dur IS NOT NULL
      AND CASE WHEN $anchor_leaf THEN regexp_replace(r.group_name, '[0-9]+', '#', 'g')
                                      = regexp_replace($anchor_family, '^.* > ', '')
               ELSE regexp_replace(r.path, '[0-9]+', '#', 'g') = $anchor_family END
),
anchor_thread AS (
    SELECT trace_id, pid, tid, count(*) AS n FROM anchor_ranges GROUP BY trace_id, pid, tid
),
range_windows AS (
    SELECT a.trace_id, a.ts, a.dur,
           coalesce(lead(a.ts) OVER (PARTITION BY a.trace_id ORDER BY a.ts, a.dur), a.ts + a.dur) AS end_ts
    FROM anchor_ranges a
    JOIN (SELECT trace_id, arg_max(pid, (n, -pid, -tid)) AS pid, arg_max(tid, (n, -pid, -tid)) AS tid
          FROM anchor_thread GROUP BY trace_id) t
      ON t.trace_id = a.trace_id AND t.pid IS NOT DISTINCT FROM a.pid AND t.tid IS NOT DISTINCT FROM a.tid
),
anchor_kernels AS (
    SELECT k.trace_id, k.device_id, k.kernel_id, k.ts
    FROM kernel k
    WHERE $anchor_source = 'kernel pace' AND ($trace_id IS NULL OR k.trace_id = $trace_id) AND k.name = $anchor_family
),
anchor_device AS (
    SELECT trace_id, arg_max(device_id, (n, -coalesce(device_id, -1))) AS device_id
    FROM (SELECT trace_id, device_id, count(*) AS n FROM anchor_kernels GROUP BY trace_id, device_id) x
    GROUP BY trace_id
),
pace_windows AS (
    SELECT trace_id, ts, end_ts - ts AS dur, end_ts
    FROM (SELECT k.trace_id, k.ts, lead(k.ts) OVER (PARTITION BY k.trace_id ORDER BY k.ts, k.kernel_id) AS end_ts
          FROM anchor_kernels k
          JOIN anchor_device d ON d.trace_id = k.trace_id AND d.device_id IS NOT DISTINCT FROM k.device_id) x
    WHERE end_ts IS NOT NULL
),
all_windows AS (
    SELECT trace_id, ts, dur, end_ts, row_number() OVER (PARTITION BY trace_id ORDER BY ts, end_ts) AS iteration
    FROM (SELECT * FROM range_windows UNION ALL SELECT * FROM pace_windows) w
),
windows AS (
    SELECT * FROM all_windows WHERE iteration <= $max_iterations
),
gpu AS (
    SELECT k.trace_id, CASE WHEN $anchor_source = 'kernel pace' THEN k.ts ELSE coalesce(l.api_ts, k.ts) END AS t,
           'kernel' AS section,
           coalesce(CASE WHEN $kernel_key = 'short_name' THEN k.short_name ELSE k.name END, '(unnamed)') AS key,
           k.dur, l.category = 'communication' AS comm, k.kernel_id AS op_id
    FROM kernel k
    LEFT JOIN launch l ON l.trace_id = k.trace_id AND l.op_id = k.kernel_id AND l.op_kind = 'kernel'
    WHERE ($trace_id IS NULL OR k.trace_id = $trace_id) AND k.dur IS NOT NULL
    UNION ALL
    SELECT m.trace_id, CASE WHEN $anchor_source = 'kernel pace' THEN m.ts ELSE coalesce(l.api_ts, m.ts) END,
           'memory', 'copies and memsets', m.dur, false, m.op_id
    FROM (SELECT trace_id, memcpy_id AS op_id, ts, dur, 'memcpy' AS kind FROM memcpy
          UNION ALL SELECT trace_id, memset_id, ts, dur, 'memset' FROM memset) m
    LEFT JOIN launch l ON l.trace_id = m.trace_id AND l.op_id = m.op_id AND l.op_kind = m.kind
    WHERE ($trace_id IS NULL OR m.trace_id = $trace_id) AND m.dur IS NOT NULL
),
events AS (
    SELECT trace_id, t, section, key, dur, comm FROM gpu
    UNION ALL
    SELECT g.trace_id, g.t, 'op', coalesce(o.name, '(unnamed)') || ' (' || ko.direction || ')', g.dur, g.comm
    FROM gpu g
    JOIN kernel_op ko ON ko.trace_id = g.trace_id AND ko.kernel_id = g.op_id
    JOIN torch_op o ON o.trace_id = ko.trace_id AND o.range_id = ko.op_range_id
    WHERE g.section = 'kernel'
    UNION ALL
    SELECT r.trace_id, r.ts, 'range', regexp_replace(coalesce(r.path, '(unnamed)'), 'ProfilerStep#[0-9]+', 'ProfilerStep#*', 'g'),
           r.dur, false
    FROM nvtx_range r
    WHERE ($trace_id IS NULL OR r.trace_id = $trace_id) AND r.dur IS NOT NULL AND r.domain <> 'gpu_user_annotation'
      AND NOT EXISTS (SELECT 1 FROM torch_op o WHERE o.trace_id = r.trace_id AND o.range_id = r.range_id)
),
-- the last window started before each event (ord 0 sorts a window before an event at its start);
-- window ends grow with their starts (each ends where the next starts), so the running maximum
-- of the ends is that window's end
swept AS (
    SELECT trace_id, t, section, key, dur, comm, ord,
           max(iteration) OVER w AS iteration, max(end_ts) OVER w AS end_ts
    FROM (SELECT trace_id, ts AS t, CAST(NULL AS VARCHAR) AS section, CAST(NULL AS VARCHAR) AS key,
                 CAST(NULL AS BIGINT) AS dur, CAST(NULL AS BOOLEAN) AS comm, iteration, end_ts, 0 AS ord
          FROM windows
          UNION ALL
          SELECT trace_id, t, section, key, dur, comm, CAST(NULL AS BIGINT), CAST(NULL AS BIGINT), 1 FROM events) x
    WINDOW w AS (PARTITION BY trace_id ORDER BY t, ord ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
),
placed AS (
    SELECT section, key, iteration, dur, comm
    FROM swept
    WHERE ord = 1 AND iteration IS NOT NULL AND t < end_ts
)
SELECT 'iteration' AS section, 'iteration time' AS key, iteration, count(*) AS calls, max(dur) AS total_ns,
       false AS communication
FROM windows
GROUP BY iteration
UNION ALL
SELECT 'iteration', 'iterations', 0, count(*), max(iteration), false
FROM all_windows
HAVING count(*) > 0
UNION ALL
SELECT 'total', 'GPU operations', iteration, count(*), sum(dur), false
FROM placed WHERE section IN ('kernel', 'memory')
GROUP BY iteration
UNION ALL
SELECT 'total', 'communication', iteration, count(*), sum(dur), true
FROM placed WHERE section = 'kernel' AND comm
GROUP BY iteration
UNION ALL
SELECT section, key, iteration, count(*), sum(dur), coalesce(bool_or(comm), false)
FROM placed WHERE section IN ('kernel', 'op', 'range')
GROUP BY section, key, iteration
ORDER BY section, key, iteration;
