-- derived_call_stack: the call stacks the source of the trace being ingested
-- (getvariable('trace_id')) records (the adapter view src_call_stack: nsys CUDA backtraces,
-- schemas/nsys/common/stacks.sql; PyTorch profiler Python stacks, schemas/kineto/common/stacks.sql),
-- each frame marked as the user's code or a library's. The rules are schemas/stacks/library_frames.csv,
-- which traceql/callstacks.py turns into one regular expression per source and field, written in
-- place of their placeholders (variables named stack_library_<source>_<field>) as constants (inline()):
-- no join with the pattern table, each expression compiled once.
CREATE OR REPLACE TEMP VIEW derived_call_stack AS
SELECT getvariable('trace_id')::INTEGER AS trace_id, s.stack_id, s.level, s.frame, s.module,
       NOT CASE s.source
               WHEN 'python' THEN coalesce(regexp_matches(s.frame, getvariable('stack_library_python_frame')), false)
                                  OR coalesce(regexp_matches(s.module, getvariable('stack_library_python_module')), false)
               ELSE coalesce(regexp_matches(s.frame, getvariable('stack_library_cuda_backtrace_frame')), false)
                    OR coalesce(regexp_matches(s.module, getvariable('stack_library_cuda_backtrace_module')), false)
           END AS is_user,
       s.source
FROM src_call_stack s;
