-- src_thread: the CPU threads that make CUDA calls or run cpu_op / user_annotation ranges, with the
-- names of the trace's metadata events ('thread_name' per pid and tid, 'process_name' per pid).
-- The GPU "processes" and stream "threads" Kineto names for its timeline view are not threads.
CREATE OR REPLACE TEMP VIEW src_thread AS
WITH tids AS (
    SELECT DISTINCT pid, tid FROM raw.kineto_typed
    WHERE kind IN ('runtime', 'driver', 'cpu_op', 'user_annotation') AND pid IS NOT NULL AND tid IS NOT NULL
),
meta AS (
    SELECT name, pid, tid, json_extract_string(args, '$.name') AS value
    FROM raw.kineto_event WHERE ph = 'M' AND name IN ('thread_name', 'process_name')
)
SELECT t.pid, t.tid,
       (SELECT min(m.value) FROM meta m WHERE m.name = 'thread_name' AND m.pid = t.pid AND m.tid = t.tid) AS thread_name,
       (SELECT min(m.value) FROM meta m WHERE m.name = 'process_name' AND m.pid = t.pid) AS process_name
FROM tids t;
