-- src_stats: what the rocpd adapters read partly or not at all, as (key, value, severity, detail)
-- rows for ingest_stats.
CREATE OR REPLACE TEMP VIEW src_stats AS
SELECT 'rocpd.kernel_without_launch' AS key, count(*) AS value, 'warning' AS severity,
       'kernel dispatches with no HIP call of the same correlation (event stack_id) in the file' AS detail
FROM raw.rocpd_kernel_dispatch k
LEFT JOIN src_rocpd_event e ON e.event_id = k.event_id
WHERE e.correlation_id IS NULL OR e.correlation_id NOT IN
      (SELECT correlation_id FROM src_api_call WHERE correlation_id IS NOT NULL)
HAVING count(*) > 0
UNION ALL
SELECT 'rocpd.regions_not_read.' || coalesce(e.category, 'none'), count(*), 'info',
       'rocpd regions of a category that is neither a HIP/HSA API nor rocTX: not read'
FROM raw.rocpd_region r
LEFT JOIN src_rocpd_event e ON e.event_id = r.event_id
WHERE e.category IS NULL OR NOT (e.category LIKE 'HIP\_%' ESCAPE '\' OR e.category LIKE 'HSA\_%' ESCAPE '\'
                                 OR e.category LIKE 'MARKER\_%' ESCAPE '\')
GROUP BY ALL
UNION ALL
SELECT 'rocpd.memory_allocations_not_read', count(*), 'info',
       'rocpd_memory_allocate rows (hipMalloc/free and scratch allocations): not read'
FROM raw.rocpd_memory_allocate HAVING count(*) > 0
UNION ALL
SELECT 'rocpd.samples_not_read', count(*), 'info',
       'rocpd_sample rows (PC samples, counter samples on tracks): not read'
FROM raw.rocpd_sample HAVING count(*) > 0
UNION ALL
SELECT 'rocpd.pmc_events_not_read', count(*), 'info',
       'rocpd_pmc_event rows (hardware counter values per dispatch): not read'
FROM raw.rocpd_pmc_event HAVING count(*) > 0
UNION ALL
SELECT 'source.rows_without_start_or_end', count(*), 'warning',
       'kernel, copy or region rows with a NULL start or end, left out'
FROM (SELECT start, "end" FROM raw.rocpd_kernel_dispatch
      UNION ALL SELECT start, "end" FROM raw.rocpd_memory_copy
      UNION ALL SELECT start, "end" FROM raw.rocpd_region)
WHERE start IS NULL OR "end" IS NULL
HAVING count(*) > 0;
