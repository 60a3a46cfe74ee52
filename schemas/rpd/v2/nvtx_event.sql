-- src_nvtx_event: roctx ranges as NVTX ranges. rpd_tracer records each roctx range (roctxRangePush/Pop,
-- and the ranges PyTorch's autograd profiler opens through roctx: 'aten::mm', ...) as a rocpd_api row
-- named 'UserMarker', already paired (start and end on one row), its message the row's args string.
-- Every range is read as push/pop on its thread (the derive step nests them per thread); a row of
-- zero length is a mark (roctxMark). rpd names no domain: the default domain ''.
CREATE OR REPLACE TEMP VIEW src_nvtx_event AS
SELECT
    a.id                                                AS src_row,
    CASE WHEN a."end" > a.start THEN 'range' ELSE 'mark' END AS kind,
    CASE WHEN a."end" > a.start THEN 'push/pop' END     AS style,
    a.pid                                               AS pid,
    a.tid                                               AS tid,
    CAST(NULL AS BIGINT)                                AS end_tid,
    a.start                                             AS ts,
    CASE WHEN a."end" > a.start THEN a."end" END        AS end_ts,
    m.string                                            AS name,
    ''                                                  AS domain,
    CAST(NULL AS BIGINT)                                AS color,
    CAST(NULL AS BIGINT)                                AS category,
    CAST(NULL AS VARCHAR)                               AS args
FROM raw.rocpd_api a
JOIN src_rpd_api_name n ON n.id = a.apiName_id AND n.string = 'UserMarker'
LEFT JOIN raw.rocpd_string m ON m.id = a.args_id
WHERE a.start IS NOT NULL AND a."end" IS NOT NULL AND a."end" >= a.start;
