-- Labels and shared lookups of the nvprof adapters (created first; the other adapter files use them).

-- raw.TARGET_INFO_SESSION_START_TIME: nvprof records no session start (its timestamps are already
-- Unix-epoch ns), but ingest's trace row looks one up in this nsys table: an empty stand-in, created
-- here rather than declared in raw.sql so that it is not reported as a table missing from the file.
CREATE TABLE IF NOT EXISTS raw.TARGET_INFO_SESSION_START_TIME (utcEpochNs BIGINT);

-- src_copy_kind: CUPTI copyKind ids (CUpti_ActivityMemcpyKind) and their readable labels. CUPTI's 0-10
-- are the ids Nsight Systems keeps, so the labels are the nsys ones.
CREATE OR REPLACE TEMP VIEW src_copy_kind AS
SELECT * FROM (VALUES
    (0, 'Unknown'), (1, 'Host-to-Device'), (2, 'Device-to-Host'), (3, 'Host-to-Array'),
    (4, 'Array-to-Host'), (5, 'Array-to-Array'), (6, 'Array-to-Device'), (7, 'Device-to-Array'),
    (8, 'Device-to-Device'), (9, 'Host-to-Host'), (10, 'Peer-to-Peer')
) AS t(id, label);

-- src_launch_type: CUPTI launchType ids (CUpti_ActivityLaunchType, from 0; nsys counts from 1) with
-- the nsys labels; other ids (3 = CBL command list in newer CUPTI) give NULL.
CREATE OR REPLACE TEMP VIEW src_launch_type AS
SELECT * FROM (VALUES
    (0, 'Regular'), (1, 'Cooperative single device'), (2, 'Cooperative multi device')
) AS t(id, label);

-- nvprof_u32le(b, o): the unsigned 32-bit little-endian integer at byte offset o of the BLOB b
-- (NULL when b is shorter), for decoding CUPTI object ids (CUpti_ActivityObjectKindId).
CREATE OR REPLACE TEMP MACRO nvprof_u32le(b, o) AS
    CASE WHEN octet_length(b) >= o + 4 THEN
        CAST('0x' || substr(hex(b), 2 * o + 7, 2) || substr(hex(b), 2 * o + 5, 2)
                  || substr(hex(b), 2 * o + 3, 2) || substr(hex(b), 2 * o + 1, 2) AS BIGINT)
    END;

-- src_object: each distinct CUPTI object id of MARKER and NAME rows, decoded once: pid for
-- PROCESS (objectKind 1; the other 8 bytes are not meaningful) and THREAD (2) objects, tid for
-- THREAD objects (the unsigned OS thread id); NULL for DEVICE, CONTEXT and STREAM objects.
CREATE OR REPLACE TEMP VIEW src_object AS
SELECT
    objectKind AS object_kind,                                              -- CUPTI objectKind
    objectId   AS object_id,                                                -- the 12-byte blob as stored
    CASE WHEN objectKind IN (1, 2) THEN nvprof_u32le(objectId, 0) END AS pid,
    CASE WHEN objectKind = 2 THEN nvprof_u32le(objectId, 4) END AS tid
FROM (SELECT objectKind, objectId FROM raw.CUPTI_ACTIVITY_KIND_MARKER
      UNION SELECT objectKind, objectId FROM raw.CUPTI_ACTIVITY_KIND_NAME)
WHERE objectId IS NOT NULL;

-- src_only_process: the process of a file that records exactly one (nvprof writes one file per
-- process unless told otherwise); no row when it records several or none. A table, computed once:
-- kernel, memcpy and memset all read it.
CREATE OR REPLACE TEMP TABLE src_only_process AS
SELECT min(pid) AS pid
FROM (SELECT processId AS pid FROM raw.CUPTI_ACTIVITY_KIND_RUNTIME
      UNION SELECT processId FROM raw.CUPTI_ACTIVITY_KIND_DRIVER
      UNION SELECT pid FROM src_object)
WHERE pid IS NOT NULL
HAVING count(DISTINCT pid) = 1;

-- src_launch: one row per correlation id of a runtime or driver call, with the process that made
-- it. nvprof's GPU records carry no process: a kernel, copy or memset gets the process of the call
-- with its correlation id (RUNTIME first, else DRIVER, as PyProf does). Correlation ids are per
-- process, so an id that several processes used in one file gives no process (pid NULL, n_pids > 1).
-- A table, computed once (one row per API call): kernel, memcpy, memset and stats all join it.
CREATE OR REPLACE TEMP TABLE src_launch AS
SELECT
    correlationId AS correlation_id,                                        -- the call's correlation id
    CASE WHEN count(DISTINCT processId) = 1 THEN min(processId) END AS pid, -- its process, when unambiguous
    count(DISTINCT processId) AS n_pids                                     -- processes that used the id
FROM (SELECT correlationId, processId FROM raw.CUPTI_ACTIVITY_KIND_RUNTIME
      UNION ALL
      SELECT d.correlationId, d.processId FROM raw.CUPTI_ACTIVITY_KIND_DRIVER d
      WHERE d.correlationId NOT IN (SELECT correlationId FROM raw.CUPTI_ACTIVITY_KIND_RUNTIME
                                    WHERE correlationId IS NOT NULL))
WHERE correlationId IS NOT NULL AND correlationId <> 0
GROUP BY correlationId;
