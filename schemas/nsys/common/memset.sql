-- src_memset: memory sets from CUPTI_ACTIVITY_KIND_MEMSET.
CREATE OR REPLACE TEMP VIEW src_memset AS
SELECT
    m.rowid                         AS src_row,
    m.deviceId                      AS device_id,
    m.contextId                     AS context_id,
    m.streamId                      AS stream_id,
    (m.globalPid >> 24) & 16777215  AS pid,
    m.correlationId                 AS correlation_id,
    m.start                         AS ts,
    m."end" - m.start               AS dur,
    m.bytes                         AS bytes,
    m.value                         AS value,
    coalesce(mk.label, 'Unknown (' || m.memKind || ')') AS mem_kind,
    nullif(m.graphNodeId, 0)        AS graph_node_id,
    CAST(NULL AS BIGINT)            AS graph_id         -- not in nsys memset records
FROM raw.CUPTI_ACTIVITY_KIND_MEMSET m
LEFT JOIN src_mem_kind mk ON mk.id = m.memKind
WHERE m.start IS NOT NULL AND m."end" IS NOT NULL;
