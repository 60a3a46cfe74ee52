-- derived_op_stack: the call stack behind each GPU operation of the trace being ingested
-- (getvariable('trace_id')). Reads call_stack, api_call.stack_id, launch, op_range, nvtx_range and
-- kernel_op; first adds the stacks of PyProf's trace markers to call_stack (source 'pyprof').
--
-- PyProf (pyprof.init()) pushes, around every wrapped call, a trace marker
-- "{'traceMarker': ['profile2.py:314', ..., 'torch/nn/modules/module.py:532']}" (the Python stack
-- of the call, outermost first; DLProf-era markers add 'funcStack'), then a module marker and the
-- argument marker, all on the calling thread. Each distinct frame list is one stack; its ids
-- follow the source's stacks of the trace. An upgrade computes them again (they are deleted first).
--
-- An operation's stack, the first that applies (for every source):
--   1. a Python stack of its launching call: the innermost trace marker that holds the call on
--      the launching thread (op_range, attribution 'thread'; PyProf takes the innermost marker),
--      else the PyTorch profiler's Python stack of the call (api_call.stack_id, source 'python');
--   2. for a backward kernel (kernel_op): its forward op's. The autograd engine thread that
--      launched it has no Python frames (PyProf's parse gives backward kernels an empty trace;
--      lm-a's net.dict: all 77). Here: the trace marker around the forward op's argument marker
--      (kernel_op.marker_range_id, which for backward kernels is the forward op's: the marker's
--      parent or grandparent, as PyProf pushes trace, module, argument markers in that order),
--      else the Python stack of the first call the forward op (kernel_op.fwd_range_id) launched
--      on its own thread;
--   3. the native CUDA backtrace of its launching call (api_call.stack_id, 'cuda_backtrace').
DELETE FROM call_stack WHERE trace_id = getvariable('trace_id') AND source = 'pyprof';

-- trace markers: their frames, numbered by frame list after the trace's other stacks (a
-- variable, not a scalar subquery: no cross product)
SET VARIABLE pp_stack_base = (SELECT coalesce(max(stack_id) + 1, 0) FROM call_stack
                              WHERE trace_id = getvariable('trace_id'));

CREATE OR REPLACE TABLE raw.pp_marker AS
WITH m AS (
    SELECT range_id, parent_range_id,
           list_transform(
               regexp_extract_all(
                   regexp_extract(name, '^\{''traceMarker'': \[(.*?)\](?:, ''funcStack'': .*)?\}$', 1),
                   '''[^'']*''|"[^"]*"'),
               f -> substr(f, 2, length(f) - 2)) AS frames
    FROM nvtx_range
    WHERE trace_id = getvariable('trace_id') AND style = 'push/pop' AND starts_with(name, '{''traceMarker'': [')
)
SELECT range_id, parent_range_id, frames,
       getvariable('pp_stack_base') + dense_rank() OVER (ORDER BY frames) - 1 AS stack_id
FROM m
WHERE len(frames) > 0;

INSERT INTO call_stack BY NAME
SELECT getvariable('trace_id')::INTEGER AS trace_id, stack_id, CAST(level AS INTEGER) AS level, frame,
       regexp_replace(frame, ':\d+$', '') AS module,
       NOT coalesce(regexp_matches(frame, getvariable('stack_library_pyprof_frame')), false) AS is_user,
       'pyprof' AS source
FROM (SELECT stack_id, unnest(frames) AS frame, unnest(range(len(frames))) AS level
      FROM (SELECT stack_id, any_value(frames) AS frames FROM raw.pp_marker GROUP BY stack_id));

CREATE OR REPLACE TABLE raw.op_stack_cand AS
WITH stacks AS MATERIALIZED (
    SELECT DISTINCT stack_id, source FROM call_stack WHERE trace_id = getvariable('trace_id')
),
calls AS MATERIALIZED (
    SELECT l.op_id, l.op_kind, s.stack_id, s.source
    FROM launch l
    JOIN api_call a ON a.trace_id = l.trace_id AND a.api_id = l.api_id
    JOIN stacks s ON s.stack_id = a.stack_id
    WHERE l.trace_id = getvariable('trace_id') AND a.stack_id IS NOT NULL
),
marked AS (
    SELECT o.op_id, o.op_kind, arg_max(m.stack_id, o.depth) AS stack_id
    FROM op_range o JOIN raw.pp_marker m ON m.range_id = o.range_id
    WHERE o.trace_id = getvariable('trace_id') AND o.attribution = 'thread'
    GROUP BY o.op_id, o.op_kind
),
bwd AS MATERIALIZED (
    SELECT kernel_id, marker_range_id, fwd_range_id FROM kernel_op
    WHERE trace_id = getvariable('trace_id') AND direction = 'backward'
),
marker_parents AS (
    SELECT b.kernel_id, coalesce(m1.stack_id, m2.stack_id) AS stack_id
    FROM bwd b
    JOIN nvtx_range a ON a.trace_id = getvariable('trace_id') AND a.range_id = b.marker_range_id
    LEFT JOIN raw.pp_marker m1 ON m1.range_id = a.parent_range_id
    LEFT JOIN nvtx_range p ON p.trace_id = getvariable('trace_id') AND p.range_id = a.parent_range_id
    LEFT JOIN raw.pp_marker m2 ON m2.range_id = p.parent_range_id
),
fwd_first AS (
    SELECT o.range_id, min(o.op_id) AS op_id
    FROM op_range o
    WHERE o.trace_id = getvariable('trace_id') AND o.attribution = 'thread'
      AND o.range_id IN (SELECT fwd_range_id FROM bwd)
    GROUP BY o.range_id
),
fwd_python AS (
    SELECT b.kernel_id, c.stack_id
    FROM bwd b JOIN fwd_first f ON f.range_id = b.fwd_range_id
    JOIN calls c ON c.op_id = f.op_id AND c.source = 'python'
)
SELECT op_id, op_kind, stack_id, 'launch' AS via, 1 AS prio FROM marked
UNION ALL
SELECT op_id, op_kind, stack_id, 'launch', 2 FROM calls WHERE source = 'python'
UNION ALL
SELECT kernel_id, 'kernel', stack_id, 'forward op', 3 FROM marker_parents WHERE stack_id IS NOT NULL
UNION ALL
SELECT kernel_id, 'kernel', stack_id, 'forward op', 4 FROM fwd_python
UNION ALL
SELECT op_id, op_kind, stack_id, 'launch', 5 FROM calls WHERE source = 'cuda_backtrace';

CREATE OR REPLACE TEMP VIEW derived_op_stack AS
SELECT getvariable('trace_id')::INTEGER AS trace_id, op_id, op_kind, stack_id, via
FROM raw.op_stack_cand
QUALIFY row_number() OVER (PARTITION BY op_id ORDER BY prio, stack_id) = 1;
