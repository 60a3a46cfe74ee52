-- kernel_op: one row per kernel launched inside a PyTorch op, PyProf marker or 'layer:' range: the op call it belongs to, its direction, its forward op, and the op call's FLOPs and bytes.
CREATE TABLE kernel_op (
    trace_id          INTEGER NOT NULL, -- trace this row belongs to (trace.trace_id)
    kernel_id         BIGINT NOT NULL,  -- the kernel (kernel.kernel_id)
    op_range_id       BIGINT,           -- the op call: innermost torch op (kind op, backward_node or engine_wrapper) around the launching call (torch_op.range_id); NULL when only a PyProf marker or layer range encloses it
    direction         VARCHAR NOT NULL, -- 'forward' or 'backward' (torch_op.direction of the op call; 'forward' without one)
    recompute         BOOLEAN NOT NULL, -- the op call is a recompute op (torch_op.recompute: forward work re-run in backward by activation checkpointing); direction is then 'forward'
    node_range_id     BIGINT,           -- backward kernels: the backward node (or engine wrapper) they ran in (torch_op.range_id)
    fwd_range_id      BIGINT,           -- the forward op this work belongs to (torch_op.range_id): for forward kernels the innermost enclosing op that heads a seq (the op a backward node would pair with), else the op call; for backward kernels the forward op paired with their node; NULL when unpaired
    marker_range_id   BIGINT,           -- innermost PyProf argument marker around the launch, or for backward kernels around the forward op (torch_op.range_id)
    call_range_id     BIGINT,           -- the call PyProf names the kernel by: the outermost PyProf argument marker around the launch, or for backward kernels around the forward op (torch_op.range_id; its name and module are PyProf's op and mod, e.g. 'linear' of 'torch.nn.functional' around an inner 'matmul'); NULL without PyProf markers
    seq               BIGINT,           -- forward kernels: seq of the innermost enclosing op that has one; backward kernels: the node's seq
    altseq            VARCHAR,          -- the other seq numbers of the enclosing ops, ascending, joined by ','; NULL when none
    call_index        INTEGER,          -- 0-based index of the kernel among the kernels of its op call, in launch order (PyProf's 'sub')
    call_kernels      INTEGER,          -- number of kernels the op call launched
    layer             VARCHAR,          -- 'layer:' range names around the launch, outermost first, joined by ':'; for backward kernels those of the forward op
    unit_range_id     BIGINT,           -- the call whose shapes cost this kernel (torch_op.range_id): the outermost op with sizes or PyProf marker that a user's FLOPs plug-in costs (a wrapped module, 'Foo.forward', as a whole), else the innermost op with sizes and a formula, else the innermost PyProf marker with one, or for backward kernels the forward op's PyProf marker (the outermost when a plug-in costs it); NULL when none
    unit_kind         VARCHAR,          -- 'op' (own input sizes), 'pyprof' (PyProf marker arguments) or 'backward' (backward of the forward op's PyProf marker); NULL when the kernel has no costed call
    dtype             VARCHAR,          -- element type of the costed call: 'fp64', 'fp32', 'fp16', 'bf16', 'fp8', 'int8', ...; from the marker's dtypes, else inferred from its kernels' names; NULL when unknown
    op_family         VARCHAR,          -- formula family of the costed call: 'matmul', 'conv', 'attention', 'pointwise', 'reduction', 'softmax', 'norm', 'embedding', 'loss', 'dropout', 'copy', 'optimizer', ...; NULL without a formula
    params            VARCHAR,          -- the kernel's parameters in PyProf's notation, from the PyProf call (call_range_id) as PyProf writes them for its op and the kernel's role, e.g. linear 'M=200,N=(35,20),K=200,fp32' (forward; backward data and weight gradients by the kernel's place in its node), '[35,20,200]fp32;[]fp32' for a pointwise op (traceql/derive/pyprof_params.py); without a PyProf call, or for ops it does not write, the costed call's parameters, e.g. 'M=32,N=120,K=400,fp32', input sizes when no formula applies
    flops             BIGINT,           -- algorithmic FLOPs of the costed call (an FMA counts 2), given on its longest kernel, 0 on its other kernels; NULL when no formula applies (never a guess)
    bytes             BIGINT,           -- algorithmic DRAM bytes read and written by the costed call, given like flops; NULL when its dtype or formula is unknown
    tensor_core       BOOLEAN NOT NULL, -- the kernel name matches a tensor-core kernel pattern (schemas/torch/tensor_core_patterns.csv)
    tc_eligible       BOOLEAN           -- matrix products and convolutions: the dtype is a tensor-core type and the dimensions are multiples of 8 (16 for 8-bit types, 4 for tf32); NULL for other ops or when unknown
);
