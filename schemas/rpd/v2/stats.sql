-- src_stats: what the rpd adapters do not read, as ingest_stats rows.
CREATE OR REPLACE TEMP VIEW src_stats AS
SELECT 'rpd.ops_not_read.' || coalesce(op_type, 'none') AS key, count(*) AS value, 'info' AS severity,
       'rpd ops that are neither kernels nor copies (FillBuffer, barriers, Tasks without a kernel name, ...): '
       || 'not read' AS detail
FROM src_rpd_op
WHERE op_type IS NULL
   OR NOT (op_type = 'KernelExecution' OR (op_type = 'Task' AND coalesce(description, '') <> '') OR op_type LIKE 'Copy%')
GROUP BY ALL
UNION ALL
SELECT 'rpd.op_without_api', count(*), 'warning', 'rpd ops with no API call in rocpd_api_ops'
FROM src_rpd_op WHERE api_id IS NULL HAVING count(*) > 0
UNION ALL
SELECT 'rpd.autograd_not_read', count(*), 'info',
       'PyTorch autograd details of roctx ranges (ext_autogradapi: seq, op_id, sizes): '
       || 'not read (the ranges themselves are nvtx_range rows)'
FROM raw.ext_autogradapi HAVING count(*) > 0
UNION ALL
SELECT 'rpd.monitor_not_read', count(*), 'info',
       'rocm-smi samples (rocpd_monitor: GPU clock, ...), by SMI device index rather than HIP ordinal: not read'
FROM raw.rocpd_monitor HAVING count(*) > 0;
