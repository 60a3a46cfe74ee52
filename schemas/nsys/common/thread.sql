-- src_thread: threads that are named (ThreadNames) or issue CUDA calls or NVTX events, with
-- their process names from PROCESSES.
CREATE OR REPLACE TEMP VIEW src_thread AS
WITH tids AS (
    SELECT globalTid FROM raw.ThreadNames
    UNION SELECT globalTid FROM raw.CUPTI_ACTIVITY_KIND_RUNTIME
    UNION SELECT globalTid FROM raw.NVTX_EVENTS WHERE eventType IN (34, 59, 60, 70, 71)
),
names AS (
    SELECT t.globalTid, arg_max(s.value, coalesce(t.priority, 0)) AS thread_name
    FROM raw.ThreadNames t JOIN raw.StringIds s ON s.id = t.nameId
    GROUP BY t.globalTid
),
procs AS (
    SELECT pid, min(name) AS process_name FROM raw.PROCESSES GROUP BY pid
)
SELECT DISTINCT
    (tids.globalTid >> 24) & 16777215 AS pid,
    tids.globalTid & 16777215         AS tid,
    names.thread_name,
    procs.process_name
FROM tids
LEFT JOIN names ON names.globalTid = tids.globalTid
LEFT JOIN procs ON procs.pid = (tids.globalTid >> 24) & 16777215
WHERE tids.globalTid IS NOT NULL;
