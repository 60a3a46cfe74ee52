-- derived_nvtx_range: nesting of the NVTX ranges of the trace getvariable('trace_id') as read
-- (nvtx_range_source: one row per range with its range_id, the same for every source format), for
-- the family 'nesting' (schemas/derive/graph.csv), built when a query first reads nvtx_range.
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
-- Threads are numbered (th): the window and the ASOF join partition and sort on one integer
-- faster than on (pid, tid), 9 s instead of 13.5 s and 3.3 s instead of 5.9 s for the depths
-- and parents of 16 M ranges.

-- range ids of ranges an ingest left unnumbered (range_id -1 - their source row: see
-- schemas/nvtx_range_source.sql), in (start, end descending, source row) order: the narrow keys
-- sorted, the wide rows joined to them in nvtx_stage (a trace's ranges are all numbered or none)
CREATE OR REPLACE TABLE raw.nvtx_ids AS
SELECT range_id AS src_key,
       row_number() OVER (ORDER BY ts, end_ts DESC NULLS FIRST, range_id DESC) - 1 AS range_id
FROM nvtx_range_source
WHERE trace_id = getvariable('trace_id') AND range_id < 0;

-- the trace's ranges as read, numbered. The ids' filter, true of every row (their keys are
-- negative), is for DuckDB's estimate: it expects a fifth of a table's rows after a filter, so
-- without one the ids looked five times bigger than the trace's ranges, and it hashed the ranges,
-- names and all, in raw.nvtx_depth, raw.nvtx_path and the INSERT. Hashing the ids also gives the
-- INSERT the plan an eager ingest gets, whose order the PyTorch family reads faster (see below):
-- a first `report --by op` after `report --by range` on 1 M kernels, 23.5-23.9 against 25.2-26.0
-- CPU s (two pairs); the nesting itself no faster (25.8-25.9 against 25.5-26.1: bench/FIRST.md).
CREATE OR REPLACE TEMP VIEW nvtx_stage AS
SELECT coalesce(i.range_id, s.range_id) AS range_id, s.* EXCLUDE (trace_id, range_id)
FROM nvtx_range_source s
LEFT JOIN (SELECT * FROM raw.nvtx_ids WHERE src_key < 0) i ON i.src_key = s.range_id
WHERE s.trace_id = getvariable('trace_id');

-- depth: running sum of +1 at each push and -1 at each pop, in event order per thread. The
-- order within one timestamp is a single key k: pops of ranges with a length first (the last
-- pushed first), then pushes in push (range_id) order, each zero-length range's pop right after
-- its push.
CREATE OR REPLACE TABLE raw.nvtx_depth AS
WITH pp0 AS (
    SELECT range_id, coalesce(pid, -1) AS pid, coalesce(tid, -1) AS tid, ts,
           coalesce(end_ts, 9223372036854775807) AS e
    FROM temp.main.nvtx_stage
    WHERE style = 'push/pop'
),
threads AS MATERIALIZED (
    SELECT pid, tid, row_number() OVER () AS th FROM (SELECT DISTINCT pid, tid FROM pp0)
),
pp AS (
    SELECT p.range_id, t.th, p.ts, p.e FROM pp0 p JOIN threads t USING (pid, tid)
),
events AS (
    SELECT th, range_id, ts AS t, range_id * 2 + 1 AS k, 1::TINYINT AS delta FROM pp
    UNION ALL
    SELECT th, range_id,
           CASE WHEN e > ts THEN e ELSE ts END,
           CASE WHEN e > ts THEN -range_id * 2 - 4611686018427387904 ELSE range_id * 2 + 2 END,
           -1::TINYINT
    FROM pp
),
running AS (
    SELECT range_id, th, delta,
           sum(delta) OVER (PARTITION BY th ORDER BY t, k
                            ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) - 1 AS depth
    FROM events
)
SELECT range_id, CAST(depth AS INTEGER) AS depth, th * 4294967296 + depth AS level_key
FROM running WHERE delta = 1;

-- parent: the latest range pushed before this one, on its thread, one level up (level_key is
-- (thread, depth) as one integer; one less is the level above, or no level at depth 0)
CREATE OR REPLACE TABLE raw.nvtx_parent AS
SELECT c.range_id, c.depth, p.range_id AS parent_range_id
FROM raw.nvtx_depth c
ASOF LEFT JOIN raw.nvtx_depth p
  ON p.level_key = c.level_key - 1 AND c.range_id > p.range_id;

-- ranges nested deeper than the depth cap (getvariable('nvtx_depth_cap'), see op_range.sql): their
-- ancestor at the cap's last level (depth cap - 1), whose path theirs continues after ' > … > '
CREATE OR REPLACE TABLE raw.nvtx_deep AS
SELECT c.range_id, a.range_id AS anc_id
FROM raw.nvtx_depth c
ASOF JOIN raw.nvtx_depth a
  ON a.level_key = c.level_key - (c.depth - getvariable('nvtx_depth_cap') + 1) AND c.range_id > a.range_id
WHERE c.depth > getvariable('nvtx_depth_cap');

DROP TABLE raw.nvtx_depth;

-- path: grouping names (group_name.sql) from the outermost range down, so that the paths of
-- PyTorch's op ranges name operators, not instances ('aten::linear > aten::addmm', not
-- 'aten::linear, op_id = 17 > aten::addmm, op_id = 18'); the full names are nvtx_range.name. Only ranges that are some range's parent (750 k
-- of the 16 M ranges of bench's ATTR, 2.5 M of L's 7.5 M) are walked, one level per recursion
-- step; every range's path is then its parent's path and its own name, in the last step. The
-- walk stops at the depth cap: a range deeper than the cap gets the path of its ancestor at
-- depth cap - 1, then ' > … > ' and its own name (the full paths of a stack 20,000 deep would
-- take memory quadratic in the depth).
CREATE OR REPLACE TABLE raw.nvtx_path AS
WITH RECURSIVE tree AS MATERIALIZED (
    SELECT s.range_id, coalesce(nvtx_group_name(s.name), '') AS name, p.parent_range_id
    FROM temp.main.nvtx_stage s JOIN raw.nvtx_parent p USING (range_id)
    WHERE p.depth < getvariable('nvtx_depth_cap')
      AND s.range_id IN (SELECT parent_range_id FROM raw.nvtx_parent)
),
paths AS (
    SELECT range_id, name AS path FROM tree WHERE parent_range_id IS NULL
    UNION ALL
    SELECT t.range_id, paths.path || ' > ' || t.name
    FROM tree t JOIN paths ON t.parent_range_id = paths.range_id
)
SELECT range_id, path FROM paths;

