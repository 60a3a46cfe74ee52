-- src_memcpy: memory copies from rocpd_memory_copy (SDMA or blit copies). The copy kind comes from
-- the copy's name (MEMORY_COPY_HOST_TO_DEVICE, ...: src_copy_kind); device_id is the GPU agent among
-- destination and source (the destination first); src/dst_device_id are NULL for host agents.
-- rocpd records no memory kinds (pageable/pinned): src_kind and dst_kind are NULL.
CREATE OR REPLACE TEMP VIEW src_memcpy AS
SELECT
    c.id                            AS src_row,
    coalesce(da.device_id, sa.device_id) AS device_id,
    c.queue_id                      AS context_id,
    c.stream_id                     AS stream_id,
    t.pid                           AS pid,
    e.correlation_id                AS correlation_id,
    c.start                         AS ts,
    c."end" - c.start               AS dur,
    c.size                          AS bytes,
    coalesce(ck.label, 'Unknown (' || s.string || ')') AS copy_kind,
    CAST(NULL AS VARCHAR)           AS src_kind,
    CAST(NULL AS VARCHAR)           AS dst_kind,
    sa.device_id                    AS src_device_id,
    da.device_id                    AS dst_device_id,
    CAST(NULL AS BIGINT)            AS graph_node_id,
    CAST(NULL AS BIGINT)            AS graph_id
FROM raw.rocpd_memory_copy c
LEFT JOIN raw.rocpd_string s ON s.id = c.name_id
LEFT JOIN src_copy_kind ck ON ck.name = s.string
LEFT JOIN src_rocpd_agent sa ON sa.id = c.src_agent_id
LEFT JOIN src_rocpd_agent da ON da.id = c.dst_agent_id
LEFT JOIN src_rocpd_thread t ON t.id = c.tid
LEFT JOIN src_rocpd_event e ON e.event_id = c.event_id
WHERE c.start IS NOT NULL AND c."end" IS NOT NULL;
