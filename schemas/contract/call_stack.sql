-- call_stack: one row per frame of each distinct call stack a trace records: Python stacks of PyProf trace markers and of PyTorch profiler traces (with_stack=True), native stacks of nsys CUDA backtraces (--cudabacktrace).
CREATE TABLE call_stack (
    trace_id          INTEGER NOT NULL, -- trace this row belongs to (trace.trace_id)
    stack_id          BIGINT NOT NULL,  -- the stack, unique within its trace: calls and kernels from the same place share one (api_call.stack_id, op_stack.stack_id)
    level             INTEGER NOT NULL, -- position of the frame in the stack: 0 is the outermost (the program's entry), the highest level the innermost (the call site)
    frame             VARCHAR NOT NULL, -- the frame as the trace writes it: 'profile2.py:314' (PyProf), 'train.py(42): step' (PyTorch profiler), a symbol or an unresolved address '0x7f3a1c2b' (CUDA backtrace)
    module            VARCHAR,          -- the frame's file ('profile2.py', 'torch/nn/modules/module.py') or, for a native frame, its binary or library ('/usr/lib64/libcuda.so.460.32.03'); NULL when the trace gives none ('<built-in method ...>' frames)
    is_user           BOOLEAN NOT NULL, -- the frame is the user's code, not a library's: false for the frames the rules of schemas/stacks/library_frames.csv match (PyProf's own list of torch and apex files for PyProf stacks; PyTorch's files, Python's standard library and built-ins for PyTorch profiler stacks; CUDA, profiler and system libraries and CUDA API entry points for native stacks)
    source            ENUM('cuda_backtrace', 'pyprof', 'python') NOT NULL -- where the stack comes from: 'pyprof' (a PyProf trace marker {'traceMarker': [...]}), 'python' (the python_function events of a PyTorch profiler trace), 'cuda_backtrace' (nsys CUDA_CALLCHAINS)
);
