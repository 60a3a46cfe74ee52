-- nvtx_group_name(name): the grouping name of an NVTX range (nvtx_range.group_name), its name
-- without what changes from one instance of the same operation to the next, so that a report
-- grouped by it prints one row per operation. The rule, first match wins:
--
-- 1. PyProf and DLProf markers (a whole string that starts with '{' and ends with '}'):
--      argument marker  "{'mod': 'torch.nn.functional', 'op': 'linear', 'args': [...]}"
--                       (DLProf-era 'callid' and 'input_callids' keys before 'args' allowed)
--                                                      -> 'torch.nn.functional.linear' (mod.op)
--      module marker    "{'mod': 'Linear', 'strRepr': 'in_features=400, ...'}" -> 'Linear'
--      trace marker     "{'traceMarker': ['a.py:1', ..., 'profile2.py:106'][, 'funcStack': '...']}"
--                                                      -> 'traceMarker profile2.py:106'
--        The innermost frame, as written (the line that called the wrapped function): the
--        frames never change from one call to the next, so instances group together and
--        different call sites stay apart. Callers further out are not part of it (all the
--        nn.Linear layers of a model call F.linear from the same line of torch), and neither is
--        'funcStack', which numbers the calls ('relu(2)'); the full name keeps both.
--      DLProf JSON      '{"model_config": {...}}'        -> 'model_config'
--    A string that looks like a dict but is none of these (other keys, another key order)
--    stays as it is; one that does not end with '}' ('{x}, op_id = 3') goes on to rule 2.
-- 2. PyTorch emit_nvtx / nsys --pytorch suffixes, anchored at the end of the string, stripped:
--      PyTorch 1.0    ', seq=N' and ', stashed seq=N'   'addmm, seq=5' -> 'addmm',
--                                                       'AddmmBackward, stashed seq=5' -> 'AddmmBackward'
--      later          [', seq = N'][', op_id = N'][', sizes = [[..], ..]'][', input_op_ids = [(a,b), ..]']
--                     in this order, any of them:      'aten::addmm, seq = 5, op_id = 17, sizes = [[120],
--                     [32, 400]], input_op_ids = [(12,0), (0,-1)]' -> 'aten::addmm',
--                     'aten::to, op_id = 317177' -> 'aten::to', 'NllLossBackward, seq = 228' -> 'NllLossBackward',
--                     'autograd::engine::evaluate_function: AddmmBackward0, op_id = 9'
--                         -> 'autograd::engine::evaluate_function: AddmmBackward0'
--    Only the longest valid suffix chain at the end goes, so a name holding commas and
--    parentheses keeps them: 'FSDP::post_forward (encoder.block.0), op_id = 7' ->
--    'FSDP::post_forward (encoder.block.0)'. The lists are matched by their characters (digits,
--    '-', ', ', brackets; parentheses for input_op_ids), so nested size lists go too.
--    PyTorch's legacy builder (1.2 to at least 1.6) with record_shapes dropped the name of an op
--    without a seq (', sizes = [[2, 3]]'): its group name is '' (empty), one group for all such
--    ranges, apart from ranges without any name (NULL). torch_op.name is NULL for them.
-- 3. Anything else: the name unchanged ('aten::mm', 'layer:conv1', 'train_step'). A NULL name
--    gives NULL, so group_name IS NULL exactly when name IS NULL.
--
-- Cost: the regular expressions run only on names that can match, those that hold ', ' or
-- start with '{' and end with '}'; the suffixes are removed by one regexp_replace (RE2 finds
-- the match without capture groups; extracting the name with a capture group took three times
-- as long). Over 16 M names shaped like a PyTorch trace ('aten::mm, op_id = N', a tenth bare
-- 'aten::mm'), computing the group name takes 1.5-1.9 s more than copying the names (2
-- threads, 3 CPU-seconds); with record_shapes' sizes and input_op_ids 3.6 s; bare names 0.4 s.
CREATE OR REPLACE TEMP MACRO nvtx_group_name(name) AS
CASE
    WHEN starts_with(name, '{') AND ends_with(name, '}') AND (
             starts_with(name, '{''mod'': ''') OR starts_with(name, '{''traceMarker'': [')
             OR starts_with(name, '{"model_config": {')) THEN
        CASE WHEN starts_with(name, '{''traceMarker'': [') THEN
                 regexp_replace(name,
                     '^\{''traceMarker'': \[(?:(?:''[^'']*''|"[^"]*"), )*(?:''([^'']*)''|"([^"]*)")\]'
                     '(?:, ''funcStack'': (?:''.*''|".*"))?\}$',
                     'traceMarker \1\2')
             WHEN starts_with(name, '{''mod'': ''') THEN
                 regexp_replace(regexp_replace(name,
                     '^\{''mod'': ''([^'']*)'', ''op'': ''([^'']*)'', (?:''callid'': .*)?''args'': \[.*\]\}$',
                     '\1.\2'),
                     '^\{''mod'': ''([^'']*)'', ''strRepr'': (?:''.*''|".*")\}$', '\1')
             ELSE regexp_replace(name, '^\{"model_config": \{.*\}\}$', 'model_config') END
    WHEN contains(name, ', ') THEN
        regexp_replace(name,
            '(?:, (?:stashed )?seq=-?\d+'
            '|(?:, seq = -?\d+)?(?:, op_id = \d+)?(?:, sizes = \[[-\d, \[\]]*\])?(?:, input_op_ids = \[[-\d, ()]*\])?)$',
            '')
    ELSE name
END;
