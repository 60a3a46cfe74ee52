-- src_memcpy: memory copies from CUPTI_ACTIVITY_KIND_MEMCPY and the peer-to-peer copies of
-- CUPTI_ACTIVITY_KIND_MEMCPY2 (which alone record the source and destination devices). copyKind and
-- the memory kinds are raw CUPTI ids, labelled through src_copy_kind and src_mem_kind.
CREATE OR REPLACE TEMP VIEW src_memcpy AS
WITH c AS (
    SELECT rowid * 2 AS src_row, *, CAST(NULL AS BIGINT) AS srcDeviceId, CAST(NULL AS BIGINT) AS dstDeviceId
    FROM raw.CUPTI_ACTIVITY_KIND_MEMCPY
    UNION ALL BY NAME
    SELECT rowid * 2 + 1 AS src_row, * FROM raw.CUPTI_ACTIVITY_KIND_MEMCPY2
)
SELECT
    c.src_row,
    c.deviceId                      AS device_id,
    c.contextId                     AS context_id,
    c.streamId                      AS stream_id,
    coalesce(l.pid, (SELECT pid FROM src_only_process)) AS pid,
    nullif(c.correlationId, 0)      AS correlation_id,
    c.start                         AS ts,
    c."end" - c.start               AS dur,
    c.bytes                         AS bytes,
    coalesce(ck.label, 'Unknown (' || c.copyKind || ')') AS copy_kind,
    coalesce(sk.label, 'Unknown (' || c.srcKind || ')')  AS src_kind,
    coalesce(dk.label, 'Unknown (' || c.dstKind || ')')  AS dst_kind,
    c.srcDeviceId                   AS src_device_id,
    c.dstDeviceId                   AS dst_device_id,
    nullif(c.graphNodeId, 0)        AS graph_node_id,
    nullif(c.graphId, 0)            AS graph_id         -- Version 16 MEMCPY; MEMCPY2 has none
FROM c
LEFT JOIN src_launch l ON l.correlation_id = c.correlationId
LEFT JOIN src_copy_kind ck ON ck.id = c.copyKind
LEFT JOIN src_mem_kind sk ON sk.id = c.srcKind
LEFT JOIN src_mem_kind dk ON dk.id = c.dstKind
WHERE c.start IS NOT NULL AND c."end" IS NOT NULL;
