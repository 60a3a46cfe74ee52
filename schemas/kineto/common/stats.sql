-- src_stats: what the Kineto adapters did not read, could not convert or found unusual, as
-- (key, value, severity, detail) rows for ingest_stats.
CREATE OR REPLACE TEMP VIEW src_stats AS
WITH not_read AS (
    SELECT coalesce(e.cat, '(no category)') AS cat, e.ph, count(*) AS n
    FROM raw.kineto_event e
    LEFT JOIN src_categories c ON c.category = e.cat
    WHERE c.kind IS NULL
       OR (e.ph <> 'X' AND c.kind NOT LIKE '%flow')
       OR (e.ph NOT IN ('s', 't', 'f') AND c.kind LIKE '%flow')
    GROUP BY ALL
)
SELECT 'kineto.events_not_read.' || cat || '.' || coalesce(ph, '?') AS key, n AS value, 'info' AS severity,
       'events of category ''' || cat || ''', phase ''' || coalesce(ph, '?') || ''' that traceql does not read ('
       || CASE WHEN ph = 'M' THEN 'metadata: process and thread names are read from them'
               WHEN cat = 'python_function' THEN 'Python stack frames of with_stack=True'
               WHEN cat = 'cpu_instant_event' THEN 'memory allocation instants of profile_memory=True'
               WHEN cat = 'cuda_sync' THEN 'CUDA synchronization spans on the GPU timeline'
               WHEN cat = 'Trace' THEN 'the profiler''s own span'
               ELSE 'no mapping in schemas/kineto/categories.csv' END || ')' AS detail
FROM not_read
UNION ALL
SELECT 'kineto.events_without_time', count(*), 'warning',
       'complete events of a read category without a readable ts or dur (absent or not a number): left out'
FROM raw.kineto_typed WHERE ph = 'X' AND (ts IS NULL OR (dur IS NULL AND kind NOT LIKE '%flow'))
HAVING count(*) > 0
UNION ALL
SELECT 'kineto.device_out_of_range', count(*), 'warning',
       'GPU events whose device argument is a number beyond a 32-bit device id: their device_id is NULL'
FROM raw.kineto_typed
WHERE kind IN ('kernel', 'memcpy', 'memset')
  AND TRY_CAST(a[1] AS HUGEINT) IS NOT NULL AND TRY_CAST(a[1] AS INTEGER) IS NULL
HAVING count(*) > 0
UNION ALL
SELECT 'kineto.flows.' || kind, count(*), 'info',
       CASE kind WHEN 'launch_flow' THEN 'flow events from CUDA calls to their GPU work (ac2g): their id is the '
                      || 'correlation id, used for GPU events that lack a correlation argument'
                 ELSE 'flow events from forward ops to their backward nodes (fwdbwd): not read; torch_op pairs '
                      || 'forward and backward ops by process and sequence number' END
FROM raw.kineto_typed WHERE kind LIKE '%flow'
GROUP BY kind
UNION ALL
SELECT 'kineto.gpu_user_annotation', count(*), 'info',
       'GPU-side spans of user annotations, in nvtx_range with domain ''gpu_user_annotation'' (start/end, pid NULL): '
       || 'they hold no GPU work; the CPU-side user_annotation range does'
FROM raw.kineto_typed WHERE kind = 'gpu_user_annotation'
HAVING count(*) > 0
UNION ALL
SELECT 'kineto.gpu_ops_correlation_from_flow', count(*), 'info',
       'kernels, copies or memsets without a correlation argument whose correlation id came from their launch flow'
FROM raw.kineto_gpu g JOIN raw.kineto_typed t USING (src_row)
WHERE t.a[4] IS NULL AND g.correlation_id IS NOT NULL
HAVING count(*) > 0
UNION ALL
SELECT 'kineto.gpu_ops_pid_from_trace', count(*), 'info',
       'kernels, copies or memsets whose launching call is not in the trace: their process is the trace''s only CPU process'
FROM raw.kineto_gpu g
WHERE NOT EXISTS (SELECT 1 FROM raw.kineto_launch l WHERE l.correlation = g.correlation_id)
  AND getvariable('kineto_cpu_pid') IS NOT NULL
HAVING count(*) > 0;
