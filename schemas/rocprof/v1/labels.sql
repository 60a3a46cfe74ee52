-- Shared lookups of the rocprof (v1) adapters.

-- raw.TARGET_INFO_SESSION_START_TIME: rocprof records no session start; ingest's trace row looks
-- one up in this nsys table: an empty stand-in.
CREATE TABLE IF NOT EXISTS raw.TARGET_INFO_SESSION_START_TIME (utcEpochNs BIGINT);
