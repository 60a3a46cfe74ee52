-- Shared lookups of the rpd adapters.

-- raw.TARGET_INFO_SESSION_START_TIME: rpd records no session start; an empty stand-in for the
-- nsys table ingest's trace row reads.
CREATE TABLE IF NOT EXISTS raw.TARGET_INFO_SESSION_START_TIME (utcEpochNs BIGINT);

-- src_rpd_op: each GPU operation with its type, description and the API call that enqueued it
-- (rocpd_api_ops; the call's id is the correlation id of both), and its process.
CREATE OR REPLACE TEMP TABLE src_rpd_op AS
SELECT o.id, o.gpuId, o.queueId, o.start, o."end", t.string AS op_type, o.description_id,
       d.string AS description, ao.api_id, a.pid
FROM raw.rocpd_op o
LEFT JOIN raw.rocpd_string t ON t.id = o.opType_id
LEFT JOIN raw.rocpd_string d ON d.id = o.description_id
LEFT JOIN (SELECT op_id, min(api_id) AS api_id FROM raw.rocpd_api_ops GROUP BY op_id) ao ON ao.op_id = o.id
LEFT JOIN raw.rocpd_api a ON a.id = ao.api_id;

-- src_rpd_api_name: the API names of rocpd_api rows (a small lookup: one row per distinct name).
CREATE OR REPLACE TEMP TABLE src_rpd_api_name AS
SELECT s.id, s.string FROM raw.rocpd_string s SEMI JOIN (SELECT DISTINCT apiName_id FROM raw.rocpd_api) a ON a.apiName_id = s.id;
