-- src_device: GPUs of pre-2022 exports. They describe CUDA GPUs in TARGET_INFO_CUDA_GPU
-- (bandwidth in kB/s, clock in kHz, memory in bytes or, in some files, MiB), next to a short
-- TARGET_INFO_GPU (deviceId, name, busLocation) or, in some files, the later 41-column one.
CREATE OR REPLACE TEMP VIEW src_device AS
WITH cuda_gpu AS (
    SELECT
        c.deviceId                          AS device_id,
        c.name                              AS name,
        c.numMultiprocessors                AS sm_count,
        nullif(c.globalMemoryBandwidth, 0) * 1000 AS memory_bandwidth,
        c.coreClockRate * 1000              AS clock_rate,
        CASE WHEN c.globalMemorySize < 1048576 THEN c.globalMemorySize * 1048576
             ELSE c.globalMemorySize END    AS total_memory,
        c.l2CacheSize                       AS l2_cache_size,
        c.computeCapabilityMajor            AS compute_major,
        c.computeCapabilityMinor            AS compute_minor,
        c.pciBusId                          AS bus_location,
        CAST(NULL AS VARCHAR)               AS uuid
    FROM raw.TARGET_INFO_CUDA_GPU c
    WHERE c.deviceId IS NOT NULL
    QUALIFY row_number() OVER (PARTITION BY c.deviceId ORDER BY c.rowid) = 1
),
gpu AS (
    SELECT g.id, g.name, CASE WHEN g.smCount > 0 THEN g.smCount END, g.memoryBandwidth, g.clockRate, g.totalMemory, g.l2CacheSize,
           g.computeMajor, g.computeMinor, g.busLocation, g.uuid
    FROM raw.TARGET_INFO_GPU g
    WHERE g.id IS NOT NULL AND (coalesce(g.smCount, 0) > 0 OR coalesce(g.computeMajor, 0) > 0)
      AND g.id NOT IN (SELECT device_id FROM cuda_gpu)
    QUALIFY row_number() OVER (PARTITION BY g.id ORDER BY g.rowid) = 1
)
SELECT * FROM cuda_gpu
UNION ALL
SELECT * FROM gpu;
