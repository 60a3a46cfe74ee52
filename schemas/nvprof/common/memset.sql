-- src_memset: memory sets from CUPTI_ACTIVITY_KIND_MEMSET; memoryKind is a raw CUPTI id (src_mem_kind).
CREATE OR REPLACE TEMP VIEW src_memset AS
SELECT
    m.rowid                         AS src_row,
    m.deviceId                      AS device_id,
    m.contextId                     AS context_id,
    m.streamId                      AS stream_id,
    coalesce(l.pid, (SELECT pid FROM src_only_process)) AS pid,
    nullif(m.correlationId, 0)      AS correlation_id,
    m.start                         AS ts,
    m."end" - m.start               AS dur,
    m.bytes                         AS bytes,
    m.value                         AS value,
    coalesce(mk.label, 'Unknown (' || m.memoryKind || ')') AS mem_kind,
    nullif(m.graphNodeId, 0)        AS graph_node_id,
    nullif(m.graphId, 0)            AS graph_id
FROM raw.CUPTI_ACTIVITY_KIND_MEMSET m
LEFT JOIN src_launch l ON l.correlation_id = m.correlationId
LEFT JOIN src_mem_kind mk ON mk.id = m.memoryKind
WHERE m.start IS NOT NULL AND m."end" IS NOT NULL;
