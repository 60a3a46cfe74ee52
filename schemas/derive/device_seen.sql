-- derived_device_seen: GPUs that ran work but that the source does not describe (trimmed
-- exports may lack the GPU table), so every device_id in kernel, memcpy and memset has a row.
CREATE OR REPLACE TEMP VIEW derived_device_seen AS
SELECT DISTINCT o.trace_id, o.device_id
FROM (SELECT trace_id, device_id FROM kernel
      UNION SELECT trace_id, device_id FROM memcpy
      UNION SELECT trace_id, device_id FROM memset) o
WHERE o.device_id IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM device d WHERE d.trace_id = o.trace_id AND d.device_id = o.device_id);
