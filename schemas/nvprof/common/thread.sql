-- src_thread: threads that issue CUDA runtime or driver calls or NVTX markers, or that are named
-- (CUPTI_ACTIVITY_KIND_NAME objectKind 2, e.g. nvtxNameOsThread), with their process names (NAME
-- objectKind 1: nvprof records the command line). Thread ids are the unsigned 32-bit OS ids.
CREATE OR REPLACE TEMP VIEW src_thread AS
WITH tids AS (
    SELECT processId AS pid, threadId & 4294967295 AS tid FROM raw.CUPTI_ACTIVITY_KIND_RUNTIME
    UNION SELECT processId, threadId & 4294967295 FROM raw.CUPTI_ACTIVITY_KIND_DRIVER
    UNION SELECT pid, tid FROM src_object WHERE object_kind = 2
),
named AS (
    SELECT o.object_kind, o.pid, o.tid, min(s.value) AS name
    FROM raw.CUPTI_ACTIVITY_KIND_NAME n
    JOIN src_object o ON o.object_kind = n.objectKind AND o.object_id = n.objectId
    JOIN raw.StringTable s ON s._id_ = n.name AND n.name <> 0
    GROUP BY ALL
)
SELECT
    tids.pid,
    tids.tid,
    tn.name AS thread_name,
    pn.name AS process_name
FROM tids
LEFT JOIN named tn ON tn.object_kind = 2 AND tn.pid = tids.pid AND tn.tid = tids.tid
LEFT JOIN named pn ON pn.object_kind = 1 AND pn.pid = tids.pid
WHERE tids.pid IS NOT NULL AND tids.tid IS NOT NULL;
