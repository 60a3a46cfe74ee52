-- src_device: CUDA GPUs from TARGET_INFO_GPU (2.9.1 on). Windows exports also list display
-- adapters there (Intel HD Graphics, Microsoft Basic Render Driver) with no SMs and compute capability
-- 0: left out. A GPU whose SM count is unreadable (NULL) but has a compute capability is kept.
CREATE OR REPLACE TEMP VIEW src_device AS
SELECT
    g.id              AS device_id,
    g.name            AS name,
    CASE WHEN g.smCount > 0 THEN g.smCount END AS sm_count,
    g.memoryBandwidth AS memory_bandwidth,
    g.clockRate       AS clock_rate,
    g.totalMemory     AS total_memory,
    g.l2CacheSize     AS l2_cache_size,
    g.computeMajor    AS compute_major,
    g.computeMinor    AS compute_minor,
    g.busLocation     AS bus_location,
    g.uuid            AS uuid
FROM raw.TARGET_INFO_GPU g
WHERE g.id IS NOT NULL AND (coalesce(g.smCount, 0) > 0 OR coalesce(g.computeMajor, 0) > 0)
QUALIFY row_number() OVER (PARTITION BY g.id ORDER BY g.rowid) = 1;
