-- Default src_device for a format that records no device properties (rocprof v1: rocminfo's output
-- is a separate text file): empty; the devices the GPU work names are still listed
-- (schemas/derive/device_seen.sql). A format's own device.sql replaces it.
CREATE OR REPLACE TEMP VIEW src_device AS
SELECT CAST(NULL AS INTEGER) AS device_id, CAST(NULL AS VARCHAR) AS name, CAST(NULL AS INTEGER) AS sm_count,
       CAST(NULL AS BIGINT) AS memory_bandwidth, CAST(NULL AS BIGINT) AS clock_rate,
       CAST(NULL AS BIGINT) AS total_memory, CAST(NULL AS BIGINT) AS l2_cache_size,
       CAST(NULL AS INTEGER) AS compute_major, CAST(NULL AS INTEGER) AS compute_minor,
       CAST(NULL AS VARCHAR) AS bus_location, CAST(NULL AS VARCHAR) AS uuid
WHERE false;
