-- src_stats: what the nvprof adapters could not pair, resolve or name, and what they inferred, as
-- (key, value, severity, detail) rows for ingest_stats.
CREATE OR REPLACE TEMP VIEW src_stats AS
WITH gpu AS (
    SELECT 'kernel' AS what, correlationId FROM raw.CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
    UNION ALL SELECT 'kernel', correlationId FROM raw.CUPTI_ACTIVITY_KIND_KERNEL
    UNION ALL SELECT 'memcpy', correlationId FROM raw.CUPTI_ACTIVITY_KIND_MEMCPY
    UNION ALL SELECT 'memcpy', correlationId FROM raw.CUPTI_ACTIVITY_KIND_MEMCPY2
    UNION ALL SELECT 'memset', correlationId FROM raw.CUPTI_ACTIVITY_KIND_MEMSET
),
marker_ends AS (
    SELECT id, count(*) AS n FROM raw.CUPTI_ACTIVITY_KIND_MARKER
    WHERE (flags & 4) <> 0 AND (flags & 2) = 0 GROUP BY id
),
marker_starts AS (
    SELECT id, count(*) AS n FROM raw.CUPTI_ACTIVITY_KIND_MARKER WHERE (flags & 2) <> 0 GROUP BY id
),
nvtx AS MATERIALIZED (
    SELECT kind, style, count(*) AS n, count(*) FILTER (WHERE name IS NULL) AS unnamed
    FROM src_nvtx_event GROUP BY ALL
)
SELECT what || '.correlation_unmatched' AS key, count(*) AS value, 'warning' AS severity,
       what || ' records whose correlation id matches neither a RUNTIME nor a DRIVER call (no launching call; '
       || 'process taken from the file''s only process when it has one)' AS detail
FROM gpu
WHERE coalesce(correlationId, 0) <> 0
  AND NOT EXISTS (SELECT 1 FROM src_launch l WHERE l.correlation_id = gpu.correlationId)
GROUP BY what
UNION ALL
SELECT 'gpu_op.correlation_ambiguous', count(*), 'warning',
       'GPU records whose correlation id was used by calls of several processes in this file: pid is NULL'
FROM gpu JOIN src_launch l ON l.correlation_id = gpu.correlationId
WHERE l.n_pids > 1
HAVING count(*) > 0
UNION ALL
SELECT 'api_call.unknown_cbid.' || api_kind, count(*), 'warning',
       api_kind || ' calls whose callback id is not in the shipped CUPTI table (named ''unknown ' || api_kind
       || ' cbid N''); ids: ' || string_agg(DISTINCT CAST(cbid AS VARCHAR), ', ' ORDER BY CAST(cbid AS VARCHAR))
FROM (SELECT 'runtime' AS api_kind, r.cbid FROM raw.CUPTI_ACTIVITY_KIND_RUNTIME r
      WHERE NOT EXISTS (SELECT 1 FROM src_cbid_runtime c WHERE c.cbid = r.cbid)
      UNION ALL
      SELECT 'driver', d.cbid FROM raw.CUPTI_ACTIVITY_KIND_DRIVER d
      WHERE NOT EXISTS (SELECT 1 FROM src_cbid_driver c WHERE c.cbid = d.cbid))
GROUP BY api_kind
UNION ALL
SELECT 'kernel.serialized_table_rows', count(*), 'info',
       'kernels read from CUPTI_ACTIVITY_KIND_KERNEL (nvprof serialized kernels, e.g. --analysis-metrics)'
FROM raw.CUPTI_ACTIVITY_KIND_KERNEL
HAVING count(*) > 0
UNION ALL
SELECT 'kernel.unnamed', count(*), 'warning',
       'kernels whose name id is 0 or not in StringTable: name is NULL'
FROM (SELECT name FROM raw.CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
      UNION ALL SELECT name FROM raw.CUPTI_ACTIVITY_KIND_KERNEL) k
WHERE NOT EXISTS (SELECT 1 FROM raw.StringTable s WHERE s._id_ = k.name AND k.name <> 0)
HAVING count(*) > 0
UNION ALL
SELECT 'kernel.names_not_demangled', count(*), 'warning',
       'distinct mangled kernel names (_Z...) that could not be demangled (no C++ runtime with __cxa_demangle, '
       || 'or a symbol it rejects): name is the mangled symbol'
FROM src_demangled
WHERE (symbol LIKE '\_Z%' ESCAPE '\' OR symbol LIKE '\_\_Z%' ESCAPE '\') AND name = symbol
HAVING count(*) > 0
UNION ALL
SELECT 'nvtx.start_without_end', sum(s.n - coalesce(e.n, 0)), 'warning',
       'NVTX range START records (flags 2) without an END record of the same id: the range is unclosed (dur NULL)'
FROM marker_starts s LEFT JOIN marker_ends e ON e.id = s.id
WHERE s.n > coalesce(e.n, 0)
HAVING count(*) > 0
UNION ALL
SELECT 'nvtx.end_without_start', sum(e.n - coalesce(s.n, 0)), 'warning',
       'NVTX range END records (flags 4) without a START record of the same id: left out'
FROM marker_ends e LEFT JOIN marker_starts s ON s.id = e.id
WHERE e.n > coalesce(s.n, 0)
HAVING count(*) > 0
UNION ALL
SELECT 'nvtx.style_inferred.' || replace(style, '/', '_'), sum(n), 'info',
       'NVTX ranges whose style nvprof does not record, inferred as ' || style
       || ': push/pop when START and END are on one thread and nest properly with its other ranges, else start/end'
FROM nvtx WHERE kind = 'range'
GROUP BY style
UNION ALL
SELECT 'nvtx.unnamed', sum(unnamed), 'info',
       'NVTX ranges and marks with no text (name id 0 or not in StringTable): name is NULL'
FROM nvtx
HAVING sum(unnamed) > 0
UNION ALL
SELECT 'nvtx.sync_records_not_read', count(*), 'info',
       'CUPTI_ACTIVITY_KIND_MARKER synchronization records (flags 8-64: nvtxDomainSync*), not ranges or marks'
FROM raw.CUPTI_ACTIVITY_KIND_MARKER WHERE (flags & 7) = 0
HAVING count(*) > 0
UNION ALL
SELECT 'source.rows_without_start_or_end', count(*), 'warning',
       'GPU or API rows with a NULL start or end, left out'
FROM (SELECT start, "end" FROM raw.CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
      UNION ALL SELECT start, "end" FROM raw.CUPTI_ACTIVITY_KIND_KERNEL
      UNION ALL SELECT start, "end" FROM raw.CUPTI_ACTIVITY_KIND_MEMCPY
      UNION ALL SELECT start, "end" FROM raw.CUPTI_ACTIVITY_KIND_MEMCPY2
      UNION ALL SELECT start, "end" FROM raw.CUPTI_ACTIVITY_KIND_MEMSET
      UNION ALL SELECT start, "end" FROM raw.CUPTI_ACTIVITY_KIND_RUNTIME
      UNION ALL SELECT start, "end" FROM raw.CUPTI_ACTIVITY_KIND_DRIVER)
WHERE start IS NULL OR "end" IS NULL
HAVING count(*) > 0;
