-- Default src_memset for a format that records no memset activity (rocpd, rocprof v1: hipMemset runs
-- a fill kernel, e.g. __amd_rocclr_fillBufferAligned, which is a kernel row): empty. A format's own
-- memset.sql replaces it.
CREATE OR REPLACE TEMP VIEW src_memset AS
SELECT
    CAST(NULL AS BIGINT) AS src_row, CAST(NULL AS INTEGER) AS device_id, CAST(NULL AS BIGINT) AS context_id,
    CAST(NULL AS BIGINT) AS stream_id, CAST(NULL AS BIGINT) AS pid, CAST(NULL AS BIGINT) AS correlation_id,
    CAST(NULL AS BIGINT) AS ts, CAST(NULL AS BIGINT) AS dur, CAST(NULL AS BIGINT) AS bytes,
    CAST(NULL AS BIGINT) AS value, CAST(NULL AS VARCHAR) AS mem_kind, CAST(NULL AS BIGINT) AS graph_node_id,
    CAST(NULL AS BIGINT) AS graph_id
WHERE false;
