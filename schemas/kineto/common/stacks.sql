-- Python stacks of PyTorch profiler traces recorded with with_stack=True: the profiler writes one
-- 'python_function' event per call of a Python function ('train.py(42): step',
-- 'torch/nn/modules/module.py(1501): _call_impl'), on the thread that ran it; calls nest by time.
-- The stack of a CUDA API call (cuda_runtime, cuda_driver), and of a memory allocation or free
-- (a '[memory]' instant event, schemas/kineto/common/memory.sql), is the chain of Python frames
-- open on its thread when it started, from the outermost down to the innermost.
--
-- As for NVTX ranges (schemas/derive/nvtx_range.sql), without an interval join: one running sum
-- over each thread's frame starts (+1), ends (-1) and call starts (0) gives a frame's depth (the
-- frames open when it starts) and the number of frames open when a call starts; a frame's parent
-- and a call's innermost frame are the latest frame started at the level above, found by an ASOF
-- join on (thread, level). At one timestamp, ends come first, then starts (the longer frame
-- first), then calls. Zero-length frames, which hold no call, are left out.
-- Stacks are numbered by their frames, outermost first: a frame's key is a hash (md5) of its
-- parent's key and its own text, computed from the top down; calls made from the same Python
-- stack share one stack_id.
CREATE OR REPLACE TABLE raw.py_frame AS
SELECT src_row, coalesce(pid, -1) AS pid, coalesce(tid, -1) AS tid, ts, e, name
FROM (SELECT src_row, pid, tid, kineto_ns(ts) AS ts, kineto_ns(ts) + kineto_ns(dur) AS e, name
      FROM raw.kineto_event WHERE cat = 'python_function' AND ph = 'X')
WHERE ts IS NOT NULL AND e > ts;

CREATE OR REPLACE TABLE raw.py_open AS
WITH threads AS MATERIALIZED (
    SELECT pid, tid, row_number() OVER () AS th FROM (SELECT DISTINCT pid, tid FROM raw.py_frame)
),
events AS (
    SELECT t.th, f.src_row, f.ts AS tm, 1 AS ord, -f.e AS k, 1 AS delta, true AS frame
    FROM raw.py_frame f JOIN threads t ON t.pid = f.pid AND t.tid = f.tid
    UNION ALL
    SELECT t.th, f.src_row, f.e, 0, 0, -1, false
    FROM raw.py_frame f JOIN threads t ON t.pid = f.pid AND t.tid = f.tid
    UNION ALL
    SELECT t.th, c.src_row, c.ts, 2, 0, 0, false
    FROM raw.kineto_typed c JOIN threads t ON t.pid = coalesce(c.pid, -1) AND t.tid = coalesce(c.tid, -1)
    WHERE c.kind IN ('runtime', 'driver') AND c.ts IS NOT NULL
    UNION ALL
    SELECT t.th, m.src_row, m.ts, 2, 0, 0, false
    FROM (SELECT src_row, pid, tid, kineto_ns(ts) AS ts FROM raw.kineto_event
          WHERE name = '[memory]' AND ph = 'i') m
    JOIN threads t ON t.pid = coalesce(m.pid, -1) AND t.tid = coalesce(m.tid, -1)
    WHERE m.ts IS NOT NULL
)
SELECT src_row, th, tm AS ts, frame, ord = 2 AS call,
       sum(delta) OVER (PARTITION BY th ORDER BY tm, ord, k, src_row ROWS UNBOUNDED PRECEDING) AS open
FROM events
QUALIFY ord <> 0;

-- frames: depth and parent; calls: innermost frame
CREATE OR REPLACE TABLE raw.py_tree AS
WITH frames AS (
    SELECT src_row, ts, th * 4294967296 + open - 1 AS level_key FROM raw.py_open WHERE frame
)
SELECT c.src_row, c.level_key & 4294967295 AS depth, p.src_row AS parent
FROM frames c
ASOF LEFT JOIN frames p ON p.level_key = c.level_key - 1 AND c.ts >= p.ts;

CREATE OR REPLACE TABLE raw.py_call AS
WITH frames AS (
    SELECT src_row, ts, th * 4294967296 + open - 1 AS level_key FROM raw.py_open WHERE frame
)
SELECT c.src_row, f.src_row AS frame_row
FROM (SELECT src_row, ts, th * 4294967296 + open - 1 AS level_key FROM raw.py_open WHERE call AND open > 0) c
ASOF JOIN frames f ON f.level_key = c.level_key AND c.ts >= f.ts;

-- each frame's key, from the top down (only frames that are some frame's parent are walked, one
-- level per step; the other frames take their parent's key and their text in the last step)
CREATE OR REPLACE TABLE raw.py_key AS
WITH RECURSIVE inner_frames AS MATERIALIZED (
    SELECT t.src_row, t.parent, f.name
    FROM raw.py_tree t JOIN raw.py_frame f USING (src_row)
    WHERE t.src_row IN (SELECT parent FROM raw.py_tree)
),
keys AS (
    SELECT src_row, md5(name) AS key FROM inner_frames WHERE parent IS NULL
    UNION ALL
    SELECT i.src_row, md5(k.key || chr(10) || i.name) FROM inner_frames i JOIN keys k ON i.parent = k.src_row
)
SELECT t.src_row, CASE WHEN t.parent IS NULL THEN md5(f.name) ELSE md5(k.key || chr(10) || f.name) END AS key
FROM raw.py_tree t
JOIN raw.py_frame f USING (src_row)
LEFT JOIN keys k ON k.src_row = t.parent
WHERE t.src_row IN (SELECT frame_row FROM raw.py_call);

-- the stacks calls have: numbered, each walked up once from one of its frames
CREATE OR REPLACE TABLE raw.py_stack AS
SELECT key, dense_rank() OVER (ORDER BY key) - 1 AS stack_id, min(src_row) AS leaf
FROM raw.py_key GROUP BY key;

CREATE OR REPLACE TABLE raw.py_stack_frames AS
WITH RECURSIVE up AS (
    SELECT s.stack_id, s.leaf AS src_row FROM raw.py_stack s
    UNION ALL
    SELECT u.stack_id, t.parent FROM up u JOIN raw.py_tree t ON t.src_row = u.src_row WHERE t.parent IS NOT NULL
)
SELECT u.stack_id, CAST(t.depth AS INTEGER) AS level, f.name AS frame,
       CASE WHEN regexp_matches(f.name, '^.+\(\d+\): ') THEN regexp_extract(f.name, '^(.+)\(\d+\): ', 1) END AS module
FROM up u
JOIN raw.py_tree t ON t.src_row = u.src_row
JOIN raw.py_frame f ON f.src_row = u.src_row;

CREATE OR REPLACE TEMP VIEW src_call_stack AS
SELECT stack_id, level, frame, module, 'python' AS source FROM raw.py_stack_frames;

-- the stack of each call and memory event (by its row of raw.kineto_event)
CREATE OR REPLACE TEMP VIEW src_api_stack AS
SELECT c.src_row, s.stack_id
FROM raw.py_call c
JOIN raw.py_key k ON k.src_row = c.frame_row
JOIN raw.py_stack s ON s.key = k.key;
