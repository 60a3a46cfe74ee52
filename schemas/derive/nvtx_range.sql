-- derived_nvtx_range: nesting of the staged NVTX ranges (raw.nvtx_stage, one row per range with
-- its range_id), the same for every source format.
--
-- Push/pop ranges nest on their thread's stack. A range's depth is the number of ranges open on
-- its thread when it is pushed, found by a running sum over the thread's push (+1) and pop (-1)
-- events; its parent is the latest range pushed before it at depth - 1 (an ASOF join). Both grow
-- near-linearly with the number of ranges. Ties are broken so that a range that starts with its
-- parent or ends with it still nests inside it, and a zero-length range pops right after its push.
-- An unclosed range stays open to the end of the trace.
-- Start/end ranges may overlap and end on another thread, so they are not stacked: depth 0.
-- The steps run as separate statements into narrow tables of the staging catalog (raw), so
-- that no step recomputes another and the wide rows (names) are joined only once, at the end.

-- depth: running sum of +1 at each push and -1 at each pop, in event order per thread. The
-- order within one timestamp is a single key k: pops of ranges with a length first (the last
-- pushed first), then pushes in push (range_id) order, each zero-length range's pop right after
-- its push.
CREATE OR REPLACE TABLE raw.nvtx_depth AS
WITH pp AS (
    SELECT range_id, coalesce(pid, -1) AS pid, coalesce(tid, -1) AS tid, ts,
           coalesce(end_ts, 9223372036854775807) AS e
    FROM raw.nvtx_stage
    WHERE style = 'push/pop'
),
events AS (
    SELECT pid, tid, range_id, ts AS t, range_id * 2 + 1 AS k, 1::TINYINT AS delta FROM pp
    UNION ALL
    SELECT pid, tid, range_id,
           CASE WHEN e > ts THEN e ELSE ts END,
           CASE WHEN e > ts THEN -range_id * 2 - 4611686018427387904 ELSE range_id * 2 + 2 END,
           -1::TINYINT
    FROM pp
),
running AS (
    SELECT range_id, pid, tid, delta,
           sum(delta) OVER (PARTITION BY pid, tid ORDER BY t, k
                            ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) - 1 AS depth
    FROM events
)
SELECT range_id, pid, tid, CAST(depth AS INTEGER) AS depth FROM running WHERE delta = 1;

-- parent: the latest range pushed before this one, on its thread, one level up
CREATE OR REPLACE TABLE raw.nvtx_parent AS
SELECT c.range_id, c.depth, p.range_id AS parent_range_id
FROM raw.nvtx_depth c
ASOF LEFT JOIN raw.nvtx_depth p
  ON p.pid = c.pid AND p.tid = c.tid AND p.depth = c.depth - 1 AND c.range_id > p.range_id;

DROP TABLE raw.nvtx_depth;

-- path: names from the outermost range down, one level per recursion step; the row of every
-- range, with its depth and parent, is all the last step joins to the staged ranges
CREATE OR REPLACE TABLE raw.nvtx_path AS
WITH RECURSIVE tree AS MATERIALIZED (
    SELECT s.range_id, coalesce(s.name, '') AS name, coalesce(p.depth, 0) AS depth, p.parent_range_id
    FROM raw.nvtx_stage s LEFT JOIN raw.nvtx_parent p USING (range_id)
),
paths AS (
    SELECT range_id, depth, parent_range_id, name AS path FROM tree WHERE parent_range_id IS NULL
    UNION ALL
    SELECT t.range_id, t.depth, t.parent_range_id, paths.path || ' > ' || t.name
    FROM tree t JOIN paths ON t.parent_range_id = paths.range_id
)
SELECT range_id, depth, parent_range_id, path FROM paths;

DROP TABLE raw.nvtx_parent;

CREATE OR REPLACE TEMP VIEW derived_nvtx_range AS
SELECT s.range_id, s.pid, s.tid, s.end_tid, s.ts, s.end_ts - s.ts AS dur, s.name, s.domain, s.style,
       x.depth, x.parent_range_id, x.path, s.color, s.category
FROM raw.nvtx_stage s
JOIN raw.nvtx_path x USING (range_id);
