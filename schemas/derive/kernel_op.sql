-- the PyProf calls that kernels are named by, as a table: DuckDB knows how few rows it holds
-- (none without PyProf markers) and hashes it, not the trace's torch ops. As an IN list over
-- raw.kop_units it expected fewer ops than keys (an op's trace filter gets a default
-- selectivity) and joined every op with its NVTX name to hash them: at 1 M kernels 2.8 M rows,
-- for an empty list (the INSERT 2.4-2.8 against 3.3-3.6 CPU s, five paired ingests).
CREATE OR REPLACE TABLE raw.kop_calls AS
SELECT DISTINCT call_range_id AS range_id FROM raw.kop_units WHERE call_range_id IS NOT NULL;

-- derived_kernel_op: one row per kernel of the trace being ingested (getvariable('trace_id'))
-- launched inside a torch op, a PyProf marker or a 'layer:' range. Reads raw.kop_units and
-- raw.kop_unit_inputs (derive/kernel_op_units.sql), torch_unit_cost (the FLOPs and bytes that
-- traceql/pytorch.py computed per distinct costed call) and torch_tensor_core_patterns
-- (schemas/torch/tensor_core_patterns.csv: the first pattern that matches a kernel's
-- demangled name says whether it runs on tensor cores; none matching: it does not).
--
-- A unit's FLOPs and bytes are given on its longest kernel (then the first launched) and 0 on
-- its other kernels, so sums over kernels count each call once. A unit whose range also
-- holds kernels costed by a nested call would count them twice: its cost is NULL.
-- call_index numbers the kernels of one op call in launch order (the launching call's start).
-- params: PyProf's params of the kernel's PyProf call (torch_pyprof_params, traceql/derive/pyprof_params.py)
-- for its role: 'bias' for a kernel of a linear call whose costed call is no matrix product
-- (queries/kernel_op.sql names it 'bias' by the same rule), 'fprop', else 'bprop0', 'bprop1',
-- 'bprop2' by its place among its backward node's kernels (data and weight gradient); else
-- the costed call's parameters (traceql/derive/flops.py).
CREATE OR REPLACE TEMP VIEW derived_kernel_op AS
WITH tc AS (
    SELECT name, arg_min(tensor_core, prio) AS tensor_core
    FROM (SELECT DISTINCT name FROM kernel WHERE trace_id = getvariable('trace_id') AND name IS NOT NULL) k
    JOIN (SELECT row_number() OVER () AS prio, pattern, CAST(tensor_core AS BOOLEAN) AS tensor_core
          FROM torch_tensor_core_patterns) p
      ON regexp_matches(k.name, p.pattern)
    GROUP BY name
),
calls AS (
    SELECT t.range_id, t.name, t.module, n.name AS marker_text
    FROM raw.kop_calls c
    JOIN torch_op t ON t.trace_id = getvariable('trace_id') AND t.range_id = c.range_id
    JOIN nvtx_range n ON n.trace_id = t.trace_id AND n.range_id = t.range_id
),
units AS (
    SELECT i.unit_kind, i.unit_range_id, i.overlaps, c.dtype, c.op_family, c.params, c.tc_eligible,
           CASE WHEN NOT i.overlaps THEN c.flops END AS flops,
           CASE WHEN NOT i.overlaps THEN c.bytes END AS bytes
    FROM raw.kop_unit_inputs i
    LEFT JOIN torch_unit_cost c
      ON c.unit_kind = i.unit_kind AND c.key IS NOT DISTINCT FROM i.key AND c.sizes IS NOT DISTINCT FROM i.sizes
     AND c.marker_text IS NOT DISTINCT FROM i.marker_text AND c.kdtype IS NOT DISTINCT FROM i.kdtype
     AND c.dtypes IS NOT DISTINCT FROM i.dtypes
),
k AS NOT MATERIALIZED (
    SELECT u.*, kk.name, kk.dur, l.api_ts,
           coalesce(u.op_range_id, u.marker_range_id) AS call_id
    FROM raw.kop_units u
    JOIN kernel kk ON kk.trace_id = getvariable('trace_id') AND kk.kernel_id = u.kernel_id
    LEFT JOIN launch l ON l.trace_id = kk.trace_id AND l.op_id = kk.kernel_id
),
-- (the four windows over the narrow keys alone, joined back by kernel: a window sorts every
-- column it carries, the kernel names too; k is computed again for the join rather than held.
-- At 4 M kernels 19-19.4 against 25.9-30.8 CPU s for the statement, two paired runs; at 1 M
-- no change)
windows AS (
    SELECT kernel_id,
           CASE WHEN node_range_id IS NOT NULL THEN
               row_number() OVER (PARTITION BY node_range_id ORDER BY api_ts NULLS LAST, kernel_id) - 1 END AS node_index,
           CASE WHEN call_id IS NOT NULL THEN
               row_number() OVER (PARTITION BY call_id ORDER BY api_ts NULLS LAST, kernel_id) - 1 END AS call_index,
           CASE WHEN call_id IS NOT NULL THEN count(*) OVER (PARTITION BY call_id) END AS call_kernels,
           CASE WHEN unit_kind IS NOT NULL THEN
               row_number() OVER (PARTITION BY unit_kind, unit_range_id ORDER BY dur DESC, kernel_id) = 1 END AS carries
    FROM (SELECT kernel_id, node_range_id, call_id, unit_kind, unit_range_id, api_ts, dur FROM k)
),
ranked AS (
    SELECT k.*, w.node_index, w.call_index, w.call_kernels, w.carries
    FROM k JOIN windows w USING (kernel_id)
)
SELECT getvariable('trace_id')::INTEGER AS trace_id, r.kernel_id, r.op_range_id, r.direction, r.recompute, r.node_range_id,
       r.fwd_range_id, r.marker_range_id, r.call_range_id, r.seq,
       nullif(array_to_string(list_filter(r.seqs, s -> s IS DISTINCT FROM r.seq), ','), '') AS altseq,
       CAST(r.call_index AS INTEGER) AS call_index, CAST(r.call_kernels AS INTEGER) AS call_kernels, r.layer,
       r.unit_range_id, r.unit_kind, u.dtype, u.op_family, coalesce(pp.params, u.params) AS params,
       CASE WHEN u.flops IS NOT NULL THEN CASE WHEN r.carries THEN u.flops ELSE 0 END END AS flops,
       CASE WHEN u.bytes IS NOT NULL THEN CASE WHEN r.carries THEN u.bytes ELSE 0 END END AS bytes,
       coalesce(t.tensor_core, false) AS tensor_core,
       u.tc_eligible
FROM ranked r
LEFT JOIN units u ON u.unit_kind = r.unit_kind AND u.unit_range_id = r.unit_range_id
LEFT JOIN tc t ON t.name = r.name
LEFT JOIN calls c ON c.range_id = r.call_range_id
LEFT JOIN torch_pyprof_params pp
  ON pp.marker_text = c.marker_text
 AND pp.role = CASE WHEN /* include: pyprof_bias(call = c; family = u.op_family) */ THEN 'bias'
                    WHEN r.direction = 'forward' THEN 'fprop'
                    ELSE 'bprop' || least(coalesce(r.node_index, 0), 2) END;