-- the paths that ranges deeper than the cap continue: a few rows, or none. Joined in the view
-- below as raw.nvtx_path again, they made DuckDB build a second hash table of every path (12 M
-- ranges at 4 M kernels: the INSERT took 25 against 29-36 CPU s under the 3 GB memory limit, 32
-- against 36-40 under 1.2 GB; tests/query/test_join_plans.py).
-- (Making DuckDB hash raw.nvtx_parent instead of the wide ranges, by a filter that gives both
-- sides the same default selectivity, cut it to 19 CPU s under 3 GB (not under 1.2 GB), but
-- the ranges were then written in another order and the PyTorch family's first three steps,
-- which read them, took 2 CPU s more at 1 M kernels than the INSERT saved: not kept. Hashing the
-- right sides as written (traceql.core.settings.hash_right_side) keeps the ranges in about
-- range_id order and cut the INSERT to 19.7-20.6 CPU s, but torch_parsed then took 21.5-23.3
-- against 19.6 CPU s (4 M kernels). Probed by raw.nvtx_parent, which the ASOF join leaves in
-- (thread, depth) order, the INSERT writes the ranges of one depth together (554 changes of
-- depth in 12 M rows, against 7.6 M in range_id order): the same kinds of op side by side,
-- which the string work of the PyTorch family reads faster.)
CREATE OR REPLACE TABLE raw.nvtx_deep_path AS
SELECT d.range_id, y.path FROM raw.nvtx_deep d JOIN raw.nvtx_path y ON y.range_id = d.anc_id;

CREATE OR REPLACE TEMP VIEW derived_nvtx_range AS
SELECT getvariable('trace_id')::INTEGER AS trace_id, s.range_id, s.pid, s.tid, s.end_tid, s.ts, s.end_ts - s.ts AS dur, s.name,
       s.group_name, s.domain, s.style,
       coalesce(p.depth, 0) AS depth, p.parent_range_id,
       CASE WHEN p.parent_range_id IS NULL THEN coalesce(s.group_name, '')
            WHEN d.range_id IS NOT NULL THEN d.path || ' > … > ' || coalesce(s.group_name, '')
            ELSE x.path || ' > ' || coalesce(s.group_name, '') END AS path,
       s.color, s.category, s.args
FROM (SELECT *, nvtx_group_name(name) AS group_name FROM temp.main.nvtx_stage) s  -- the macro of derive/group_name.sql
LEFT JOIN raw.nvtx_parent p USING (range_id)
LEFT JOIN raw.nvtx_path x ON x.range_id = p.parent_range_id
LEFT JOIN raw.nvtx_deep_path d ON d.range_id = s.range_id;
