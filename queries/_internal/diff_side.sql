-- _internal/diff_side: one side of `traceql diff`: per alignment key (kernel name, NVTX range path, PyTorch op and direction, API call, copy kind, memset kind) the count of its instances and their summed, mean, median and spread of durations; and the side's totals (GPU time, busy time and its breakdown per GPU, span).
-- param trace_id: only this trace (NULL: every trace in the workspace, pooled as one side)
-- param kernel_key: 'name' to align kernels by their demangled name, 'short_name' by their short name (no template arguments or parameters: kernels that differ only in those share a row)
-- default kernel_key: name
-- param trim: fraction of the shortest and of the longest instances of each key left out of the trimmed mean and winsorized in the variance (Yuen's test; 0: plain mean and variance, Welch's test)
-- default trim: 0.2
-- column section: what the row aligns: 'kernel' (kernel.name or short_name), 'op' (a PyTorch op and its direction: the kernels launched inside one op call, summed per call), 'range' (an NVTX range path: the CPU duration of each instance), 'range_gpu' (the same path: the GPU busy time of the work launched inside each instance, range_gpu.gpu_busy_ns), 'api' (api_call.name), 'memcpy' (memcpy.copy_kind), 'memset' (memset.mem_kind) or 'total'
-- column stratum: NULL on the key's row (all its instances); else one like-for-like group of the key's instances, on a row of its own: for kernels the launch configuration 'grid_x,grid_y,grid_z/block_x,block_y,block_z', for op calls the input sizes and dtypes, for copies and memsets the bytes. Instances of one kernel name at different shapes can differ 4-fold; compared within a stratum, a change is not lost in that spread (traceql.stats.yuen_stratified)
-- column key: the alignment key: kernel name, 'op name (forward|backward)', NVTX path (nvtx_range.path, 'ProfilerStep#N' written 'ProfilerStep#*' so that steps align), API call name, copy kind, memory kind; for totals 'GPU operations', 'kernels', 'copies', 'memsets' (summed durations), 'GPU N busy', 'GPU N compute', 'GPU N exposed communication', 'GPU N memory only' (device_busy, summed over the side's traces) or 'span' (the longest trace.duration of the side)
-- column calls: instances (kernel executions, op calls, range instances, API calls, copies, memsets; for totals the operations summed, for GPU rows device_busy.ops, for span the traces)
-- column total_ns: summed duration of the instances in ns (for GPU rows and span: the time itself)
-- column mean_ns: mean instance duration in ns
-- column var_ns: sample variance of the instance durations in ns squared (n - 1); NULL for a single instance and for the rows that are no sums of instances (GPU rows, span)
-- column tmean_ns: trimmed mean: the mean of the instances left when the floor(trim * calls) shortest and as many longest are left out
-- column wvar_ns: winsorized variance in ns squared: the sample variance (n - 1) of the durations with those shortest and longest instances set to the shortest and longest kept; NULL for a single instance
-- column total_var: variance of total_ns as a sum of independent instances, estimated robustly: calls * wvar_ns (for the totals: summed over their keys); NULL where wvar_ns is
-- column med_ns: median instance duration in ns
-- column min_ns: shortest instance in ns
-- column max_ns: longest instance in ns
--
-- Range rows leave out the ranges that are PyTorch ops (torch_op; they are the op rows), unclosed
-- ranges (no duration) and the GPU-side spans of PyTorch profiler traces (domain
-- 'gpu_user_annotation'). Op rows: a kernel belongs to the innermost op around its launch
-- (kernel_op.op_range_id), named as torch_op.name with its direction. Everything here is an
-- aggregate, so two sides held in different workspaces compare without moving their instances.
WITH ranges AS (
    SELECT r.trace_id, r.range_id, r.dur,
           regexp_replace(coalesce(r.path, '(unnamed)'), 'ProfilerStep#[0-9]+', 'ProfilerStep#*', 'g') AS key
    FROM nvtx_range r
    WHERE ($trace_id IS NULL OR r.trace_id = $trace_id)
      AND r.domain <> 'gpu_user_annotation'
      AND NOT EXISTS (SELECT 1 FROM torch_op o WHERE o.trace_id = r.trace_id AND o.range_id = r.range_id)
),
op_calls AS (
    SELECT coalesce(o.name, '(unnamed)') || ' (' || ko.direction || ')' AS key,
           coalesce(o.sizes, '') || ' ' || coalesce(o.dtypes, '') AS stratum, sum(k.dur) AS dur
    FROM kernel_op ko
    JOIN kernel k ON k.trace_id = ko.trace_id AND k.kernel_id = ko.kernel_id
    JOIN torch_op o ON o.trace_id = ko.trace_id AND o.range_id = ko.op_range_id
    WHERE ($trace_id IS NULL OR ko.trace_id = $trace_id)
    GROUP BY ko.trace_id, ko.op_range_id, o.name, ko.direction, o.sizes, o.dtypes
),
instances AS (
    SELECT 'kernel' AS section,
           coalesce(CASE WHEN $kernel_key = 'short_name' THEN short_name ELSE name END, '(unnamed)') AS key,
           concat_ws(',', grid_x, grid_y, grid_z) || '/' || concat_ws(',', block_x, block_y, block_z) AS stratum, dur
    FROM kernel WHERE $trace_id IS NULL OR trace_id = $trace_id
    UNION ALL
    SELECT 'op', key, stratum, dur FROM op_calls
    UNION ALL
    SELECT 'range', key, CAST(NULL AS VARCHAR), dur FROM ranges WHERE dur IS NOT NULL
    UNION ALL
    SELECT 'range_gpu', x.key, CAST(NULL AS VARCHAR), g.gpu_busy_ns
    FROM ranges x JOIN range_gpu g ON g.trace_id = x.trace_id AND g.range_id = x.range_id
    UNION ALL
    SELECT 'api', coalesce(name, '(unnamed)'), CAST(NULL AS VARCHAR), dur
    FROM api_call WHERE $trace_id IS NULL OR trace_id = $trace_id
    UNION ALL
    SELECT 'memcpy', coalesce(copy_kind, '(unknown)'), CAST(bytes AS VARCHAR), dur
    FROM memcpy WHERE $trace_id IS NULL OR trace_id = $trace_id
    UNION ALL
    SELECT 'memset', coalesce(mem_kind, '(unknown)'), CAST(bytes AS VARCHAR), dur
    FROM memset WHERE $trace_id IS NULL OR trace_id = $trace_id
),
-- every instance twice: in its key's group (stratum NULL) and, where the section has strata, in
-- its stratum's group; the trimmed statistics are the same computation for both
grouped AS (
    SELECT section, key, CAST(NULL AS VARCHAR) AS stratum, dur FROM instances WHERE dur IS NOT NULL
    UNION ALL
    SELECT section, key, coalesce(stratum, '?'), dur
    FROM instances WHERE dur IS NOT NULL AND section IN ('kernel', 'op', 'memcpy', 'memset')
),
ranked AS (
    SELECT section, key, stratum, dur,
           row_number() OVER (PARTITION BY section, key, stratum ORDER BY dur) AS rn,
           CAST(floor($trim * count(*) OVER (PARTITION BY section, key, stratum)) AS BIGINT) AS g,
           count(*) OVER (PARTITION BY section, key, stratum) AS n
    FROM grouped
),
bounds AS (
    SELECT section, key, stratum, max(dur) FILTER (WHERE rn = g + 1) AS lo, max(dur) FILTER (WHERE rn = n - g) AS hi
    FROM ranked
    GROUP BY section, key, stratum
),
per_key AS (
    SELECT x.section, x.key, x.stratum, count(*) AS calls, sum(x.dur) AS total_ns, avg(x.dur) AS mean_ns,
           var_samp(x.dur) AS var_ns, avg(x.dur) FILTER (WHERE x.rn > x.g AND x.rn <= x.n - x.g) AS tmean_ns,
           var_samp(least(greatest(x.dur, b.lo), b.hi)) AS wvar_ns,
           median(x.dur) AS med_ns, min(x.dur) AS min_ns, max(x.dur) AS max_ns
    FROM ranked x
    JOIN bounds b ON b.section = x.section AND b.key = x.key AND b.stratum IS NOT DISTINCT FROM x.stratum
    GROUP BY x.section, x.key, x.stratum
),
gpu_totals AS (
    SELECT 'total' AS section,
           CASE section WHEN 'kernel' THEN 'kernels' WHEN 'memcpy' THEN 'copies' ELSE 'memsets' END AS key,
           sum(calls) AS calls, sum(total_ns) AS total_ns, sum(total_ns) / sum(calls) AS mean_ns,
           CAST(NULL AS DOUBLE) AS var_ns, CAST(NULL AS DOUBLE) AS tmean_ns, CAST(NULL AS DOUBLE) AS wvar_ns,
           sum(calls * coalesce(wvar_ns, 0)) AS total_var,
           CAST(NULL AS DOUBLE) AS med_ns, min(min_ns) AS min_ns, max(max_ns) AS max_ns
    FROM per_key
    WHERE section IN ('kernel', 'memcpy', 'memset') AND stratum IS NULL
    GROUP BY section
),
all_ops AS (
    SELECT 'total' AS section, 'GPU operations' AS key, sum(calls) AS calls, sum(total_ns) AS total_ns,
           sum(total_ns) / sum(calls) AS mean_ns, CAST(NULL AS DOUBLE) AS var_ns, CAST(NULL AS DOUBLE) AS tmean_ns,
           CAST(NULL AS DOUBLE) AS wvar_ns, sum(total_var) AS total_var,
           CAST(NULL AS DOUBLE) AS med_ns, min(min_ns) AS min_ns, max(max_ns) AS max_ns
    FROM gpu_totals
    HAVING count(*) > 0
),
devices AS (
    SELECT b.device_id, sum(b.ops) AS ops, sum(b.busy_ns) AS busy_ns, sum(b.compute_ns) AS compute_ns,
           sum(b.comm_exposed_ns) AS comm_exposed_ns, sum(b.memory_exposed_ns) AS memory_exposed_ns
    FROM device_busy b
    WHERE $trace_id IS NULL OR b.trace_id = $trace_id
    GROUP BY b.device_id
),
device_rows AS (
    SELECT 'total' AS section, 'GPU ' || coalesce(CAST(device_id AS VARCHAR), '?') || ' busy' AS key, ops AS calls,
           busy_ns AS total_ns
    FROM devices
    UNION ALL
    SELECT 'total', 'GPU ' || coalesce(CAST(device_id AS VARCHAR), '?') || ' compute', NULL, compute_ns FROM devices
    UNION ALL
    SELECT 'total', 'GPU ' || coalesce(CAST(device_id AS VARCHAR), '?') || ' exposed communication', NULL,
           comm_exposed_ns
    FROM devices
    UNION ALL
    SELECT 'total', 'GPU ' || coalesce(CAST(device_id AS VARCHAR), '?') || ' memory only', NULL, memory_exposed_ns
    FROM devices
),
span AS (
    SELECT 'total' AS section, 'span' AS key, count(*) AS calls, max(duration) AS total_ns
    FROM trace
    WHERE ($trace_id IS NULL OR trace_id = $trace_id) AND duration IS NOT NULL
    HAVING count(*) > 0
),
rows AS (
    SELECT section, key, stratum, calls, total_ns, mean_ns, var_ns, tmean_ns, wvar_ns, calls * wvar_ns AS total_var,
           med_ns, min_ns, max_ns
    FROM per_key
    UNION ALL
    SELECT section, key, NULL, calls, total_ns, mean_ns, var_ns, tmean_ns, wvar_ns, total_var, med_ns, min_ns, max_ns
    FROM gpu_totals
    UNION ALL
    SELECT section, key, NULL, calls, total_ns, mean_ns, var_ns, tmean_ns, wvar_ns, total_var, med_ns, min_ns, max_ns
    FROM all_ops
    UNION ALL
    SELECT section, key, NULL, calls, total_ns, CAST(NULL AS DOUBLE), CAST(NULL AS DOUBLE), CAST(NULL AS DOUBLE),
           CAST(NULL AS DOUBLE), CAST(NULL AS DOUBLE), CAST(NULL AS DOUBLE), CAST(NULL AS BIGINT), CAST(NULL AS BIGINT)
    FROM device_rows
    UNION ALL
    SELECT section, key, NULL, calls, total_ns, CAST(NULL AS DOUBLE), CAST(NULL AS DOUBLE), CAST(NULL AS DOUBLE),
           CAST(NULL AS DOUBLE), CAST(NULL AS DOUBLE), CAST(NULL AS DOUBLE), CAST(NULL AS BIGINT), CAST(NULL AS BIGINT)
    FROM span
)
SELECT section, key, stratum, calls, TRY_CAST(total_ns AS BIGINT) AS total_ns, mean_ns, var_ns, tmean_ns, wvar_ns,
       total_var, med_ns, min_ns, max_ns
FROM rows
ORDER BY section, key, stratum NULLS FIRST;
