-- op_range: one row per (GPU operation, NVTX range enclosing its launching call) pair, every level of the stack.
CREATE TABLE op_range (
    trace_id          INTEGER NOT NULL, -- trace this row belongs to (trace.trace_id)
    op_id             BIGINT NOT NULL,  -- the GPU operation (gpu_op.op_id)
    op_kind           ENUM('kernel', 'memcpy', 'memset') NOT NULL, -- 'kernel', 'memcpy' or 'memset'
    range_id          BIGINT NOT NULL,  -- an enclosing range (nvtx_range.range_id)
    depth             INTEGER NOT NULL, -- nesting depth of that range on its thread (nvtx_range.depth)
    is_innermost      BOOLEAN NOT NULL, -- true for the one innermost enclosing range of the operation: the latest-started of the launching thread's ranges, or of other threads' when none of its own holds it
    attribution       ENUM('process', 'thread') NOT NULL  -- who launched the operation while the range held the call: 'thread' (the thread that opened the range) or 'process' (another thread of the range's process, e.g. PyTorch's autograd engine thread inside a user's 'Backward' range)
);
