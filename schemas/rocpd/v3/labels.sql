-- Shared lookups of the rocpd adapters (created first; the other adapter files use them).

-- raw.TARGET_INFO_SESSION_START_TIME: rocpd timestamps are host-clock ns, not a session-relative
-- clock; ingest's trace row looks a session start up in this nsys table: an empty stand-in.
CREATE TABLE IF NOT EXISTS raw.TARGET_INFO_SESSION_START_TIME (utcEpochNs BIGINT);

-- src_rocpd_event: each event with its category name (rocpd_string) and the correlation id the
-- adapters use: stack_id, the tracer's internal correlation id that a HIP call shares with the
-- kernel or copy it enqueued (correlation_id is the user's external id, 0 when unset).
CREATE OR REPLACE TEMP TABLE src_rocpd_event AS
SELECT e.id AS event_id, s.string AS category, nullif(e.stack_id, 0) AS correlation_id
FROM raw.rocpd_event e
LEFT JOIN raw.rocpd_string s ON s.id = e.category_id;

-- src_rocpd_thread: rocpd's thread row ids with the OS process and thread ids behind them.
CREATE OR REPLACE TEMP TABLE src_rocpd_thread AS
SELECT t.id, p.pid, t.tid, t.name
FROM raw.rocpd_info_thread t
LEFT JOIN raw.rocpd_info_process p ON p.id = t.pid;

-- src_rocpd_agent: agent row ids with the contract's device_id: a GPU agent's type_index, the HIP
-- device ordinal (hipSetDevice(n)); CPU agents have no device_id.
CREATE OR REPLACE TEMP TABLE src_rocpd_agent AS
SELECT id, CASE WHEN type = 'GPU' THEN type_index END AS device_id, type
FROM raw.rocpd_info_agent;

-- src_copy_kind: rocpd memory copy names (rocprofiler's MEMORY_COPY_* operations) and the
-- contract's labels.
CREATE OR REPLACE TEMP VIEW src_copy_kind AS
SELECT * FROM (VALUES
    ('MEMORY_COPY_NONE', 'Unknown'), ('MEMORY_COPY_HOST_TO_HOST', 'Host-to-Host'),
    ('MEMORY_COPY_HOST_TO_DEVICE', 'Host-to-Device'), ('MEMORY_COPY_DEVICE_TO_HOST', 'Device-to-Host'),
    ('MEMORY_COPY_DEVICE_TO_DEVICE', 'Device-to-Device')
) AS t(name, label);
