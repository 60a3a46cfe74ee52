-- raw.kop_unit_inputs: the second step of kernel_op (traceql/derive/pytorch.py runs it once
-- raw.kop_units holds every window of kernels, schemas/derive/kernel_op_units.sql).
-- the inputs of each unit: formula key, sizes or marker text, the dtype its kernels' names
-- suggest (the longest kernel with one), whether its range also holds kernels of another unit
CREATE OR REPLACE TABLE raw.kop_unit_inputs AS
WITH kdtype AS (
    SELECT name, arg_min(dtype, prio) AS dtype
    FROM (SELECT DISTINCT name FROM kernel WHERE trace_id = getvariable('trace_id') AND name IS NOT NULL) k
    JOIN (SELECT row_number() OVER () AS prio, pattern, dtype FROM torch_kernel_dtypes) p
      ON regexp_matches(k.name, p.pattern)
    GROUP BY name
),
uk AS (
    SELECT u.unit_kind, u.unit_range_id, k.dur, k.kernel_id, d.dtype
    FROM raw.kop_units u
    JOIN kernel k ON k.trace_id = getvariable('trace_id') AND k.kernel_id = u.kernel_id
    LEFT JOIN kdtype d ON d.name = k.name
    WHERE u.unit_kind IS NOT NULL
),
overlapping AS (
    SELECT DISTINCT r.range_id
    FROM op_range r
    JOIN raw.kop_units u ON u.kernel_id = r.op_id
    WHERE r.trace_id = getvariable('trace_id') AND r.op_kind = 'kernel'
      AND u.unit_kind IN ('op', 'pyprof') AND r.range_id <> u.unit_range_id
      AND r.range_id IN (SELECT unit_range_id FROM raw.kop_units WHERE unit_kind IS NOT NULL)
)
SELECT g.unit_kind, g.unit_range_id, g.kdtype, t.sizes, CASE WHEN t.kind <> 'pyprof' THEN t.dtypes END AS dtypes,
       CASE WHEN t.kind = 'pyprof' THEN n.name END AS marker_text,
       fk.key, o.range_id IS NOT NULL AS overlaps
FROM (SELECT unit_kind, unit_range_id, arg_max(dtype, (dur, -kernel_id)) FILTER (WHERE dtype IS NOT NULL) AS kdtype
      FROM uk GROUP BY ALL) g
JOIN torch_op t ON t.trace_id = getvariable('trace_id') AND t.range_id = g.unit_range_id
JOIN nvtx_range n ON n.trace_id = t.trace_id AND n.range_id = t.range_id
LEFT JOIN torch_formula_key fk ON fk.name = t.name AND fk.module IS NOT DISTINCT FROM t.module
LEFT JOIN overlapping o ON o.range_id = g.unit_range_id;
