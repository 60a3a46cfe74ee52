-- Defaults of the host adapter views, for a format that lacks some of the tables: each view is
-- empty, with the columns and types the contract tables sync_event, osrt_call, profiler_overhead
-- and gpu_metric are filled from (schemas/derive/host.sql). Ingest runs this file before a
-- format's own host.sql, which replaces the views it has data for.
CREATE OR REPLACE TEMP VIEW src_sync_event AS
SELECT CAST(NULL AS BIGINT) AS src_row, CAST(NULL AS VARCHAR) AS kind_hint, CAST(NULL AS INTEGER) AS device_id,
       CAST(NULL AS BIGINT) AS context_id, CAST(NULL AS BIGINT) AS stream_id, CAST(NULL AS BIGINT) AS event_id,
       CAST(NULL AS BIGINT) AS pid, CAST(NULL AS BIGINT) AS ts, CAST(NULL AS BIGINT) AS dur,
       CAST(NULL AS BIGINT) AS correlation_id
WHERE false;

CREATE OR REPLACE TEMP VIEW src_osrt_call AS
SELECT CAST(NULL AS BIGINT) AS src_row, CAST(NULL AS BIGINT) AS pid, CAST(NULL AS BIGINT) AS tid,
       CAST(NULL AS BIGINT) AS ts, CAST(NULL AS BIGINT) AS dur, CAST(NULL AS VARCHAR) AS name,
       CAST(NULL AS BIGINT) AS return_value, CAST(NULL AS BIGINT) AS nesting_level
WHERE false;

CREATE OR REPLACE TEMP VIEW src_profiler_overhead AS
SELECT CAST(NULL AS BIGINT) AS pid, CAST(NULL AS BIGINT) AS tid, CAST(NULL AS BIGINT) AS ts,
       CAST(NULL AS BIGINT) AS dur, CAST(NULL AS VARCHAR) AS name
WHERE false;

CREATE OR REPLACE TEMP VIEW src_gpu_metric AS
SELECT CAST(NULL AS INTEGER) AS device_id, CAST(NULL AS BIGINT) AS ts, CAST(NULL AS VARCHAR) AS metric,
       CAST(NULL AS DOUBLE) AS value
WHERE false;
