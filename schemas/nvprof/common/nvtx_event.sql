-- src_nvtx_event: NVTX ranges and marks from CUPTI_ACTIVITY_KIND_MARKER, one row per record there:
-- flags 1 = mark, 2 = range start, 4 = range end (CUpti_ActivityFlag; the SYNC_* records are not read).
-- A range is its START record paired with the END record of the same marker id in the same process
-- (the k-th START of an id with its k-th END, in time order, should an id ever repeat). Process and
-- thread come from the objectId blob (src_object). Text and domain are StringTable ids (0 = none:
-- NULL text, default domain ''). Color and category come from CUPTI_ACTIVITY_KIND_MARKER_DATA.
--
-- Push/pop or start/end: nvprof's records do not say which API opened a range, so the style is
-- inferred, and only where the records are consistent with a push/pop stack:
--   a range is 'push/pop' when its START and END are THREAD records of the same thread and the END
--   is the first END on that thread, after the START, that brings the thread back to the nesting
--   depth at which the range started (i.e. it nests properly with every other such range of the
--   thread), or when it was never ended and no later END on its thread returns to its depth (a push
--   still open when profiling stopped). Every other range (ended on another thread, overlapping
--   its neighbours, or recorded on a process rather than a thread) is 'start/end'.
-- Depth here counts only ranges that start and end (or stay open) on one thread, ordered by
-- (timestamp, _id_). The ranges called push/pop nest properly by construction; the derive step
-- (schemas/derive/nvtx_range.sql) then computes their depth, parent and path as for nsys.
-- A table rather than a view: the pairing and the style rule sort every marker record, and ingest
-- reads src_nvtx_event three times (ranges, marks, stats).
CREATE OR REPLACE TEMP TABLE src_nvtx_event AS
WITH m AS (
    SELECT mk.rowid AS src_row, mk._id_, mk.flags, mk."timestamp" AS t, mk.id, mk.objectKind,
           o.pid, o.tid, mk.name, mk.domain
    FROM raw.CUPTI_ACTIVITY_KIND_MARKER mk
    LEFT JOIN src_object o ON o.object_kind = mk.objectKind AND o.object_id = mk.objectId
    WHERE mk."timestamp" IS NOT NULL
),
starts AS (
    SELECT *, row_number() OVER (PARTITION BY pid, id ORDER BY t, _id_) AS nth
    FROM m WHERE (flags & 2) <> 0
),
ends AS (
    SELECT *, row_number() OVER (PARTITION BY pid, id ORDER BY t, _id_) AS nth
    FROM m WHERE (flags & 4) <> 0 AND (flags & 2) = 0
),
ranges AS (
    SELECT s.src_row, s._id_ AS start_row, s.t AS ts, s.pid, s.tid, s.id, s.name, s.domain,
           e._id_ AS end_row, e.t AS end_ts, e.tid AS end_thread,
           coalesce(s.objectKind = 2 AND s.tid IS NOT NULL
                    AND (e._id_ IS NULL OR (e.objectKind = 2 AND e.tid = s.tid)), false) AS one_thread
    FROM starts s
    LEFT JOIN ends e ON e.pid IS NOT DISTINCT FROM s.pid AND e.id = s.id AND e.nth = s.nth
),
ev AS (
    SELECT pid, tid, start_row, ts AS t, start_row AS o, 1 AS delta FROM ranges WHERE one_thread
    UNION ALL
    SELECT pid, tid, start_row, end_ts, end_row, -1 FROM ranges WHERE one_thread AND end_row IS NOT NULL
),
walk AS (
    SELECT pid, tid, start_row, delta,
           row_number() OVER w AS pos,
           sum(delta) OVER (w ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS level
    FROM ev
    WINDOW w AS (PARTITION BY pid, tid ORDER BY t, o)
),
opens AS (SELECT pid, tid, start_row, pos, level - 1 AS depth FROM walk WHERE delta = 1),
closes AS (SELECT pid, tid, start_row, pos, level AS depth FROM walk WHERE delta = -1),
closer AS (
    -- for each START: the range whose END first returns its thread to the START's depth
    SELECT o.start_row, c.start_row AS closed_by
    FROM opens o
    ASOF LEFT JOIN closes c ON c.pid = o.pid AND c.tid = o.tid AND c.depth = o.depth AND o.pos < c.pos
),
md AS (
    SELECT id,
           CASE WHEN (flags & 2) <> 0 THEN color END AS color,  -- MARKER_COLOR_ARGB; else no color
           nullif(category, 0) AS category
    FROM raw.CUPTI_ACTIVITY_KIND_MARKER_DATA
    QUALIFY row_number() OVER (PARTITION BY id ORDER BY _id_) = 1
)
SELECT
    r.src_row,
    'range'                                                        AS kind,
    CASE WHEN r.one_thread AND cl.closed_by IS NOT DISTINCT FROM
              (CASE WHEN r.end_row IS NULL THEN NULL ELSE r.start_row END)
         THEN 'push/pop' ELSE 'start/end' END                      AS style,
    r.pid,
    r.tid,
    CASE WHEN r.end_row IS NOT NULL AND r.end_thread IS DISTINCT FROM r.tid
         THEN r.end_thread END                                     AS end_tid,
    r.ts,
    r.end_ts,
    CASE WHEN r.name <> 0 THEN sn.value END                       AS name,
    CASE WHEN coalesce(r.domain, 0) = 0 THEN ''
         ELSE coalesce(sd.value, 'domain ' || r.domain) END        AS domain,
    md.color,
    md.category,
    CAST(NULL AS VARCHAR)                                          AS args  -- Kineto's event args
FROM ranges r
LEFT JOIN closer cl ON cl.start_row = r.start_row
LEFT JOIN raw.StringTable sn ON sn._id_ = r.name
LEFT JOIN raw.StringTable sd ON sd._id_ = r.domain
LEFT JOIN md ON md.id = r.id
UNION ALL
SELECT
    m.src_row, 'mark', NULL, m.pid, m.tid, NULL, m.t, NULL,
    CASE WHEN m.name <> 0 THEN sn.value END,
    CASE WHEN coalesce(m.domain, 0) = 0 THEN '' ELSE coalesce(sd.value, 'domain ' || m.domain) END,
    md.color, md.category, NULL
FROM m
LEFT JOIN raw.StringTable sn ON sn._id_ = m.name
LEFT JOIN raw.StringTable sd ON sd._id_ = m.domain
LEFT JOIN md ON md.id = m.id
WHERE (m.flags & 1) <> 0 AND (m.flags & 6) = 0;
