-- src_nvtx_event: rocTX ranges as NVTX ranges: the rocpd regions whose event category is a MARKER_*
-- domain (rocTX: roctxRangePush/Pop, roctxRangeStart/Stop), one row each, already paired by
-- rocprofv3 (start and end on one region row). rocpd does not say which rocTX call opened a range:
-- every range is read as push/pop on its thread (the derive step nests them per thread), the
-- domain is the category name. A region of zero length is a mark (roctxMark). No file at hand
-- records rocTX: this mapping follows rocprofiler-sdk's schema, unverified on a real trace.
CREATE OR REPLACE TEMP TABLE src_nvtx_event AS
SELECT
    r.id                                                AS src_row,
    CASE WHEN r."end" > r.start THEN 'range' ELSE 'mark' END AS kind,
    CASE WHEN r."end" > r.start THEN 'push/pop' END     AS style,
    t.pid                                               AS pid,
    t.tid                                               AS tid,
    CAST(NULL AS BIGINT)                                AS end_tid,
    r.start                                             AS ts,
    CASE WHEN r."end" > r.start THEN r."end" END        AS end_ts,
    s.string                                            AS name,
    e.category                                          AS domain,
    CAST(NULL AS BIGINT)                                AS color,
    CAST(NULL AS BIGINT)                                AS category,
    CAST(NULL AS VARCHAR)                               AS args
FROM raw.rocpd_region r
JOIN src_rocpd_event e ON e.event_id = r.event_id
LEFT JOIN raw.rocpd_string s ON s.id = r.name_id
LEFT JOIN src_rocpd_thread t ON t.id = r.tid
WHERE e.category LIKE 'MARKER\_%' ESCAPE '\' AND r.start IS NOT NULL AND r."end" IS NOT NULL;
