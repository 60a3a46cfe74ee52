-- derived_torch_op: the PyTorch op ranges of the trace being ingested (getvariable('trace_id')),
-- parsed (raw.torch_parsed) with their enclosing ranges (raw.torch_anc), both from
-- derive/torch_parse.sql, nested, directed and paired forward <-> backward.
--
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
