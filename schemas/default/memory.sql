-- Default of the memory adapter view, for a format without allocation records (nvprof, and nsys
-- exports captured without --cuda-memory-usage=true read as empty anyway): an empty view with the
-- columns and types the contract table memory_event is filled from (schemas/derive/memory_event.sql).
-- Ingest runs this file before a format's own memory.sql, which replaces it.
CREATE OR REPLACE TEMP VIEW src_memory_event AS
SELECT CAST(NULL AS BIGINT) AS src_row, CAST(NULL AS INTEGER) AS device_id, CAST(NULL AS VARCHAR) AS mem_kind,
       CAST(NULL AS BIGINT) AS pid, CAST(NULL AS BIGINT) AS tid, CAST(NULL AS BIGINT) AS ts,
       CAST(NULL AS BIGINT) AS bytes, CAST(NULL AS BIGINT) AS address, CAST(NULL AS BIGINT) AS correlation_id,
       CAST(NULL AS BIGINT) AS total_allocated, CAST(NULL AS BIGINT) AS total_reserved,
       CAST(NULL AS BIGINT) AS stack_id
WHERE false;
