-- src_memcpy: memory copies from rocprof's COPY table. The copy kind comes from the name
-- (CopyHostToDevice, CopyDeviceToHost, CopyDeviceToDevice); rocprof v1 records no byte counts (the
-- HIP call's args hold a size: not parsed) and no memory kinds: bytes, src_kind, dst_kind NULL.
CREATE OR REPLACE TEMP VIEW src_memcpy AS
SELECT
    c.rowid                         AS src_row,
    CAST(c."dev-id" AS INTEGER)     AS device_id,
    c."queue-id"                    AS context_id,
    c."stream-id"                   AS stream_id,
    c.pid                           AS pid,
    c."Index"                       AS correlation_id,
    c.BeginNs                       AS ts,
    c.EndNs - c.BeginNs             AS dur,
    CAST(NULL AS BIGINT)            AS bytes,
    CASE c.Name WHEN 'CopyHostToDevice' THEN 'Host-to-Device' WHEN 'CopyDeviceToHost' THEN 'Device-to-Host'
                WHEN 'CopyDeviceToDevice' THEN 'Device-to-Device' WHEN 'CopyHostToHost' THEN 'Host-to-Host'
                ELSE 'Unknown (' || c.Name || ')' END AS copy_kind,
    CAST(NULL AS VARCHAR)           AS src_kind,
    CAST(NULL AS VARCHAR)           AS dst_kind,
    CAST(NULL AS INTEGER)           AS src_device_id,
    CAST(NULL AS INTEGER)           AS dst_device_id,
    CAST(NULL AS BIGINT)            AS graph_node_id,
    CAST(NULL AS BIGINT)            AS graph_id
FROM raw.COPY c
WHERE c.BeginNs IS NOT NULL AND c.EndNs IS NOT NULL;
