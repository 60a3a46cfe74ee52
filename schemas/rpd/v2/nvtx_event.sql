-- src_nvtx_event: rpd records roctx markers among its API calls (UserMarker); not read yet: empty,
-- with the columns schemas/derive/nvtx_range.sql reads.
CREATE OR REPLACE TEMP VIEW src_nvtx_event AS
SELECT CAST(NULL AS BIGINT) AS src_row, CAST(NULL AS VARCHAR) AS kind, CAST(NULL AS VARCHAR) AS style,
       CAST(NULL AS BIGINT) AS pid, CAST(NULL AS BIGINT) AS tid, CAST(NULL AS BIGINT) AS end_tid,
       CAST(NULL AS BIGINT) AS ts, CAST(NULL AS BIGINT) AS end_ts, CAST(NULL AS VARCHAR) AS name,
       CAST(NULL AS VARCHAR) AS domain, CAST(NULL AS BIGINT) AS color, CAST(NULL AS BIGINT) AS category,
       CAST(NULL AS VARCHAR) AS args
WHERE false;
