-- raw.kop_units: the first step of kernel_op (traceql/derive/pytorch.py fills it from
-- derived_kop_units below, runs derive/kernel_op_inputs.sql, computes the FLOPs and bytes of the
-- distinct costed calls in Python, then derive/kernel_op.sql joins them).
-- One row per kernel of the trace being ingested (getvariable('trace_id')) launched inside a
-- torch op, a PyProf marker or a 'layer:' range. It reads the temporary tables
-- torch_formula_key (module, name -> formula key, from traceql/derive/flops.py) and
-- torch_kernel_dtypes (schemas/torch/kernel_dtypes.csv).
--
-- Only the ranges of the launching thread count here (op_range.attribution 'thread'): depths of
-- two threads' stacks do not compare, and a torch op of another thread did not launch the kernel.
-- The op call of a kernel is its innermost enclosing torch op. The call that costs it (its
-- unit) is, in this order:
--   'op' or 'pyprof'  the outermost enclosing torch op (with input sizes) or PyProf marker
--              whose formula is a user's FLOPs plug-in (traceql/derive/flops_plugins.py): a plug-in
--              for a wrapped module ('Foo.forward') costs the whole call, whatever it runs;
--   'backward' a backward kernel whose forward op's outermost PyProf marker is costed by a
--              plug-in: that marker, costed as the backward of the whole call;
--   'op'       else the innermost enclosing torch op with input sizes and a formula (record_shapes);
--   'pyprof'   else the innermost enclosing PyProf argument marker with a formula;
--   'backward' else, for a backward kernel, the innermost PyProf marker around the forward op
--              its node was paired with, costed as the backward of that call (PyProf's way:
--              backward kernels have no shapes of their own).
-- call_range_id: the call PyProf names a kernel by, the outermost PyProf argument marker
-- around the launch (backward kernels: around the forward op), found by following the
-- markers' marker_range_id (each marker's nearest enclosing marker) to the top.
-- A unit's cost goes to its longest kernel (derive/kernel_op.sql).
-- seq_head: a forward op that heads a seq (its enclosing op has another seq or none, or is not
-- a recompute op when it is one): the op a backward node with that seq pairs with
-- (derive/torch_op.sql).
CREATE OR REPLACE TABLE raw.kop_enc AS
SELECT r.op_id AS kernel_id, r.depth, t.range_id, t.kind, t.seq, t.sizes, fk.key,
       t.kind = 'op' AND t.direction = 'forward' AND t.seq IS NOT NULL
           AND (p.range_id IS NULL OR p.seq IS DISTINCT FROM t.seq OR p.recompute <> t.recompute) AS seq_head
FROM op_range r
JOIN torch_op t ON t.trace_id = r.trace_id AND t.range_id = r.range_id
LEFT JOIN torch_op p ON p.trace_id = t.trace_id AND p.range_id = t.parent_op_range_id
LEFT JOIN torch_formula_key fk ON fk.name = t.name AND fk.module IS NOT DISTINCT FROM t.module
WHERE r.trace_id = getvariable('trace_id') AND r.op_kind = 'kernel' AND r.attribution = 'thread';

-- In windows of kernels: derived_kop_units gives the rows of the kernels whose kernel_id is in
-- [getvariable('kop_from'), getvariable('kop_to')) (set below to every kernel).
-- traceql/derive/pytorch.py fills raw.kop_units one window after another when the trace has more
-- kop_enc rows than KOP_WINDOW_ROWS, so that the aggregates over kop_enc and op_range hold one
-- window's kernels at a time. A kernel's row reads only its own rows of kop_enc and op_range
-- (and torch_op by key), so the windows give the same rows as one pass.
SET VARIABLE kop_from = -9223372036854775808;
SET VARIABLE kop_to = 9223372036854775807;

