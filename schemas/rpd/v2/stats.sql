-- src_stats: what the rpd adapters do not read, as ingest_stats rows.
CREATE OR REPLACE TEMP VIEW src_stats AS
SELECT 'rpd.ops_not_read.' || coalesce(op_type, 'none') AS key, count(*) AS value, 'info' AS severity,
       'rpd ops that are neither kernels nor copies (FillBuffer, barriers, ...): not read' AS detail
FROM src_rpd_op
WHERE op_type IS NULL OR NOT (op_type = 'KernelExecution' OR op_type LIKE 'Copy%')
GROUP BY ALL
UNION ALL
SELECT 'rpd.op_without_api', count(*), 'warning', 'rpd ops with no API call in rocpd_api_ops'
FROM src_rpd_op WHERE api_id IS NULL HAVING count(*) > 0;
