-- src_stats: what the rocprof (v1) adapters do not read, as ingest_stats rows.
CREATE OR REPLACE TEMP VIEW src_stats AS
SELECT 'rocprof.op_without_launch' AS key, count(*) AS value, 'warning' AS severity,
       'kernels and copies whose Index no HIP call shares' AS detail
FROM (SELECT "Index" FROM raw.OPS UNION ALL SELECT "Index" FROM raw.COPY) o
WHERE o."Index" IS NULL OR o."Index" NOT IN (SELECT "Index" FROM raw.HIP WHERE "Index" IS NOT NULL)
HAVING count(*) > 0
UNION ALL
SELECT 'rocprof.not_recorded', NULL, 'info',
       'rocprof v1 results.db records no devices (rocminfo is in results.sysinfo.txt), no grid or '
       || 'workgroup sizes, no copy sizes and no roctx ranges as such: those columns and views are empty'
UNION ALL
SELECT 'source.rows_without_start_or_end', count(*), 'warning',
       'HIP, OPS or COPY rows with a NULL BeginNs or EndNs, left out'
FROM (SELECT BeginNs, EndNs FROM raw.HIP UNION ALL SELECT BeginNs, EndNs FROM raw.OPS
      UNION ALL SELECT BeginNs, EndNs FROM raw.COPY)
WHERE BeginNs IS NULL OR EndNs IS NULL
HAVING count(*) > 0;