CREATE OR REPLACE TEMP VIEW derived_kop_units AS
WITH per AS (
    SELECT kernel_id,
           arg_max(range_id, depth) FILTER (WHERE kind <> 'pyprof') AS op_range_id,
           arg_max(range_id, depth) FILTER (WHERE kind = 'pyprof') AS marker_range_id,
           arg_max(range_id, depth) FILTER (WHERE kind <> 'pyprof' AND sizes IS NOT NULL AND key IS NOT NULL) AS op_unit,
           arg_max(range_id, depth) FILTER (WHERE kind = 'pyprof' AND key IS NOT NULL) AS marker_unit,
           arg_min(range_id, depth) FILTER (WHERE key LIKE 'plugin:%' AND (kind = 'pyprof' OR sizes IS NOT NULL))
               AS plugin_unit,
           arg_min(CAST(kind AS VARCHAR), depth) FILTER (WHERE key LIKE 'plugin:%' AND (kind = 'pyprof' OR sizes IS NOT NULL))
               AS plugin_kind,
           arg_max(seq, depth) FILTER (WHERE kind <> 'pyprof' AND seq IS NOT NULL) AS inner_seq,
           arg_max(range_id, depth) FILTER (WHERE seq_head) AS seq_head,
           list_sort(list_distinct(list(seq) FILTER (WHERE seq IS NOT NULL))) AS seqs
    FROM raw.kop_enc
    WHERE kernel_id >= getvariable('kop_from') AND kernel_id < getvariable('kop_to')
    GROUP BY kernel_id
),
layer_ranges AS MATERIALIZED (
    SELECT range_id, name FROM nvtx_range
    WHERE trace_id = getvariable('trace_id') AND name LIKE 'layer:%' AND style = 'push/pop'
),
layers AS (
    SELECT r.op_id AS kernel_id, string_agg(substr(n.name, 7), ':' ORDER BY r.depth, n.range_id) AS layer
    FROM op_range r
    JOIN layer_ranges n ON n.range_id = r.range_id
    WHERE r.trace_id = getvariable('trace_id') AND r.op_kind = 'kernel' AND r.attribution = 'thread'
      AND r.op_id >= getvariable('kop_from') AND r.op_id < getvariable('kop_to')
    GROUP BY r.op_id
),
kern AS (
    SELECT coalesce(p.kernel_id, l.kernel_id) AS kernel_id, p.op_range_id, p.marker_range_id, p.op_unit,
           p.marker_unit, p.plugin_unit, p.plugin_kind, p.inner_seq, p.seq_head, p.seqs, l.layer AS own_layer
    FROM per p FULL JOIN layers l ON l.kernel_id = p.kernel_id
),
-- the torch ops the steps below look up, read from torch_op once each: the ops that hold
-- kernels, then the nodes and forward ops those point to, then the markers of those
ops AS MATERIALIZED (
    SELECT range_id, kind, direction, recompute, seq, node_range_id, fwd_range_id, marker_range_id, layer
    FROM torch_op
    WHERE trace_id = getvariable('trace_id') AND range_id IN (SELECT op_range_id FROM per)
),
placed AS MATERIALIZED (
    SELECT k.*,
           coalesce(o.direction, 'forward') AS direction, coalesce(o.recompute, false) AS recompute,
           CASE WHEN o.direction = 'backward' THEN
                CASE WHEN o.kind IN ('backward_node', 'engine_wrapper') THEN o.range_id ELSE o.node_range_id END
           END AS node_range_id,
           CASE WHEN o.direction = 'backward' THEN o.fwd_range_id ELSE coalesce(k.seq_head, k.op_range_id) END
               AS fwd_range_id
    FROM kern k LEFT JOIN ops o ON o.range_id = k.op_range_id
),
linked AS MATERIALIZED (
    SELECT range_id, seq, marker_range_id, layer
    FROM torch_op
    WHERE trace_id = getvariable('trace_id')
      AND range_id IN (SELECT fwd_range_id FROM placed UNION ALL SELECT node_range_id FROM placed)
),
markers AS MATERIALIZED (
    SELECT range_id, name, module
    FROM torch_op
    WHERE trace_id = getvariable('trace_id') AND range_id IN (SELECT marker_range_id FROM linked)
),
-- the outermost marker above each marker a kernel points to (a few levels: one hash join each)
outer_marker AS MATERIALIZED (
    WITH RECURSIVE up(start_id, range_id, above) AS (
        SELECT range_id, range_id, marker_range_id
        FROM torch_op
        WHERE trace_id = getvariable('trace_id') AND kind = 'pyprof'
          AND range_id IN (SELECT marker_range_id FROM per UNION ALL SELECT marker_range_id FROM linked)
        UNION ALL
        SELECT up.start_id, t.range_id, t.marker_range_id
        FROM up JOIN torch_op t ON t.trace_id = getvariable('trace_id') AND t.kind = 'pyprof' AND t.range_id = up.above
    )
    SELECT start_id, range_id AS outer_id FROM up WHERE above IS NULL
),
-- (outer markers are markers, kind 'pyprof': DuckDB hashes torch_op here whatever the number of
-- outer markers, and hashing only the markers instead of every op took 1.85 CPU s less at 4 M
-- kernels without PyProf markers)
outer_key AS (
    SELECT o.start_id, o.outer_id, fk.key
    FROM outer_marker o
    JOIN torch_op t ON t.trace_id = getvariable('trace_id') AND t.kind = 'pyprof' AND t.range_id = o.outer_id
    LEFT JOIN torch_formula_key fk ON fk.name = t.name AND fk.module IS NOT DISTINCT FROM t.module
)
SELECT p.kernel_id, p.op_range_id, p.direction, p.recompute, p.node_range_id, p.fwd_range_id,
       CASE WHEN p.direction = 'backward' THEN f.marker_range_id ELSE p.marker_range_id END AS marker_range_id,
       coalesce(ob.outer_id, ofw.outer_id) AS call_range_id,
       CASE WHEN p.direction = 'backward' THEN n.seq ELSE p.inner_seq END AS seq,
       p.seqs,
       CASE WHEN p.direction = 'backward' AND f.range_id IS NOT NULL THEN f.layer ELSE p.own_layer END AS layer,
       CASE WHEN p.plugin_unit IS NOT NULL THEN p.plugin_kind
            WHEN p.direction = 'backward' AND ob.key LIKE 'plugin:%' THEN 'backward'
            WHEN p.op_unit IS NOT NULL THEN 'op'
            WHEN p.marker_unit IS NOT NULL THEN 'pyprof'
            WHEN p.direction = 'backward' AND fm.key IS NOT NULL THEN 'backward' END AS unit_kind,
       CASE WHEN p.plugin_unit IS NOT NULL THEN p.plugin_unit
            WHEN p.direction = 'backward' AND ob.key LIKE 'plugin:%' THEN ob.outer_id
            WHEN p.op_unit IS NOT NULL THEN p.op_unit
            WHEN p.marker_unit IS NOT NULL THEN p.marker_unit
            WHEN p.direction = 'backward' AND fm.key IS NOT NULL THEN f.marker_range_id END AS unit_range_id
FROM placed p
-- the condition on direction is part of the key, not a second join condition: DuckDB plans
-- 'ON f.range_id = p.fwd_range_id AND p.direction = ...' as a blockwise nested loop (81 s
-- instead of 0.95 s at 0.25 M kernels)
LEFT JOIN linked f ON f.range_id = CASE WHEN p.direction = 'backward' THEN p.fwd_range_id END
LEFT JOIN linked n ON n.range_id = p.node_range_id
LEFT JOIN markers m ON m.range_id = f.marker_range_id
LEFT JOIN torch_formula_key fm ON fm.name = m.name AND fm.module IS NOT DISTINCT FROM m.module
LEFT JOIN outer_key ob ON ob.start_id = CASE WHEN p.direction = 'backward' THEN f.marker_range_id END
LEFT JOIN outer_key ofw ON ofw.start_id = CASE WHEN p.direction <> 'backward' THEN p.marker_range_id END;
