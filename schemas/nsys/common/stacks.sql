-- CUDA backtraces (nsys profile --cudabacktrace): the native call stack of a CUDA API call.
-- nsys writes, next to the call's own row, a duplicate RUNTIME row of eventClass 67 with the same
-- globalTid and correlationId whose callchainId names its frames in CUDA_CALLCHAINS (stackDepth
-- 0 is the innermost frame: the profiler's and the driver's, then the CUDA runtime call, then the
-- program's functions out to _start). The call keeps its own row (api_call drops the duplicates);
-- it gets the duplicate's callchain (or its own callchainId, should an exporter set it there).
--
-- Stacks are numbered by their frames: calls made from the same place share one stack_id (nsys
-- gives every backtrace its own callchain id). Frames are (symbol, module) as nsys resolved them:
-- an unresolved frame's symbol is its address ('0x145b54429ce8').
--
-- Without callchains every view below is empty: an export recorded without --cudabacktrace gets the
-- empty views of schemas/default/stacks.sql instead (traceql.sources.adapters.adapter_sql), not
-- three statements that find nothing.
-- needs rows of: raw.CUDA_CALLCHAINS

-- every callchain: its frames outermost first, and a key that is the same for equal stacks
CREATE OR REPLACE TABLE raw.nsys_chain AS
SELECT c.id AS chain_id, c.stackDepth AS depth,
       coalesce(s.value, '0x' || lower(hex(c.originalIP)), '[unknown]') AS frame, m.value AS module
FROM raw.CUDA_CALLCHAINS c
LEFT JOIN raw.StringIds s ON s.id = c.symbol
LEFT JOIN raw.StringIds m ON m.id = c.module
WHERE c.id IS NOT NULL AND c.stackDepth IS NOT NULL;

-- Which CUDA_CALLCHAINS id a callchainId names. In the exports seen (nsys 2021 and 2022.2) the
-- calls' callchainId counts from 0 and CUDA_CALLCHAINS.id from 1: callchainId k is the stack of
-- id k + 1 (Extra-P's reader adds 1 as well). Rather than trust either, the offset (0 or 1) is
-- the one under which more backtraces hold a frame named like their own call (cudaLaunchKernel
-- in the stack of a cudaLaunchKernel call); 0 when none does.
SET VARIABLE nsys_chain_offset = (
    WITH calls AS (
        SELECT r.callchainId AS chain_id, regexp_replace(s.value, '_v[0-9]+$', '') AS api
        FROM raw.CUPTI_ACTIVITY_KIND_RUNTIME r JOIN raw.StringIds s ON s.id = r.nameId
        WHERE r.eventClass = 67 AND r.callchainId IS NOT NULL
    ),
    frames AS (SELECT DISTINCT chain_id, frame FROM raw.nsys_chain),
    hits AS (
        SELECT count(*) FILTER (WHERE f0.chain_id IS NOT NULL) AS same,
               count(*) FILTER (WHERE f1.chain_id IS NOT NULL) AS next
        FROM calls c
        LEFT JOIN frames f0 ON f0.chain_id = c.chain_id AND f0.frame = c.api
        LEFT JOIN frames f1 ON f1.chain_id = c.chain_id + 1 AND f1.frame = c.api
    )
    SELECT CASE WHEN next > same THEN 1 ELSE 0 END FROM hits);

CREATE OR REPLACE TABLE raw.nsys_chain_key AS
SELECT chain_id, dense_rank() OVER (ORDER BY frames) - 1 AS stack_id
FROM (SELECT chain_id, list(struct_pack(f := frame, m := module) ORDER BY depth DESC) AS frames
      FROM raw.nsys_chain GROUP BY chain_id);

CREATE OR REPLACE TEMP VIEW src_call_stack AS
SELECT k.stack_id, CAST(row_number() OVER (PARTITION BY k.stack_id ORDER BY c.depth DESC) - 1 AS INTEGER) AS level,
       c.frame, c.module, 'cuda_backtrace' AS source
FROM raw.nsys_chain c
JOIN (SELECT stack_id, min(chain_id) AS chain_id FROM raw.nsys_chain_key GROUP BY stack_id) k
  ON k.chain_id = c.chain_id;

-- the call's own row (eventClass not 67) -> the stack of its backtrace row (same thread and
-- correlation id), one per call
CREATE OR REPLACE TEMP VIEW src_api_stack AS
WITH back AS (
    SELECT globalTid, correlationId, min(callchainId) AS chain_id
    FROM raw.CUPTI_ACTIVITY_KIND_RUNTIME
    WHERE eventClass = 67 AND callchainId IS NOT NULL
    GROUP BY globalTid, correlationId
)
SELECT r.rowid AS src_row, min(k.stack_id) AS stack_id
FROM raw.CUPTI_ACTIVITY_KIND_RUNTIME r
LEFT JOIN back b ON b.globalTid = r.globalTid AND b.correlationId = r.correlationId
JOIN raw.nsys_chain_key k ON k.chain_id = coalesce(r.callchainId, b.chain_id) + getvariable('nsys_chain_offset')
WHERE r.eventClass IS DISTINCT FROM 67
GROUP BY r.rowid;
