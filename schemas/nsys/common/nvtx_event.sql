-- src_nvtx_event: NVTX ranges and marks from NVTX_EVENTS. Text is inline (text) or registered
-- (textId into StringIds); domain names come from the per-process eventType 75 rows.
-- eventType: 34 mark, 59 push/pop, 60 start/end, 70/71 the same two imported from NVTXT files.
CREATE OR REPLACE TEMP VIEW src_nvtx_event AS
WITH ev AS MATERIALIZED (
    SELECT n.rowid AS src_row, n.start, n."end", n.eventType, n.category, n.color,
           coalesce(n.text, s.value) AS txt, n.globalTid, n.endGlobalTid, n.domainId,
           (n.globalTid >> 24) & 16777215 AS pid
    FROM raw.NVTX_EVENTS n
    LEFT JOIN raw.StringIds s ON s.id = n.textId
    WHERE n.start IS NOT NULL
),
dom AS (
    SELECT pid, domainId, arg_min(txt, start) AS domain
    FROM ev WHERE eventType = 75
    GROUP BY pid, domainId
)
SELECT
    ev.src_row,
    CASE WHEN ev.eventType = 34 THEN 'mark' ELSE 'range' END                AS kind,
    CASE WHEN ev.eventType IN (59, 70) THEN 'push/pop' ELSE 'start/end' END AS style,
    ev.pid,
    ev.globalTid & 16777215                                                 AS tid,
    CASE WHEN ev.endGlobalTid IS NOT NULL AND ev.endGlobalTid <> ev.globalTid
         THEN ev.endGlobalTid & 16777215 END                                AS end_tid,
    ev.start                                                                AS ts,
    ev."end"                                                                AS end_ts,
    ev.txt                                                                  AS name,
    CASE WHEN coalesce(ev.domainId, 0) = 0 THEN ''
         ELSE coalesce(dom.domain, 'domain ' || ev.domainId) END            AS domain,
    ev.color,
    ev.category
FROM ev
LEFT JOIN dom ON dom.pid = ev.pid AND dom.domainId = ev.domainId
WHERE ev.eventType IN (34, 59, 60, 70, 71);
