-- src_device: GPU agents (rocpd_info_agent type 'GPU'; CPU agents are not devices). device_id is
-- the HIP device ordinal (type_index); name the product name (e.g. 'AMD Instinct MI300X'; the ISA,
-- e.g. gfx942, is the agent's name and not kept). From the HSA properties in extdata: sm_count is
-- cu_count (compute units, AMD's counterpart of SMs), clock_rate max_engine_clk_fcompute (MHz) in
-- Hz, total_memory the summed mem_banks sizes in bytes, l2_cache_size the level-2 cache (kB) in
-- bytes. AMD GPUs have no CUDA compute capability (NULL) and rocpd records no memory bandwidth;
-- bus_location is the PCI location_id (bus << 8 | device << 3 | function) as bb:dd.f.
CREATE OR REPLACE TEMP VIEW src_device AS
WITH a AS (
    SELECT type_index, product_name, name, json(extdata) AS x, id
    FROM raw.rocpd_info_agent WHERE type = 'GPU'
)
SELECT
    CAST(a.type_index AS INTEGER)                                      AS device_id,
    coalesce(a.product_name, a.name)                                   AS name,
    TRY_CAST(json_extract_string(a.x, '$.cu_count') AS INTEGER)        AS sm_count,
    CAST(NULL AS BIGINT)                                               AS memory_bandwidth,
    TRY_CAST(json_extract_string(a.x, '$.max_engine_clk_fcompute') AS BIGINT) * 1000000 AS clock_rate,
    (SELECT sum(TRY_CAST(json_extract_string(b, '$.size_in_bytes') AS BIGINT))
     FROM (SELECT unnest(CAST(json_extract(a.x, '$.mem_banks') AS JSON[])) AS b))  AS total_memory,
    (SELECT max(TRY_CAST(json_extract_string(c, '$.size') AS BIGINT)) * 1024
     FROM (SELECT unnest(CAST(json_extract(a.x, '$.caches') AS JSON[])) AS c)
     WHERE TRY_CAST(json_extract_string(c, '$.level') AS INTEGER) = 2)              AS l2_cache_size,
    CAST(NULL AS INTEGER)                                              AS compute_major,
    CAST(NULL AS INTEGER)                                              AS compute_minor,
    CASE WHEN TRY_CAST(json_extract_string(a.x, '$.location_id') AS BIGINT) IS NOT NULL THEN
        printf('%02x:%02x.%x', TRY_CAST(json_extract_string(a.x, '$.location_id') AS BIGINT) >> 8,
               (TRY_CAST(json_extract_string(a.x, '$.location_id') AS BIGINT) >> 3) & 31,
               TRY_CAST(json_extract_string(a.x, '$.location_id') AS BIGINT) & 7) END AS bus_location,
    CAST(NULL AS VARCHAR)                                              AS uuid
FROM a
WHERE a.type_index IS NOT NULL
QUALIFY row_number() OVER (PARTITION BY a.type_index ORDER BY a.id) = 1;
