-- raw.kineto_typed: the events the Kineto adapters read (categories in schemas/kineto/categories.csv,
-- loaded as src_categories): complete events (ph 'X') of every mapped category and the flow events
-- ('s', 't', 'f') of the launch and forward-backward flows, with
--   kind  the category's meaning (kernel, memcpy, memset, runtime, driver, cpu_op, user_annotation,
--         gpu_user_annotation, launch_flow, fwdbwd_flow), the same across the 2020-2026 names;
--   ts, dur  integer ns: the decimal text of the microseconds, read exactly and rounded to whole ns
--         halves away from zero (Kineto writes at most three decimals, so nothing is rounded in
--         practice); NULL when absent or not a number (such events are counted, see stats.sql);
--   a     for GPU work and CUDA calls (kinds kernel, memcpy, memset, runtime, driver), the
--         arguments the adapters below read, each as its JSON text (json_extract_string; NULL
--         when absent): device, context, stream, correlation, registers per thread, shared
--         memory, bytes, grid, block, size. Extracted here, once: each argument document is
--         parsed in this pass, not again by each adapter that reads one of them;
--   args  the arguments' JSON text for the other kinds (cpu_op, user_annotation, sync, ...),
--         NULL for those with a (nothing reads their text: not copied) and when absent.
-- A table: every adapter below reads it, most of them more than once.
--
-- kineto_ns(text): microseconds as written -> integer ns. The common shape (an optional '-', at
-- most 16 digits, at most three decimals: every Kineto writer's) is read as one integer, the
-- point removed, scaled by the decimals missing; another shape without an exponent and with at
-- most three decimals (blanks around it) as two integers split at the point; anything else (an
-- exponent, more decimals) through DECIMAL(38, 3), which rounds halves away from zero. All give
-- the same value; the first two are there for speed: DuckDB 1.5's string -> DECIMAL(38, 3) cast
-- took 68 s for the 1.4 M events of a 200 k-kernel trace (DECIMAL(18, 3) is fast but cannot hold
-- epoch microseconds with three decimals, 19 digits), and splitting at the point 2.4 CPU s for
-- the 700 k events of bench/kineto.py's 100 k kernels, against 0.4 for the first shape.
CREATE OR REPLACE TEMP MACRO kineto_ns(t) AS (
    CASE WHEN regexp_full_match(t, '-?[0-9]{1,16}(\.[0-9]{1,3})?') THEN
              CAST(replace(t, '.', '') AS BIGINT)
              * [1000, 100, 10, 1][CASE strpos(t, '.') WHEN 0 THEN 1 ELSE length(t) - strpos(t, '.') + 1 END]
         WHEN t IS NULL OR trim(t) = '' THEN NULL
         WHEN NOT contains(lower(t), 'e') AND length(split_part(trim(t), '.', 2)) <= 3 THEN
              (TRY_CAST(ltrim(split_part(trim(t), '.', 1), '-') AS BIGINT) * 1000
               + TRY_CAST(rpad(split_part(trim(t), '.', 2), 3, '0') AS BIGINT))
              * CASE WHEN starts_with(trim(t), '-') THEN -1 ELSE 1 END
         ELSE CAST(TRY_CAST(trim(t) AS DECIMAL(38, 3)) * 1000 AS BIGINT)
    END);

CREATE OR REPLACE TABLE raw.kineto_typed AS
SELECT e.src_row, c.kind, e.ph, e.cat, e.name, e.pid, e.pid_text, e.tid, e.tid_text,
       kineto_ns(e.ts)                                                          AS ts,
       kineto_ns(e.dur)                                                         AS dur,
       e.id, e.id_text,
       CASE WHEN c.kind NOT IN ('kernel', 'memcpy', 'memset', 'runtime', 'driver') THEN nullif(e.args, '') END AS args,
       CASE WHEN c.kind IN ('kernel', 'memcpy', 'memset', 'runtime', 'driver') THEN
            json_extract_string(nullif(e.args, ''), ['$.device', '$.context', '$.stream', '$.correlation',
                                                     '$."registers per thread"', '$."shared memory"', '$.bytes',
                                                     '$.grid', '$.block', '$.size']) END AS a
FROM raw.kineto_event e
JOIN src_categories c ON c.category = e.cat
WHERE (e.ph = 'X' AND c.kind NOT LIKE '%flow') OR (e.ph IN ('s', 't', 'f') AND c.kind LIKE '%flow');

-- raw.kineto_launch: per correlation id, the CUDA (or HIP) call that has it: its process, and how
-- many processes' calls use that id (Kineto traces hold one process, so one). GPU events carry no
-- CPU process (their pid is the device), so kernel.pid, memcpy.pid and memset.pid come from here.
-- size: the 'size' argument of the earliest call with arguments (ROCm's HIP copies: the bytes of
-- a copy whose GPU event records none, memcpy.sql).
CREATE OR REPLACE TABLE raw.kineto_launch AS
SELECT correlation, min(pid) AS pid, count(DISTINCT pid) AS pids,
       arg_min_null(size, ts) FILTER (WHERE a IS NOT NULL) AS size
FROM (SELECT TRY_CAST(a[4] AS BIGINT) AS correlation, pid, a, ts, a[10] AS size
      FROM raw.kineto_typed WHERE kind IN ('runtime', 'driver'))
WHERE correlation IS NOT NULL
GROUP BY correlation;

-- kineto_cpu_pid (a variable, read with getvariable: a value, not a table to join with every GPU
-- event): the trace's CPU process when there is exactly one (the process of every call and CPU
-- range), else NULL: the process of GPU work whose launching call the trace lacks.
SET VARIABLE kineto_cpu_pid = (
    SELECT min(pid)
    FROM (SELECT DISTINCT pid FROM raw.kineto_typed
          WHERE kind IN ('runtime', 'driver', 'cpu_op', 'user_annotation') AND pid IS NOT NULL)
    HAVING count(*) = 1);

