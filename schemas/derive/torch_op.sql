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
CREATE OR REPLACE TABLE raw.torch_parsed AS
WITH cand AS (
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
parsed AS (
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
           nullif(vx.ids, '') AS input_op_ids
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
           regexp_extract_all(text, '\{''name'': ''[^'']*'', ''type'': ''\w+''(?:, ''shape'': \(([^)]*)\), ''dtype'': ''(\w+)'')?', 1) AS shp,
           regexp_extract_all(text, '\{''name'': ''[^'']*'', ''type'': ''\w+''(?:, ''shape'': \(([^)]*)\), ''dtype'': ''(\w+)'')?', 2) AS dts
    FROM typed WHERE kind = 'pyprof'
)
SELECT t.range_id, t.pid, t.tid, t.ts, t.dur, t.depth, t.kind, t.generation, t.op_name AS name, t.module, t.seq,
       t.op_id, t.input_op_ids,
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
-- ATTR instead of none.)
levels AS (
    SELECT pid, tid, list(DISTINCT depth) AS depths
    FROM outer_ranges WHERE depth < getvariable('nvtx_depth_cap') GROUP BY pid, tid
),
x AS MATERIALIZED (
    SELECT p.range_id, p.pid, p.tid, p.e, unnest(list_filter(l.depths, d -> d < p.depth)) AS lvl
    FROM raw.torch_parsed p JOIN levels l ON l.pid = p.pid AND l.tid = p.tid
),
-- only the levels some op looks up (when all ops sit at one depth, none: the join is empty)
candidates AS (
    SELECT * FROM outer_ranges
    WHERE (pid, tid, depth) IN (SELECT DISTINCT pid, tid, lvl FROM x)
)
SELECT x.range_id, a.range_id AS anc_id, a.depth AS anc_depth, a.cls, a.layer
FROM x ASOF JOIN candidates a ON a.pid = x.pid AND a.tid = x.tid AND a.depth = x.lvl AND x.range_id > a.range_id
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
       string_agg(layer, ':' ORDER BY anc_depth) FILTER (WHERE cls = 'layer') AS layer
FROM raw.torch_anc
GROUP BY range_id;

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

-- forward partner of every backward node with a seq
CREATE OR REPLACE TABLE raw.torch_pair AS
WITH with_seq AS (
    SELECT p.range_id, p.pid, p.seq, p.ts, p.kind, p.name, g.parent_op_range_id,
           p.kind IN ('backward_node', 'engine_wrapper') OR g.node_range_id IS NOT NULL
               OR (p.kind <> 'pyprof' AND t.pid IS NOT NULL) AS backward
    FROM raw.torch_parsed p
    LEFT JOIN raw.torch_agg g USING (range_id)
    LEFT JOIN raw.torch_engine t ON t.pid = p.pid AND t.tid = p.tid
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
nodes AS (
    SELECT range_id, pid, seq, ts, parent_op_range_id FROM with_seq
    WHERE kind = 'backward_node' AND name <> 'torch::autograd::GraphRoot'
),
node_pairs AS (
    SELECT n.range_id, f.range_id AS fwd_range_id
    FROM nodes n ASOF JOIN fwd f ON f.pid = n.pid AND f.seq = n.seq AND n.ts > f.ts
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

-- Direction: backward nodes, engine wrappers, everything inside them and every op of an engine
-- thread but markers; the rest is forward.
CREATE OR REPLACE TEMP VIEW derived_torch_op AS
SELECT getvariable('trace_id')::INTEGER AS trace_id, o.range_id,
       nullif(o.pid, -1) AS pid, nullif(o.tid, -1) AS tid, o.ts, o.dur, o.kind, o.name, o.module,
       o.generation, o.seq, o.op_id, o.sizes, o.dtypes, o.input_op_ids,
       CASE WHEN o.kind IN ('backward_node', 'engine_wrapper') OR g.node_range_id IS NOT NULL
                 OR (o.kind <> 'pyprof' AND t.pid IS NOT NULL) THEN 'backward'
            ELSE 'forward' END AS direction,
       g.parent_op_range_id,
       CASE WHEN o.kind = 'pyprof' THEN NULL ELSE coalesce(g.top_anc, o.range_id) END AS top_range_id,
       g.node_range_id, g.marker_range_id,
       CASE WHEN o.kind IN ('backward_node', 'engine_wrapper') THEN own.fwd_range_id
            WHEN g.node_range_id IS NOT NULL THEN via_node.fwd_range_id END AS fwd_range_id,
       g.layer
FROM raw.torch_parsed o
LEFT JOIN raw.torch_agg g USING (range_id)
LEFT JOIN raw.torch_engine t ON t.pid = o.pid AND t.tid = o.tid
LEFT JOIN raw.torch_pair own ON own.range_id = o.range_id
LEFT JOIN raw.torch_pair via_node ON via_node.range_id = g.node_range_id;
