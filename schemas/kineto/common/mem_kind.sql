-- src_mem_kind: Kineto writes memory kinds as words in the copy and memset names ('Memcpy HtoD
-- (Pageable -> Device)', 'Memset (Device)'): they are used as written (memcpy.sql, memset.sql), so
-- this layout needs no id table. Present for the adapter file list of traceql/ingest.py.
CREATE OR REPLACE TEMP VIEW src_mem_kind AS
SELECT CAST(NULL AS BIGINT) AS id, CAST(NULL AS VARCHAR) AS label WHERE false;
