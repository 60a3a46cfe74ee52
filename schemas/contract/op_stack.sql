-- op_stack: one row per GPU operation whose code location is known: the call stack behind it (the code line that launched it).
CREATE TABLE op_stack (
    trace_id          INTEGER NOT NULL, -- trace this row belongs to (trace.trace_id)
    op_id             BIGINT NOT NULL,  -- the GPU operation (gpu_op.op_id)
    op_kind           ENUM('kernel', 'memcpy', 'memset') NOT NULL, -- 'kernel', 'memcpy' or 'memset'
    stack_id          BIGINT NOT NULL,  -- its call stack (call_stack.stack_id); of several, the first of: a Python stack of its launching call (the innermost PyProf trace marker around it on the launching thread, or the PyTorch profiler's Python frames open when it was made), then for a backward kernel its forward op's Python stack, then the native CUDA backtrace of its launching call
    via               ENUM('forward op', 'launch') NOT NULL -- 'launch': the stack of the operation's launching call; 'forward op': a backward kernel, whose launching thread (PyTorch's autograd engine thread) has no Python stack, takes the stack of the forward op its backward node was paired with (kernel_op.fwd_range_id, kernel_op.marker_range_id): the code line of the layer whose backward it is (PyProf's parse leaves backward kernels without a trace)
);
