-- src_mem_kind: rocpd records no memory kinds (pageable, pinned, device) for copies: empty.
CREATE OR REPLACE TEMP VIEW src_mem_kind AS
SELECT CAST(NULL AS BIGINT) AS id, CAST(NULL AS VARCHAR) AS label WHERE false;
