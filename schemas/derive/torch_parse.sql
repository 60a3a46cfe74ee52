-- The first step of torch_op (traceql.derive.pytorch.prepare_torch_op runs this file, fills
-- raw.torch_anc from derived_torch_anc, then derive/torch_op.sql pairs and directs the ops).
--
-- raw.torch_parsed: the PyTorch op ranges of the trace being ingested (getvariable('trace_id')),
-- parsed. Every string generation PyTorch has written:
--
--   1.0               'addmm, seq=5'            backward node: 'AddmmBackward, stashed seq=5'
--   ~1.1 - ~1.11      'aten::addmm, seq = 5'    backward node: 'AddmmBackward0, seq = 5' (same format)
--     + record_shapes 'aten::addmm, seq = 5, sizes = [[120], [32, 400], [400, 120], [], []]'
--     seq < 0 then    ', sizes = [[...]]'       (the name was dropped: name is NULL)
--   ~1.12+ observer   'aten::addmm, seq = 5, op_id = 17[, sizes = [...]][, input_op_ids = [(12,0), (0,-1)]]'
--   seq -1            'aten::mm' / 'aten::mm, op_id = 18' (grad mode off, ops run inside backward)
--   engine wrapper    'autograd::engine::evaluate_function: AddmmBackward0[, op_id = 19]'
--   PyProf markers    "{'mod': 'torch.nn.functional', 'op': 'linear', 'args': [{'name': '', 'type': 'tensor', 'shape': (32, 400), 'dtype': 'float32'}, ...]}"
--   Kineto cpu_op     name 'aten::addmm' as written; its args (nvtx_range.args, the PyTorch profiler's JSON) give
--                     'Sequence number' (seq), 'Input Dims' (2021: 'Input dims'; sizes, written with ', ' as
--                     emit_nvtx writes them) and 'Input type' (dtypes: c10::BFloat16 -> bfloat16, long int -> int64,
--                     non-tensors empty). Every cpu_op is a torch op (the profiler records only operators as cpu_op;
--                     record_function blocks are user_annotation ranges); 'Fwd thread id' is not used: forward ops
--                     write 0, backward ops the forward thread's RecordFunction id (1), neither an OS thread.
--                     The range name and its args are the one source: nothing is parsed from elsewhere.
--
-- The suffixes are anchored at the end of the string, so names holding commas or parentheses
-- ('FSDP::post_forward (encoder.block.0), op_id = 7') keep them. A range without any suffix is
-- a torch op when its name is namespaced like PyTorch's (aten::, prim::, c10d::, torch::,
-- autograd::) or is a backward node name ('XxxBackward', 'XxxBackward0').
--
-- Nesting: for each op, its enclosing torch ops, PyProf markers and 'layer:' ranges on its
-- thread, found per nesting level with an ASOF join as in op_range.sql (no recursion), at the
-- levels above the NVTX depth cap (getvariable('nvtx_depth_cap')) only.
--
-- (cand and parsed are each read twice: NOT MATERIALIZED keeps DuckDB from holding a copy of
-- every candidate range with its name while the table is written. The PyProf arguments read
-- parsed, not typed, so that typed, read once, is not held either. At 4 M generated kernels the
-- copies spilled: building the PyTorch family took 90 s instead of 101, 170 CPU s instead of 189.)
CREATE OR REPLACE TABLE raw.torch_parsed AS
WITH cand AS NOT MATERIALIZED (
    SELECT range_id, coalesce(pid, -1) AS pid, coalesce(tid, -1) AS tid, ts, dur, depth, name,
           CASE WHEN domain = 'cpu_op' AND args IS NOT NULL THEN args END AS kineto_args
    FROM nvtx_range
    WHERE trace_id = getvariable('trace_id') AND style = 'push/pop'
      AND ((domain = 'cpu_op' AND args IS NOT NULL) OR name LIKE '%, seq = %' OR name LIKE '%, op_id = %' OR name LIKE '%, sizes = %'
           OR name LIKE '%seq=%' OR name LIKE '%Backward%' OR name LIKE '{''%'
           OR name LIKE 'aten::%' OR name LIKE 'prim::%' OR name LIKE 'c10d::%'
           OR name LIKE '\_c10d\_functional::%' ESCAPE '\' OR name LIKE 'torch::%' OR name LIKE 'autograd::%')
),
-- Kineto 'Input type' spellings -> the dtype names of PyProf markers ('' for non-tensors)
kineto_types AS (
    SELECT range_id,
           list_transform(TRY_CAST(json_extract(kineto_args, '$."Input type"') AS VARCHAR[]), t ->
               CASE lower(t) WHEN 'float' THEN 'float32' WHEN 'double' THEN 'float64' WHEN 'c10::half' THEN 'float16'
                    WHEN 'c10::bfloat16' THEN 'bfloat16' WHEN 'long int' THEN 'int64' WHEN 'long' THEN 'int64'
                    WHEN 'int' THEN 'int32' WHEN 'short int' THEN 'int16' WHEN 'short' THEN 'int16'
                    WHEN 'signed char' THEN 'int8' WHEN 'unsigned char' THEN 'uint8' WHEN 'bool' THEN 'bool'
                    WHEN 'c10::complex<float>' THEN 'complex64' WHEN 'c10::complex<double>' THEN 'complex128'
                    ELSE CASE WHEN lower(t) LIKE 'c10::float8\_%' ESCAPE '\' THEN lower(substr(t, 6)) ELSE '' END
               END) AS types
    FROM cand WHERE kineto_args IS NOT NULL
),
-- the regular expressions run only on the strings that can match them (most ranges of a big
-- trace are bare 'aten::x' names)
parsed AS NOT MATERIALIZED (
    SELECT c.*,
           CASE WHEN kineto_args IS NULL AND name LIKE '%seq=%' THEN
               regexp_extract(name, '^(.*), (stashed )?seq=(-?\d+)$', ['nm', 'stashed', 'seq']) END AS v10,
           CASE WHEN kineto_args IS NULL AND contains(name, ', ') THEN
               regexp_extract(name,
                   '^(.*?)(?:, seq = (-?\d+))?(?:, op_id = (\d+))?'
                   '(?:, sizes = (\[(?:\[[-\d, ]*\](?:, )?)*\]))?'
                   '(?:, input_op_ids = (\[(?:\(-?\d+, ?-?\d+\)(?:, )?)*\]))?$',
                   ['nm', 'seq', 'op_id', 'sizes', 'ids']) END AS vx,
           kineto_args IS NULL AND name LIKE '{''%' AND contains(name, '''op'': ''')
               AND contains(name, '''args'': [') AS is_pyprof
    FROM cand c
),
fields AS (
    SELECT range_id, pid, tid, ts, dur, depth, name AS text, is_pyprof, kineto_args,
           CASE WHEN is_pyprof THEN 'pyprof'
                WHEN kineto_args IS NOT NULL THEN 'kineto'
                WHEN v10.seq <> '' THEN '1.0'
                WHEN vx.op_id <> '' THEN 'observer'
                WHEN vx.seq <> '' OR vx.sizes <> '' THEN 'legacy'
                ELSE 'bare' END AS generation,
           CASE WHEN is_pyprof THEN regexp_extract(name, '''op'': ''([^'']*)''', 1)
                WHEN v10.seq <> '' THEN v10.nm
                WHEN vx IS NULL THEN name  -- Kineto names too
                ELSE nullif(vx.nm, '') END AS op_name,
           CASE WHEN is_pyprof THEN regexp_extract(name, '''mod'': ''([^'']*)''', 1) END AS module,
           CASE WHEN kineto_args IS NOT NULL THEN TRY_CAST(json_extract_string(kineto_args, '$."Sequence number"') AS BIGINT)
                WHEN v10.seq <> '' THEN TRY_CAST(v10.seq AS BIGINT) ELSE TRY_CAST(nullif(vx.seq, '') AS BIGINT) END AS seq,
           coalesce(v10.stashed <> '', false) AS stashed,
           TRY_CAST(nullif(vx.op_id, '') AS BIGINT) AS op_id,
           CASE WHEN kineto_args IS NOT NULL THEN
                    replace(CAST(coalesce(json_extract(kineto_args, '$."Input Dims"'),
                                          json_extract(kineto_args, '$."Input dims"')) AS VARCHAR), ',', ', ')
                ELSE nullif(vx.sizes, '') END AS sizes_text,
           nullif(vx.ids, '') AS input_op_ids,
           CASE WHEN kineto_args IS NOT NULL THEN nullif(json_extract_string(kineto_args, '$."Collective name"'), '') END
               AS collective,
           CASE WHEN kineto_args IS NOT NULL AND contains(kineto_args, '"Collective name"') THEN
               greatest(TRY_CAST(json_extract_string(kineto_args, '$."In msg nelems"') AS BIGINT),
                        TRY_CAST(json_extract_string(kineto_args, '$."Out msg nelems"') AS BIGINT))
               * CASE json_extract_string(kineto_args, '$.dtype')
                     WHEN 'Double' THEN 8 WHEN 'Long' THEN 8 WHEN 'ComplexFloat' THEN 8 WHEN 'ComplexDouble' THEN 16
                     WHEN 'Float' THEN 4 WHEN 'Int' THEN 4 WHEN 'ComplexHalf' THEN 4
                     WHEN 'Half' THEN 2 WHEN 'BFloat16' THEN 2 WHEN 'Short' THEN 2
                     WHEN 'Byte' THEN 1 WHEN 'Char' THEN 1 WHEN 'Bool' THEN 1
                     ELSE CASE WHEN json_extract_string(kineto_args, '$.dtype') LIKE 'Float8%' THEN 1 END END
           END AS comm_bytes
    FROM parsed
),
typed AS (
    SELECT f.*,
           CASE WHEN is_pyprof THEN 'pyprof'
                WHEN op_name LIKE 'autograd::engine::evaluate_function: %' THEN 'engine_wrapper'
                WHEN stashed OR (op_name LIKE '%Backward%' AND regexp_matches(op_name, 'Backwards?\d*$'))
                     OR (op_name LIKE 'torch::autograd::%' AND regexp_matches(op_name, '^torch::autograd::\w+$'))
                    THEN 'backward_node'
                ELSE 'op' END AS kind
    FROM fields f
    WHERE is_pyprof OR generation <> 'bare'
       OR op_name LIKE 'aten::%' OR op_name LIKE 'prim::%' OR op_name LIKE 'c10d::%' OR op_name LIKE 'torch::%'
       OR op_name LIKE 'autograd::%' OR op_name LIKE '\_c10d\_functional::%' ESCAPE '\'
       OR (op_name LIKE '%Backward%' AND regexp_matches(op_name, '^[A-Za-z_][\w:]*Backwards?\d*$'))
),
-- PyProf arguments: one '{'name': .., 'type': .., ['shape': (..), 'dtype': ..]}' per argument
args AS (
    SELECT range_id,
           regexp_extract_all(name, '\{''name'': ''[^'']*'', ''type'': ''\w+''(?:, ''shape'': \(([^)]*)\), ''dtype'': ''(\w+)'')?', 1) AS shp,
           regexp_extract_all(name, '\{''name'': ''[^'']*'', ''type'': ''\w+''(?:, ''shape'': \(([^)]*)\), ''dtype'': ''(\w+)'')?', 2) AS dts
    FROM parsed WHERE is_pyprof
)
SELECT t.range_id, t.pid, t.tid, t.ts, t.dur, t.depth, t.kind, t.generation, t.op_name AS name, t.module, t.seq,
       t.op_id, t.input_op_ids, t.collective, t.comm_bytes,
       coalesce(t.sizes_text,
                '[' || array_to_string(list_transform(a.shp, s -> '[' || coalesce(rtrim(s, ','), '') || ']'), ', ') || ']')
           AS sizes,
       CASE WHEN a.range_id IS NOT NULL THEN array_to_string(list_transform(a.dts, d -> coalesce(d, '')), ',')
            WHEN k.types IS NOT NULL THEN array_to_string(k.types, ',') END AS dtypes,
       coalesce(t.ts + t.dur, 9223372036854775807) AS e
FROM typed t LEFT JOIN args a USING (range_id) LEFT JOIN kineto_types k USING (range_id);

-- derived_torch_anc: the enclosing torch ops, markers and 'layer:' ranges of every op, one
-- level per ASOF row, for the ops whose range_id is in [getvariable('anc_from'),
-- getvariable('anc_to')) (set below to every op). traceql.derive.pytorch fills raw.torch_anc
-- one window after another when a trace has more ops than TORCH_ANC_WINDOW_OPS, so that the
-- ASOF join sorts one window's levels at a time: at 10 M generated kernels (28.3 M ops)
-- 35.3-36.8 CPU s and 0.07 GB written in 8 windows against 38.8-39.9 CPU s and 3.8 GB in one
-- pass, the same rows. A window reads only the outer ranges that start before anc_to (range ids
-- are in start order) and end at or after getvariable('anc_reach'), the earliest end of the
-- window's ops. The rows are those of one pass: at each level the ASOF join picks the range it
-- picks without the window, unless that one ends before anc_reach and so encloses no op of the
-- window, and then it picks none (on one thread, the ranges of one level do not overlap: an
-- earlier one ended before the later one began).
SET VARIABLE anc_from = -9223372036854775808;
SET VARIABLE anc_to = 9223372036854775807;
SET VARIABLE anc_reach = -9223372036854775808;

CREATE OR REPLACE TEMP VIEW derived_torch_anc AS
WITH outer_ranges AS (
    SELECT range_id, pid, tid, depth, e, kind AS cls, NULL AS layer FROM raw.torch_parsed
    WHERE range_id < getvariable('anc_to') AND e >= getvariable('anc_reach')
    UNION ALL
    SELECT range_id, coalesce(pid, -1), coalesce(tid, -1), depth, coalesce(ts + dur, 9223372036854775807),
           'layer', substr(name, 7)
    FROM nvtx_range
    WHERE trace_id = getvariable('trace_id') AND style = 'push/pop' AND name LIKE 'layer:%'
      AND range_id < getvariable('anc_to') AND coalesce(ts + dur, 9223372036854775807) >= getvariable('anc_reach')
),
-- per thread, the depths (below the depth cap) at which it has such ranges; each op looks at
-- those above it: one row per op in the join (on the thread, no inequality), then its levels.
-- (Every level above an op would be linear too, but ops at depth 3 under 'train_step >
-- backward' ranges that are not torch ops looked up 3 levels for nothing: 42 M rows on bench's
-- ATTR instead of none.) Threads are numbered and a level is one integer, th + depth, as in
-- op_range.sql: the ASOF join partitions and sorts on it faster than on (pid, tid, depth), 12-14
-- instead of 18-20 CPU s for 15 M levels of 11 M ops (4 M generated kernels). MATERIALIZED: x
-- and candidates must read the same numbering (row_number() OVER () is in no set order).
levels AS MATERIALIZED (
    SELECT pid, tid, row_number() OVER () * 4294967296 AS th, list(DISTINCT depth) AS depths
    FROM outer_ranges WHERE depth < getvariable('nvtx_depth_cap') GROUP BY pid, tid
),
x AS MATERIALIZED (
    SELECT p.range_id, p.e, l.th + unnest(list_filter(l.depths, d -> d < p.depth)) AS level_key
    FROM raw.torch_parsed p JOIN levels l ON l.pid = p.pid AND l.tid = p.tid
    WHERE p.range_id >= getvariable('anc_from') AND p.range_id < getvariable('anc_to')
),
-- only the levels some op looks up (when all ops sit at one depth, none: the join is empty)
candidates AS (
    SELECT o.range_id, o.depth, o.e, o.cls, o.layer, l.th + o.depth AS level_key
    FROM outer_ranges o JOIN levels l ON l.pid = o.pid AND l.tid = o.tid
    WHERE l.th + o.depth IN (SELECT DISTINCT level_key FROM x)
)
SELECT x.range_id, a.range_id AS anc_id, a.depth AS anc_depth, a.cls, a.layer
FROM x ASOF JOIN candidates a ON a.level_key = x.level_key AND x.range_id > a.range_id
WHERE a.e >= x.e;
