-- src_device: GPUs from CUPTI_ACTIVITY_KIND_DEVICE, converted to the contract's units: CUPTI
-- records globalMemoryBandwidth in kB/s and coreClockRate in kHz (a V100 shows 898048000 and
-- 1530000: 898 GB/s, 1.53 GHz); memory and L2 sizes are bytes already. The 16-byte uuid is
-- written like nsys writes GPU UUIDs (8-4-4-4-12 lowercase hex). nvprof records no PCI location.
CREATE OR REPLACE TEMP VIEW src_device AS
SELECT
    d.id                                     AS device_id,
    s.value                                  AS name,
    d.numMultiprocessors                     AS sm_count,
    nullif(d.globalMemoryBandwidth, 0) * 1000 AS memory_bandwidth,
    nullif(d.coreClockRate, 0) * 1000        AS clock_rate,
    d.globalMemorySize                       AS total_memory,
    d.l2CacheSize                            AS l2_cache_size,
    d.computeCapabilityMajor                 AS compute_major,
    d.computeCapabilityMinor                 AS compute_minor,
    CAST(NULL AS VARCHAR)                    AS bus_location,
    CASE WHEN octet_length(d.uuid) = 16 THEN
        lower(substr(hex(d.uuid), 1, 8) || '-' || substr(hex(d.uuid), 9, 4) || '-' || substr(hex(d.uuid), 13, 4)
              || '-' || substr(hex(d.uuid), 17, 4) || '-' || substr(hex(d.uuid), 21, 12))
    END                                      AS uuid
FROM raw.CUPTI_ACTIVITY_KIND_DEVICE d
LEFT JOIN raw.StringTable s ON s._id_ = d.name
WHERE d.id IS NOT NULL
QUALIFY row_number() OVER (PARTITION BY d.id ORDER BY d._id_) = 1;
