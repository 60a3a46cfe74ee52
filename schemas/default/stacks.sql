-- Defaults of the call-stack adapter views, for a format that records no call stacks (nvprof):
-- empty, with the columns schemas/derive/call_stack.sql and the api_call adapters read. Ingest
-- runs this file before a format's own stacks.sql, which replaces them.
--   src_call_stack  one row per frame of each distinct stack: stack_id (unique within the trace),
--                   level (0 = outermost), frame (as the trace writes it), module (file or binary),
--                   source ('cuda_backtrace' or 'python')
--   src_api_stack   the stack of each API call that has one, by the call's src_row (one row per call)
CREATE OR REPLACE TEMP VIEW src_call_stack AS
SELECT CAST(NULL AS BIGINT) AS stack_id, CAST(NULL AS INTEGER) AS level, CAST(NULL AS VARCHAR) AS frame,
       CAST(NULL AS VARCHAR) AS module, CAST(NULL AS VARCHAR) AS source
WHERE false;

CREATE OR REPLACE TEMP VIEW src_api_stack AS
SELECT CAST(NULL AS BIGINT) AS src_row, CAST(NULL AS BIGINT) AS stack_id
WHERE false;
