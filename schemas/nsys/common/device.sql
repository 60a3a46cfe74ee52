-- src_device: CUDA GPUs from TARGET_INFO_GPU (2.9.1 on). Windows exports also list display
-- adapters there (Intel HD Graphics, Microsoft Basic Render Driver) with no SMs: left out.
CREATE OR REPLACE TEMP VIEW src_device AS
SELECT
    g.id              AS device_id,
    g.name            AS name,
    g.smCount         AS sm_count,
    g.memoryBandwidth AS memory_bandwidth,
    g.clockRate       AS clock_rate,
    g.totalMemory     AS total_memory,
    g.l2CacheSize     AS l2_cache_size,
    g.computeMajor    AS compute_major,
    g.computeMinor    AS compute_minor,
    g.busLocation     AS bus_location,
    g.uuid            AS uuid
FROM raw.TARGET_INFO_GPU g
WHERE g.id IS NOT NULL AND coalesce(g.smCount, 0) > 0
QUALIFY row_number() OVER (PARTITION BY g.id ORDER BY g.rowid) = 1;
