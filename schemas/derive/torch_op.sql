-- derived_torch_op: the PyTorch op ranges of the trace being ingested (getvariable('trace_id')),
-- parsed, nested and paired forward <-> backward. Every string generation PyTorch has written:
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
-- Direction: backward nodes, engine wrappers and everything inside them are 'backward'; so is
-- every op of a thread that runs backward nodes and no forward op with a positive seq (the
-- autograd engine's device thread, where PyTorch <= 1.4 also ran buffer accumulation outside
-- the nodes).
-- Pairing: the seq counter is per thread and a node carries the seq of the forward op that
-- created it; backward strings do not name the forward thread, so the key is (pid, seq). A
-- node pairs with the latest forward op of its process that started before it with the same
-- seq and whose enclosing op does not share that seq (the outermost of nested ops sharing one).
-- GraphRoot, which backward() itself creates (PyTorch <= 1.4 printed a seq for it), pairs with
-- nothing.
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

-- enclosing torch ops, markers and 'layer:' ranges of every op, one level per ASOF row
CREATE OR REPLACE TABLE raw.torch_anc AS
WITH outer_ranges AS (
    SELECT range_id, pid, tid, depth, e, kind AS cls, NULL AS layer FROM raw.torch_parsed
    UNION ALL
    SELECT range_id, coalesce(pid, -1), coalesce(tid, -1), depth, coalesce(ts + dur, 9223372036854775807),
           'layer', substr(name, 7)
    FROM nvtx_range
    WHERE trace_id = getvariable('trace_id') AND style = 'push/pop' AND name LIKE 'layer:%'
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

-- per op with enclosing ranges: its nearest and outermost enclosing torch op, nearest backward
-- node or engine wrapper, nearest PyProf marker and its 'layer:' names (ops with none of these,
-- most of a big trace, have no row)
CREATE OR REPLACE TABLE raw.torch_agg AS
SELECT range_id,
       arg_max(anc_id, anc_depth) FILTER (WHERE cls <> 'pyprof' AND cls <> 'layer') AS parent_op_range_id,
       arg_min(anc_id, anc_depth) FILTER (WHERE cls <> 'pyprof' AND cls <> 'layer') AS top_anc,
       arg_max(anc_id, anc_depth) FILTER (WHERE cls IN ('backward_node', 'engine_wrapper')) AS node_range_id,
       arg_max(anc_id, anc_depth) FILTER (WHERE cls = 'pyprof') AS marker_range_id,
       string_agg(layer, ':' ORDER BY anc_depth) FILTER (WHERE cls = 'layer') AS layer,
       count(*) FILTER (WHERE cls IN ('backward_node', 'engine_wrapper')) AS backward_levels
FROM raw.torch_anc
GROUP BY range_id;

-- Recompute (activation checkpointing, torch.utils.checkpoint): forward ops that run again
-- inside the backward pass. Backward formulas run with grad mode off; a checkpointed segment is
-- re-run under enable_grad (non-reentrant: from the saved-tensor unpack hook inside the node
-- that needs the tensor; reentrant: inside CheckpointFunctionBackward). A recompute root is an
-- op of kind 'op' inside a backward node or engine wrapper (torch_agg.node_range_id), not the
-- node its engine wrapper names (custom C++ nodes such as 'torch::autograd::CppNode<..>' are
-- written as plain ops), that either
--   - records autograd history: a seq >= 0 in a format that writes a seq only for such ops
--     (generations 'kineto' and 'observer': ops inside backward nodes carry none there;
--     PyTorch <= ~1.5 emit_nvtx wrote the thread's counter for every op, 'seq = 0' inside
--     backward, so its seqs say nothing), or
--   - runs directly in a CheckpointFunctionBackward node (reentrant checkpointing, the only
--     kind before PyTorch 1.11).
-- An op is recompute when it is a root or lies inside one; recompute_top_id is the outermost
-- root around it (itself included). Backward run with create_graph=True records seqs too and
-- would read as recompute: the trace cannot tell the two apart without Python stacks.
CREATE OR REPLACE TABLE raw.torch_recompute AS
WITH roots AS (
    SELECT p.range_id
    FROM raw.torch_parsed p
    JOIN raw.torch_agg g USING (range_id)
    JOIN raw.torch_parsed n ON n.range_id = g.node_range_id
    LEFT JOIN raw.torch_parsed w ON w.range_id = g.parent_op_range_id
    WHERE p.kind = 'op'
      AND NOT coalesce(w.kind = 'engine_wrapper' AND w.name = 'autograd::engine::evaluate_function: ' || p.name, false)
      AND ((p.generation IN ('kineto', 'observer') AND p.seq >= 0)
           OR n.name IN ('CheckpointFunctionBackward', 'autograd::engine::evaluate_function: CheckpointFunctionBackward'))
),
inside AS (
    SELECT a.range_id, arg_min(a.anc_id, a.anc_depth) AS top_id
    FROM raw.torch_anc a
    WHERE a.anc_id IN (SELECT range_id FROM roots)
    GROUP BY a.range_id
)
SELECT coalesce(i.range_id, r.range_id) AS range_id, coalesce(i.top_id, r.range_id) AS recompute_top_id
FROM roots r FULL JOIN inside i ON i.range_id = r.range_id;

-- threads that run backward nodes and no forward work of their own (the autograd engine's)
CREATE OR REPLACE TABLE raw.torch_engine AS
WITH candidates AS (
    SELECT DISTINCT pid, tid FROM raw.torch_parsed WHERE kind IN ('backward_node', 'engine_wrapper')
)
SELECT c.pid, c.tid
FROM candidates c
WHERE NOT EXISTS (
    SELECT 1
    FROM raw.torch_parsed p LEFT JOIN raw.torch_agg g USING (range_id)
    WHERE p.pid = c.pid AND p.tid = c.tid
      AND (p.kind = 'pyprof' OR (p.kind = 'op' AND g.node_range_id IS NULL AND p.seq > 0)));

-- forward partner of every backward node with a seq. A node nested inside another node (the
-- backward that reentrant checkpointing runs inside CheckpointFunctionBackward: a backward node
-- or engine wrapper around it besides its own wrapper) pairs the same way with the recompute
-- ops of its own thread, whose seq counter made it; the other nodes with forward ops outside
-- the backward pass.
CREATE OR REPLACE TABLE raw.torch_pair AS
WITH with_seq AS (
    SELECT p.range_id, p.pid, p.tid, p.seq, p.ts, p.kind, p.name, g.parent_op_range_id,
           p.kind IN ('backward_node', 'engine_wrapper') OR g.node_range_id IS NOT NULL
               OR (p.kind <> 'pyprof' AND t.pid IS NOT NULL) AS backward,
           rc.range_id IS NOT NULL AS recompute,
           coalesce(g.backward_levels, 0) > 1
               OR (coalesce(g.backward_levels, 0) = 1 AND NOT coalesce(w.kind = 'engine_wrapper', false)) AS nested
    FROM raw.torch_parsed p
    LEFT JOIN raw.torch_agg g USING (range_id)
    LEFT JOIN raw.torch_engine t ON t.pid = p.pid AND t.tid = p.tid
    LEFT JOIN raw.torch_recompute rc ON rc.range_id = p.range_id
    LEFT JOIN raw.torch_parsed w ON w.range_id = g.parent_op_range_id
    WHERE p.seq IS NOT NULL
),
up AS (
    SELECT range_id, seq FROM raw.torch_parsed
    WHERE range_id IN (SELECT parent_op_range_id FROM with_seq)
),
fwd AS (
    SELECT o.range_id, o.pid, o.seq, o.ts
    FROM with_seq o
    LEFT JOIN up ON up.range_id = o.parent_op_range_id
    WHERE o.kind = 'op' AND NOT o.backward
      AND (up.range_id IS NULL OR up.seq IS DISTINCT FROM o.seq)
),
-- (a recompute op's enclosing node may carry the same number from another thread's counter:
-- only an enclosing recompute op shares its seq)
refwd AS (
    SELECT o.range_id, o.pid, o.tid, o.seq, o.ts
    FROM with_seq o
    LEFT JOIN (SELECT range_id, seq FROM with_seq WHERE recompute) up ON up.range_id = o.parent_op_range_id
    WHERE o.kind = 'op' AND o.recompute
      AND (up.range_id IS NULL OR up.seq IS DISTINCT FROM o.seq)
),
nodes AS (
    SELECT range_id, pid, tid, seq, ts, parent_op_range_id, nested FROM with_seq
    WHERE kind = 'backward_node' AND name <> 'torch::autograd::GraphRoot'
),
node_pairs AS (
    SELECT n.range_id, f.range_id AS fwd_range_id
    FROM (SELECT * FROM nodes WHERE NOT nested) n ASOF JOIN fwd f ON f.pid = n.pid AND f.seq = n.seq AND n.ts > f.ts
    UNION ALL
    SELECT n.range_id, f.range_id AS fwd_range_id
    FROM (SELECT * FROM nodes WHERE nested) n
    ASOF JOIN refwd f ON f.pid = n.pid AND f.tid = n.tid AND f.seq = n.seq AND n.ts > f.ts
),
-- an engine wrapper takes the pair of the node it wraps
wrapper_pairs AS (
    SELECT w.range_id, min(np.fwd_range_id) AS fwd_range_id
    FROM raw.torch_parsed w
    JOIN nodes n ON n.parent_op_range_id = w.range_id
    JOIN node_pairs np ON np.range_id = n.range_id
    WHERE w.kind = 'engine_wrapper'
    GROUP BY w.range_id
)
SELECT * FROM node_pairs UNION ALL SELECT * FROM wrapper_pairs;

-- Direction: recompute ops are forward; backward nodes, engine wrappers, everything else inside
-- them and every op of an engine thread but markers are backward; the rest is forward. A
-- recompute op's top is the outermost recompute op around it, not the node it ran in.
CREATE OR REPLACE TEMP VIEW derived_torch_op AS
SELECT getvariable('trace_id')::INTEGER AS trace_id, o.range_id,
       nullif(o.pid, -1) AS pid, nullif(o.tid, -1) AS tid, o.ts, o.dur, o.kind, o.name, o.module,
       o.generation, o.seq, o.op_id, o.sizes, o.dtypes, o.input_op_ids,
       CASE WHEN rc.range_id IS NOT NULL THEN 'forward'
            WHEN o.kind IN ('backward_node', 'engine_wrapper') OR g.node_range_id IS NOT NULL
                 OR (o.kind <> 'pyprof' AND t.pid IS NOT NULL) THEN 'backward'
            ELSE 'forward' END AS direction,
       rc.range_id IS NOT NULL AS recompute,
       g.parent_op_range_id,
       CASE WHEN o.kind = 'pyprof' THEN NULL ELSE coalesce(rc.recompute_top_id, g.top_anc, o.range_id) END
           AS top_range_id,
       g.node_range_id, g.marker_range_id,
       CASE WHEN rc.range_id IS NOT NULL THEN NULL
            WHEN o.kind IN ('backward_node', 'engine_wrapper') THEN own.fwd_range_id
            WHEN g.node_range_id IS NOT NULL THEN via_node.fwd_range_id END AS fwd_range_id,
       g.layer, o.collective, o.comm_bytes
FROM raw.torch_parsed o
LEFT JOIN raw.torch_agg g USING (range_id)
LEFT JOIN raw.torch_engine t ON t.pid = o.pid AND t.tid = o.tid
LEFT JOIN raw.torch_pair own ON own.range_id = o.range_id
LEFT JOIN raw.torch_pair via_node ON via_node.range_id = g.node_range_id
LEFT JOIN raw.torch_recompute rc ON rc.range_id = o.range_id;