-- raw.kineto_gpu: kernels, copies and memsets with their arguments. The correlation id is the
-- event's 'correlation' argument, else the id of the launch flow ('ac2g', 'async', 'async_gpu')
-- that ends on it (same GPU pid, tid and ts): the id such flows carry is the correlation id.
-- The device is the 'device' argument, else the event's pid (Kineto's GPU pid is the device
-- index); the stream the 'stream' argument, else the tid.
CREATE OR REPLACE TABLE raw.kineto_gpu AS
WITH g AS (
    SELECT src_row, kind, name, ts, dur, pid, tid, a   -- (a: the arguments, extracted in raw.kineto_typed)
    FROM raw.kineto_typed
    WHERE kind IN ('kernel', 'memcpy', 'memset') AND ts IS NOT NULL AND dur IS NOT NULL
),
flow_end AS (
    SELECT pid, tid, ts, min(id) AS id
    FROM raw.kineto_typed WHERE kind = 'launch_flow' AND ph = 'f' AND id IS NOT NULL
    GROUP BY ALL
)
-- (the flow is looked up for every GPU event, used only where the argument is absent: a condition
-- on the argument in the join would make it a nested loop)
SELECT g.src_row, g.kind, g.name, g.ts, g.dur,
       CASE WHEN TRY_CAST(g.a[1] AS HUGEINT) IS NOT NULL AND TRY_CAST(g.a[1] AS INTEGER) IS NULL THEN NULL
            ELSE coalesce(TRY_CAST(g.a[1] AS INTEGER), TRY_CAST(g.pid AS INTEGER)) END AS device_id,
                                                   -- (a device number beyond INTEGER: NULL, counted in stats.sql)
       TRY_CAST(g.a[2] AS BIGINT)                                   AS context_id,
       coalesce(TRY_CAST(g.a[3] AS BIGINT), g.tid)                  AS stream_id,
       coalesce(TRY_CAST(g.a[4] AS BIGINT), f.id)                   AS correlation_id,
       TRY_CAST(g.a[5] AS INTEGER)                                  AS registers_per_thread,
       TRY_CAST(g.a[6] AS BIGINT)                                   AS shared_memory,
       TRY_CAST(g.a[7] AS BIGINT)                                   AS bytes,
       TRY_CAST(g.a[8] AS INTEGER[])                                AS grid,
       TRY_CAST(g.a[9] AS INTEGER[])                                AS block
FROM g
LEFT JOIN flow_end f
  ON f.pid IS NOT DISTINCT FROM g.pid AND f.tid IS NOT DISTINCT FROM g.tid AND f.ts = g.ts;

-- src_copy_kind: the direction abbreviations of Kineto's copy names ('Memcpy HtoD (Pageable -> Device)')
-- and their readable labels, as nsys names them.
CREATE OR REPLACE TEMP VIEW src_copy_kind AS
SELECT * FROM (VALUES
    ('HtoD', 'Host-to-Device'), ('DtoH', 'Device-to-Host'), ('DtoD', 'Device-to-Device'),
    ('HtoH', 'Host-to-Host'), ('PtoP', 'Peer-to-Peer'), ('HtoA', 'Host-to-Array'), ('AtoH', 'Array-to-Host'),
    ('AtoA', 'Array-to-Array'), ('AtoD', 'Array-to-Device'), ('DtoA', 'Device-to-Array')
) AS t(abbr, label);
