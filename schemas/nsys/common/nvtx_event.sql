-- src_nvtx_event: NVTX ranges and marks from NVTX_EVENTS. Text is inline (text) or registered
-- (textId into StringIds); domain names come from the per-process eventType 75 rows.
-- eventType: 34 mark, 59 push/pop, 60 start/end, 70/71 the same two imported from NVTXT files.
CREATE OR REPLACE TEMP VIEW src_nvtx_event AS
WITH dom AS (
    SELECT (n.globalTid >> 24) & 16777215 AS pid, n.domainId,
           arg_min(coalesce(n.text, s.value), n.start) AS domain
    FROM raw.NVTX_EVENTS n
    LEFT JOIN raw.StringIds s ON s.id = n.textId
    WHERE n.eventType = 75
    GROUP BY ALL
)
SELECT
    n.rowid                                                                AS src_row,
    CASE WHEN n.eventType = 34 THEN 'mark' ELSE 'range' END                AS kind,
    CASE WHEN n.eventType IN (59, 70) THEN 'push/pop' ELSE 'start/end' END AS style,
    (n.globalTid >> 24) & 16777215                                         AS pid,
    n.globalTid & 16777215                                                 AS tid,
    CASE WHEN n.endGlobalTid IS NOT NULL AND n.endGlobalTid <> n.globalTid
         THEN n.endGlobalTid & 16777215 END                                AS end_tid,
    n.start                                                                AS ts,
    n."end"                                                                AS end_ts,
    coalesce(n.text, s.value)                                              AS name,
    CASE WHEN coalesce(n.domainId, 0) = 0 THEN ''
         ELSE coalesce(dom.domain, 'domain ' || n.domainId) END            AS domain,
    n.color,
    n.category,
    CAST(NULL AS VARCHAR)                                                  AS args  -- Kineto's event args
FROM raw.NVTX_EVENTS n
LEFT JOIN raw.StringIds s ON s.id = n.textId
LEFT JOIN dom ON dom.pid = (n.globalTid >> 24) & 16777215 AND dom.domainId = n.domainId
WHERE n.eventType IN (34, 59, 60, 70, 71) AND n.start IS NOT NULL;
