-- src_kernel: kernel dispatches from rocpd_kernel_dispatch. The name is the kernel symbol's
-- display_name (demangled by rocprofv3; the vendor's top_kernels view groups by it), short_name the
-- function name without namespace, template arguments and parameters. AMD vocabulary in CUDA's
-- columns: device_id is the GPU agent's HIP device ordinal; stream_id the HIP stream (rocpd's
-- stream row id, 0 = the default stream); context_id the HSA queue's row id (AMD has no contexts: the
-- queue is what the hardware runs); grid_* is the grid size in work-items (HIP's blockDim * gridDim:
-- rocpd records work-items, not blocks) and block_* the workgroup size; registers_per_thread the
-- architected VGPRs; static_shared_memory the LDS the dispatch asked for (group segment), 
-- local_memory_per_thread the scratch (private segment) per work-item. correlation_id is the
-- event's stack_id, shared with the HIP call that launched it (src_rocpd_event).
CREATE OR REPLACE TEMP VIEW src_kernel AS
SELECT
    k.id                                    AS src_row,
    a.device_id                             AS device_id,
    k.queue_id                              AS context_id,
    k.stream_id                             AS stream_id,
    t.pid                                   AS pid,
    e.correlation_id                        AS correlation_id,
    k.start                                 AS ts,
    k."end" - k.start                       AS dur,
    s.display_name                          AS name,
    n.short_name                            AS short_name,
    s.kernel_name                           AS mangled_name,
    k.grid_size_x AS grid_x, k.grid_size_y AS grid_y, k.grid_size_z AS grid_z,
    k.workgroup_size_x AS block_x, k.workgroup_size_y AS block_y, k.workgroup_size_z AS block_z,
    s.arch_vgpr_count                       AS registers_per_thread,
    k.group_segment_size                    AS static_shared_memory,
    CAST(NULL AS BIGINT)                    AS dynamic_shared_memory,
    k.private_segment_size                  AS local_memory_per_thread,
    CAST(NULL AS VARCHAR)                   AS launch_type,
    k.dispatch_id                           AS grid_id,
    CAST(NULL AS BIGINT)                    AS graph_node_id,
    CAST(NULL AS BIGINT)                    AS graph_id
FROM raw.rocpd_kernel_dispatch k
LEFT JOIN raw.rocpd_info_kernel_symbol s ON s.id = k.kernel_id
LEFT JOIN src_demangled n ON n.id = k.kernel_id
LEFT JOIN src_rocpd_agent a ON a.id = k.agent_id
LEFT JOIN src_rocpd_thread t ON t.id = k.tid
LEFT JOIN src_rocpd_event e ON e.event_id = k.event_id
WHERE k.start IS NOT NULL AND k."end" IS NOT NULL;
