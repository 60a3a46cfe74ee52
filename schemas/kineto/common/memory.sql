-- src_memory_event: PyTorch's caching-allocator events, which the profiler writes with
-- profile_memory=True as instant events named '[memory]' on the thread that allocated or freed
-- (ph 'i'; category 'cpu_instant_event' in current writers, none in 2021's). Their args:
--   Bytes            signed: positive for an allocation, negative for a free (every writer);
--   Device Type      c10::DeviceType: 0 CPU (mem_kind 'Host', no device), 1 CUDA (ROCm builds
--                    write 1 too) and 6 HIP ('Device'), anything else 'Unknown (device type N)';
--   Device Id        the GPU index, -1 for the CPU (device_id NULL);
--   Addr, Total Allocated, Total Reserved   written since 2022 (NULL in 2021's traces): the
--                    block's address, and the allocator's allocated and reserved bytes on that
--                    device after the event.
-- The Python stack open on the thread at the event (with_stack=True): src_api_stack of stacks.sql.
CREATE OR REPLACE TEMP VIEW src_memory_event AS
WITH m AS (
    SELECT src_row, pid, tid, kineto_ns(ts) AS ts,
           json_extract_string(args, ['$.Bytes', '$."Device Type"', '$."Device Id"', '$.Addr',
                                      '$."Total Allocated"', '$."Total Reserved"']) AS a
    FROM raw.kineto_event
    WHERE name = '[memory]' AND ph = 'i' AND args <> ''
)
SELECT
    m.src_row,
    CASE WHEN TRY_CAST(a[3] AS INTEGER) >= 0 AND TRY_CAST(a[2] AS INTEGER) <> 0
         THEN TRY_CAST(a[3] AS INTEGER) END                           AS device_id,
    CASE TRY_CAST(a[2] AS INTEGER) WHEN 0 THEN 'Host' WHEN 1 THEN 'Device' WHEN 6 THEN 'Device'
         ELSE 'Unknown (device type ' || coalesce(a[2], 'absent') || ')' END AS mem_kind,
    pid, tid, ts,
    TRY_CAST(a[1] AS BIGINT)                                         AS bytes,
    TRY_CAST(a[4] AS BIGINT)                                         AS address,
    CAST(NULL AS BIGINT)                                             AS correlation_id,
    TRY_CAST(a[5] AS BIGINT)                                         AS total_allocated,
    TRY_CAST(a[6] AS BIGINT)                                         AS total_reserved,
    k.stack_id                                                       AS stack_id
FROM m
LEFT JOIN src_api_stack k ON k.src_row = m.src_row
WHERE ts IS NOT NULL AND TRY_CAST(a[1] AS BIGINT) IS NOT NULL;
