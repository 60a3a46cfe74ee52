-- Default src_mem_kind for a format that records no memory kinds (pageable, pinned, device) for
-- copies (rocpd, rocprof v1): empty. A format's own mem_kind.sql replaces it.
CREATE OR REPLACE TEMP VIEW src_mem_kind AS
SELECT CAST(NULL AS BIGINT) AS id, CAST(NULL AS VARCHAR) AS label WHERE false;
