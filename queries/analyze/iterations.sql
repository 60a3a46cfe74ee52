-- analyze/iterations: training or inference iterations with the time of each and their spread: PyTorch's ProfilerStep ranges when there are any, else the outermost NVTX range that repeats (the same path up to numbers, on one thread, back to back, holding GPU work and most of the time of what encloses it), else a kernel that recurs at a steady pace; abstains with its reason when none is clear.
-- param trace_id: only this trace (NULL: every trace in the workspace)
-- param min_iterations: fewest repetitions that make an iteration pattern
-- default min_iterations: 3
-- param min_cover_pct: a repeating NVTX range counts only when its instances, at their median duration, fill at least this percentage of the ranges enclosing them (of the trace span, for outermost ranges); a pacing kernel only when its iterations span this percentage of its GPU's active time
-- default min_cover_pct: 50
-- param max_pace_cv_pct: a kernel paces iterations only when the spacing of its starts varies by at most this coefficient of variation, in percent
-- default max_pace_cv_pct: 10
-- param name: use the NVTX ranges of this grouping name (nvtx_range.group_name) as the iterations instead of detecting them
-- advice: Iterations slower than the median cost their difference: a slow first iteration is warm-up (CUDA context and module loading, cuDNN/cuBLAS autotuning, torch.compile, allocator growth) that a longer warm-up keeps out of measurements; a spread among later ones points at data loading, garbage collection, synchronization or other ranks.
-- finding: iteration, iterations
-- role: context
-- group: family
-- show: iteration, at_ns, dur_ns, deviation_ns, range_path
-- column trace_id: trace (trace.trace_id)
-- column source: how the iterations were found: 'ProfilerStep', 'nvtx' (a repeating NVTX range), 'name' (the ranges named by the name parameter), 'kernel pace' (the starts of one recurring kernel); NULL when abstaining
-- column family: what repeats: the NVTX path with numbers replaced by '#', or the pacing kernel's name
-- column iteration: 1-based index of the iteration in its family
-- column ts: start of the iteration in ns (trace clock)
-- column at_ns: start in ns after the trace's start
-- column dur_ns: duration of the iteration in ns
-- column median_ns: median duration of the family's iterations in ns
-- column deviation_ns: dur_ns - median_ns
-- column recoverable_ns: the time this iteration took beyond the median (0 for faster ones); NULL on an abstention row
-- column iterations: iterations in the family
-- column mean_ns: mean iteration duration of the family in ns
-- column stddev_ns: sample standard deviation of the family's iteration durations in ns (n - 1)
-- column cv_pct: stddev_ns as a percentage of mean_ns
-- column range_path: the iteration's NVTX path (nvtx_range.path), NULL for kernel pace
-- column pid: process of the range or kernel
-- column tid: thread of the range, NULL for kernel pace
-- column thread: that thread's name (thread.thread_name)
-- column note: why the rule abstains (on the one row of a trace without a clear pattern), else NULL
-- label at_ns: at
-- label dur_ns: duration
-- label median_ns: median
-- label deviation_ns: vs median
-- label recoverable_ns: recoverable
-- label mean_ns: mean
-- label stddev_ns: stddev
-- label cv_pct: cv %
--
-- PyTorch's own op ranges (torch_op), PyProf's call-site markers ('traceMarker ...') and ranges
-- of other domains than the default one (libraries: NCCL, cuBLAS, TensorRT) never make
-- iterations. A repeating range must repeat inside what encloses it (at least min_iterations
-- instances per enclosing range on average: a 'forward' once per step is no iteration of its
-- own), and one nested in the instances of another repeating range (a layer inside a step) is
-- left to that outer one. Kernel pace: the
-- kernel name whose starts, on one GPU, are spaced most evenly (spacing varies by at most
-- max_pace_cv_pct) and farthest apart, each start opening an iteration that ends at the next.
WITH ranges AS (
    SELECT r.trace_id, r.range_id, r.pid, r.tid, r.ts, r.dur, r.depth, r.parent_range_id, r.group_name, r.path,
           regexp_replace(r.path, '[0-9]+', '#', 'g') AS family,
           starts_with(r.group_name, 'ProfilerStep#') AS profiler_step
    FROM nvtx_range r
    WHERE ($trace_id IS NULL OR r.trace_id = $trace_id) AND r.dur IS NOT NULL
      AND (r.domain = '' OR starts_with(r.group_name, 'ProfilerStep#'))
      AND NOT EXISTS (SELECT 1 FROM torch_op o WHERE o.trace_id = r.trace_id AND o.range_id = r.range_id)
      AND NOT starts_with(r.group_name, 'traceMarker ')
      AND ($name IS NULL OR r.group_name = $name)
),
with_gpu AS (
    SELECT x.*, g.range_id IS NOT NULL AS has_gpu,
           lag(x.ts + x.dur) OVER (PARTITION BY x.trace_id, x.pid, x.tid, x.family ORDER BY x.ts, x.range_id) AS prev_end
    FROM ranges x
    LEFT JOIN range_gpu g ON g.trace_id = x.trace_id AND g.range_id = x.range_id
),
parents AS (
    SELECT DISTINCT trace_id, pid, tid, family, parent_range_id FROM with_gpu WHERE parent_range_id IS NOT NULL
),
parent_time AS (
    SELECT k.trace_id, k.pid, k.tid, k.family, sum(p.dur) AS parent_ns
    FROM parents k JOIN nvtx_range p ON p.trace_id = k.trace_id AND p.range_id = k.parent_range_id
    GROUP BY ALL
),
families AS (
    SELECT w.trace_id, w.pid, w.tid, w.family, bool_or(w.profiler_step) AS profiler_step,
           count(*) AS n, count(*) * median(w.dur) AS covered_ns, count(DISTINCT coalesce(w.parent_range_id, -1)) AS parents,
           count(*) FILTER (WHERE w.ts < w.prev_end) AS overlapping,
           count(*) FILTER (WHERE w.has_gpu) AS with_gpu,
           bool_and(w.parent_range_id IS NULL) AS outermost
    FROM with_gpu w
    GROUP BY w.trace_id, w.pid, w.tid, w.family
),
qualified AS (
    SELECT f.*
    FROM families f
    JOIN trace t ON t.trace_id = f.trace_id
    LEFT JOIN parent_time pt ON pt.trace_id = f.trace_id AND pt.pid IS NOT DISTINCT FROM f.pid
                            AND pt.tid IS NOT DISTINCT FROM f.tid AND pt.family = f.family
    WHERE f.n >= $min_iterations * f.parents AND f.overlapping = 0
      AND (f.profiler_step OR $name IS NOT NULL
           OR (f.with_gpu = f.n
               AND 100.0 * f.covered_ns / nullif(CASE WHEN f.outermost THEN t.duration ELSE pt.parent_ns END, 0)
                   >= $min_cover_pct))
),
-- the families nested in another: a qualified family of the same process is a proper prefix of
-- their path (whole names: the prefix is followed by ' > ')
nested AS (
    SELECT DISTINCT x.trace_id, x.pid, x.family
    FROM qualified x JOIN qualified o ON o.trace_id = x.trace_id AND o.pid IS NOT DISTINCT FROM x.pid
                                     AND starts_with(x.family, o.family || ' > ')
),
with_steps AS (
    SELECT DISTINCT trace_id FROM qualified WHERE profiler_step
),
chosen AS (
    SELECT q.*,
           CASE WHEN $name IS NOT NULL THEN 'name' WHEN q.profiler_step THEN 'ProfilerStep' ELSE 'nvtx' END AS source
    FROM qualified q
    ANTI JOIN nested x ON x.trace_id = q.trace_id AND x.pid IS NOT DISTINCT FROM q.pid AND x.family = q.family
    LEFT JOIN with_steps s ON s.trace_id = q.trace_id
    WHERE q.profiler_step OR s.trace_id IS NULL
),
nvtx_iters AS (
    SELECT c.trace_id, c.source, c.family, w.ts, w.dur, w.path AS range_path, w.pid, w.tid
    FROM chosen c
    JOIN with_gpu w ON w.trace_id = c.trace_id AND w.pid = c.pid AND w.tid = c.tid AND w.family = c.family
),
active AS (
    SELECT trace_id, device_id, max(ts + dur) - min(ts) AS span_ns FROM kernel
    WHERE ($trace_id IS NULL OR trace_id = $trace_id) GROUP BY trace_id, device_id
),
kstarts AS (
    SELECT k.trace_id, k.device_id, k.pid, k.name, k.ts,
           lead(k.ts) OVER (PARTITION BY k.trace_id, k.device_id, k.name ORDER BY k.ts, k.kernel_id) AS next_ts
    FROM kernel k
    WHERE ($trace_id IS NULL OR k.trace_id = $trace_id) AND $name IS NULL
      AND k.trace_id NOT IN (SELECT trace_id FROM chosen)
),
paces AS (
    SELECT s.trace_id, s.device_id, s.name, count(*) AS n, avg(s.next_ts - s.ts) AS mean_gap
    FROM kstarts s
    JOIN active a ON a.trace_id = s.trace_id AND a.device_id IS NOT DISTINCT FROM s.device_id
    WHERE s.next_ts IS NOT NULL
    GROUP BY s.trace_id, s.device_id, s.name, a.span_ns
    HAVING count(*) >= $min_iterations
       AND 100.0 * coalesce(stddev_samp(s.next_ts - s.ts), 0) / avg(s.next_ts - s.ts) <= $max_pace_cv_pct
       AND 100.0 * (max(s.next_ts) - min(s.ts)) / nullif(a.span_ns, 0) >= $min_cover_pct
),
pace AS (
    SELECT trace_id, arg_max(device_id, (mean_gap, name)) AS device_id, arg_max(name, (mean_gap, name)) AS name
    FROM paces GROUP BY trace_id
),
pace_iters AS (
    SELECT s.trace_id, 'kernel pace' AS source, s.name AS family, s.ts, s.next_ts - s.ts AS dur,
           CAST(NULL AS VARCHAR) AS range_path, s.pid, CAST(NULL AS BIGINT) AS tid
    FROM kstarts s JOIN pace p ON p.trace_id = s.trace_id AND p.device_id IS NOT DISTINCT FROM s.device_id AND p.name = s.name
    WHERE s.next_ts IS NOT NULL
),
iters AS (
    SELECT * FROM nvtx_iters UNION ALL SELECT * FROM pace_iters
),
stats AS (
    SELECT trace_id, family, count(*) AS iterations, CAST(median(dur) AS BIGINT) AS median_ns,
           CAST(round(avg(dur)) AS BIGINT) AS mean_ns, CAST(round(coalesce(stddev_samp(dur), 0)) AS BIGINT) AS stddev_ns
    FROM iters GROUP BY trace_id, family
),
found AS (
    SELECT i.trace_id, i.source, i.family,
           row_number() OVER (PARTITION BY i.trace_id, i.family ORDER BY i.ts) AS iteration,
           i.ts, i.ts - t.start_ts AS at_ns, i.dur AS dur_ns, s.median_ns, i.dur - s.median_ns AS deviation_ns,
           greatest(i.dur - s.median_ns, 0) AS recoverable_ns, s.iterations, s.mean_ns, s.stddev_ns,
           100.0 * s.stddev_ns / nullif(s.mean_ns, 0) AS cv_pct, i.range_path, i.pid, i.tid,
           th.thread_name AS thread, CAST(NULL AS VARCHAR) AS note
    FROM iters i
    JOIN stats s ON s.trace_id = i.trace_id AND s.family = i.family
    JOIN trace t ON t.trace_id = i.trace_id
    LEFT JOIN thread th ON th.trace_id = i.trace_id AND th.pid = i.pid AND th.tid = i.tid
),
abstained AS (
    SELECT t.trace_id, CAST(NULL AS VARCHAR) AS source, CAST(NULL AS VARCHAR) AS family, CAST(NULL AS BIGINT) AS iteration,
           CAST(NULL AS BIGINT) AS ts, CAST(NULL AS BIGINT) AS at_ns, CAST(NULL AS BIGINT) AS dur_ns,
           CAST(NULL AS BIGINT) AS median_ns, CAST(NULL AS BIGINT) AS deviation_ns, CAST(NULL AS BIGINT) AS recoverable_ns,
           CAST(NULL AS BIGINT) AS iterations, CAST(NULL AS BIGINT) AS mean_ns, CAST(NULL AS BIGINT) AS stddev_ns,
           CAST(NULL AS DOUBLE) AS cv_pct, CAST(NULL AS VARCHAR) AS range_path, CAST(NULL AS BIGINT) AS pid,
           CAST(NULL AS BIGINT) AS tid, CAST(NULL AS VARCHAR) AS thread,
           CASE WHEN $name IS NOT NULL
                THEN 'no iterations: fewer than ' || $min_iterations || ' back-to-back NVTX ranges named ' || $name
                ELSE 'no clear iteration pattern: no ProfilerStep ranges; no NVTX range (outside PyTorch op ranges, in the default domain) that repeats at least '
                     || $min_iterations || ' times back to back on one thread, launches GPU work every time and fills at least '
                     || $min_cover_pct || '% of what encloses it; and no kernel that recurs at least ' || $min_iterations
                     || ' times at a steady pace (spacing varying by at most ' || $max_pace_cv_pct || '%)'
           END AS note
    FROM trace t
    WHERE ($trace_id IS NULL OR t.trace_id = $trace_id) AND t.trace_id NOT IN (SELECT trace_id FROM found)
)
SELECT * FROM found
UNION ALL
SELECT * FROM abstained
ORDER BY recoverable_ns DESC NULLS LAST, trace_id, family, iteration;
