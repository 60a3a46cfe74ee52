-- src_memcpy: rpd ops of type Copy* (CopyHostToDevice, CopyDeviceToHost, CopyDeviceToDevice, ...);
-- bytes from the launching call's rocpd_copyapi row.
CREATE OR REPLACE TEMP VIEW src_memcpy AS
SELECT
    o.id                            AS src_row,
    CAST(o.gpuId AS INTEGER)        AS device_id,
    o.queueId                       AS context_id,
    TRY_CAST(c.stream AS BIGINT)    AS stream_id,
    o.pid                           AS pid,
    o.api_id                        AS correlation_id,
    o.start                         AS ts,
    o."end" - o.start               AS dur,
    c.size                          AS bytes,
    CASE o.op_type WHEN 'CopyHostToDevice' THEN 'Host-to-Device' WHEN 'CopyDeviceToHost' THEN 'Device-to-Host'
                   WHEN 'CopyDeviceToDevice' THEN 'Device-to-Device' WHEN 'CopyHostToHost' THEN 'Host-to-Host'
                   ELSE 'Unknown (' || o.op_type || ')' END AS copy_kind,
    CAST(NULL AS VARCHAR)           AS src_kind,
    CAST(NULL AS VARCHAR)           AS dst_kind,
    CAST(NULL AS INTEGER)           AS src_device_id,
    CAST(NULL AS INTEGER)           AS dst_device_id,
    CAST(NULL AS BIGINT)            AS graph_node_id,
    CAST(NULL AS BIGINT)            AS graph_id
FROM src_rpd_op o
LEFT JOIN raw.rocpd_copyapi c ON c.api_ptr_id = o.api_id
WHERE o.op_type LIKE 'Copy%' AND o.start IS NOT NULL AND o."end" IS NOT NULL;
