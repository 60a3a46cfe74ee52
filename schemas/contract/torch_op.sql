-- torch_op: one row per PyTorch op range (emit_nvtx / nsys --pytorch ranges of every string generation, PyProf argument markers, and the cpu_op events of PyTorch profiler traces), parsed, with its direction and forward partner.
CREATE TABLE torch_op (
    trace_id          INTEGER NOT NULL, -- trace this row belongs to (trace.trace_id)
    range_id          BIGINT NOT NULL,  -- the NVTX range (nvtx_range.range_id)
    pid               BIGINT,           -- process that pushed the range
    tid               BIGINT,           -- thread that pushed the range
    ts                BIGINT NOT NULL,  -- range start in ns (trace clock)
    dur               BIGINT,           -- range duration in ns; NULL when never closed
    kind              ENUM('backward_node', 'engine_wrapper', 'op', 'pyprof') NOT NULL, -- 'op' (an operator or record_function range), 'backward_node' (an autograd Node such as AddmmBackward0, AccumulateGrad), 'engine_wrapper' ('autograd::engine::evaluate_function: <node>') or 'pyprof' (a PyProf argument marker {'mod': .., 'op': .., 'args': ..})
    name              VARCHAR,          -- op name without the ', seq = ..', ', op_id = ..', ', sizes = ..' suffixes, e.g. 'aten::addmm', 'AddmmBackward0'; the op of a PyProf marker, e.g. 'linear'; NULL when the exporter dropped it (PyTorch ~1.2-1.9 with seq < 0 and record_shapes)
    module            VARCHAR,          -- PyProf marker module, e.g. 'torch.nn.functional', 'Tensor'; NULL for other kinds
    generation        ENUM('1.0', 'bare', 'kineto', 'legacy', 'observer', 'pyprof') NOT NULL, -- string format: '1.0' ('name, seq=N' / 'stashed seq=N'), 'legacy' (', seq = N' without op_id), 'observer' (', op_id = N', PyTorch ~1.12+), 'bare' (a namespaced name or Backward node without any suffix), 'pyprof', 'kineto' (a PyTorch profiler cpu_op: the name as written, seq, sizes and dtypes from its args)
    seq               BIGINT,           -- autograd sequence number (', seq = N', Kineto's 'Sequence number'); a backward node carries the seq of the forward op that created it; NULL when absent
    op_id             BIGINT,           -- RecordFunction handle (', op_id = N'): process-unique, links consumers to producers through input_op_ids
    sizes             VARCHAR,          -- input sizes as written, one entry per input ('[]' for scalars, non-tensors and 0-dim tensors), e.g. '[[32, 400], [120, 400], [120]]'; built from the arguments for PyProf markers, Kineto's 'Input Dims' (written with ', ' as emit_nvtx does); CAST(sizes AS BIGINT[][]) gives a list
    dtypes            VARCHAR,          -- PyProf markers and Kineto cpu_ops: the dtype of each input joined by ',' (empty for non-tensors), e.g. 'float32,,float32' (Kineto's 'Input type' c10::BFloat16 is written bfloat16, long int int64, ...); NULL for emit_nvtx ranges, which carry no dtypes
    input_op_ids      VARCHAR,          -- producers of the tensor inputs as written, '[(op_id,output_nr), ...]', (0,-1) when unknown
    direction         ENUM('backward', 'forward') NOT NULL, -- 'forward' for recompute ops; 'backward' for backward nodes, engine wrappers, the other ops inside them, and ops outside nodes on a thread that runs only backward work; 'forward' otherwise
    recompute         BOOLEAN NOT NULL, -- forward work re-run inside the backward pass by activation checkpointing (torch.utils.checkpoint): an op inside a backward node or engine wrapper that records autograd history (a seq >= 0 in PyTorch profiler and op_id-generation traces: backward formulas run with grad mode off and record none) or runs directly in a CheckpointFunctionBackward node, and every op inside such an op; see schemas/derive/torch_op.sql
    parent_op_range_id BIGINT,          -- nearest enclosing torch op of kind op, backward_node or engine_wrapper (range_id); NULL at the top
    top_range_id      BIGINT,           -- outermost enclosing torch op of kind op, backward_node or engine_wrapper, or the op itself at the top (range_id); for recompute ops the outermost recompute op around them (itself included), not the node they ran in
    node_range_id     BIGINT,           -- innermost enclosing backward node or engine wrapper (range_id); NULL outside the backward pass
    marker_range_id   BIGINT,           -- innermost enclosing PyProf argument marker (range_id), which carries argument shapes and dtypes
    fwd_range_id      BIGINT,           -- backward nodes: the forward op that created them: the latest earlier forward op of the same process with the node's seq, the outermost of nested ops sharing it; engine wrappers: their node's; ops inside the backward pass but recompute ops: their node's; NULL otherwise
    layer             VARCHAR,          -- names of the enclosing 'layer:NAME' NVTX ranges (PyProf layer annotation), outermost first, joined by ':'; NULL when none
    collective        VARCHAR,          -- the collective a PyTorch profiler record_param_comms op runs, its 'Collective name' arg as written, e.g. 'allreduce', 'broadcast', '_allgather_base'; NULL for other ops and when the trace does not record it
    comm_bytes        BIGINT            -- message size of that collective in bytes: the larger of 'In msg nelems' and 'Out msg nelems' times the size of its 'dtype' (Float 4, BFloat16 2, ...); NULL when not recorded
);
