-- src_memcpy: memory copies from CUPTI_ACTIVITY_KIND_MEMCPY with copy and memory kinds as labels.
CREATE OR REPLACE TEMP VIEW src_memcpy AS
SELECT
    c.rowid                         AS src_row,
    c.deviceId                      AS device_id,
    c.contextId                     AS context_id,
    c.streamId                      AS stream_id,
    (c.globalPid >> 24) & 16777215  AS pid,
    c.correlationId                 AS correlation_id,
    c.start                         AS ts,
    c."end" - c.start               AS dur,
    c.bytes                         AS bytes,
    coalesce(ck.label, 'Unknown (' || c.copyKind || ')') AS copy_kind,
    coalesce(sk.label, 'Unknown (' || c.srcKind || ')')  AS src_kind,
    coalesce(dk.label, 'Unknown (' || c.dstKind || ')')  AS dst_kind,
    c.srcDeviceId                   AS src_device_id,
    c.dstDeviceId                   AS dst_device_id,
    nullif(c.graphNodeId, 0)        AS graph_node_id,
    CAST(NULL AS BIGINT)            AS graph_id         -- not in nsys copy records
FROM raw.CUPTI_ACTIVITY_KIND_MEMCPY c
LEFT JOIN src_copy_kind ck ON ck.id = c.copyKind
LEFT JOIN src_mem_kind sk ON sk.id = c.srcKind
LEFT JOIN src_mem_kind dk ON dk.id = c.dstKind
WHERE c.start IS NOT NULL AND c."end" IS NOT NULL;
