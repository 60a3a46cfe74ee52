-- The rocpd source tables and columns that the rocpd adapters read, with the DuckDB types they are
-- read as (rocprofv3's SQLite output since ROCm 7: one database per process, rocprofiler-sdk's
-- rocpd schema). In the file each table is rocpd_<name>_<guid>; rocprofv3 adds plain views
-- (rocpd_<name>, kernels, regions, top_kernels, ...) over them, which traceql does not read: the
-- tables are staged under their plain names. Ids (pid, tid, agent_id, kernel_id, ...) are row ids
-- of the rocpd_info_* tables, not OS or device numbers; timestamps are ns on the host's clock.
-- AMD vocabulary: an agent is an HSA device (CPU or GPU); a GPU agent is a HIP device (the contract's
-- device); a queue is an HSA hardware queue, a stream a HIP stream.

CREATE TABLE rocpd_metadata (id BIGINT, tag VARCHAR, value VARCHAR);

CREATE TABLE rocpd_string (id BIGINT, string VARCHAR);

CREATE TABLE rocpd_info_node (id BIGINT, hostname VARCHAR, system_name VARCHAR, release VARCHAR);

CREATE TABLE rocpd_info_process (id BIGINT, pid BIGINT, ppid BIGINT, command VARCHAR, start BIGINT, "end" BIGINT);

CREATE TABLE rocpd_info_thread (id BIGINT, pid BIGINT, tid BIGINT, name VARCHAR);

-- Agents: type 'CPU' or 'GPU'; type_index is the HIP device ordinal of a GPU agent; extdata is
-- the HSA agent properties as JSON (cu_count, mem_banks, max_engine_clk_fcompute, ...).
CREATE TABLE rocpd_info_agent (
    id BIGINT, type VARCHAR, absolute_index BIGINT, logical_index BIGINT, type_index BIGINT,
    name VARCHAR, product_name VARCHAR, extdata VARCHAR
);

CREATE TABLE rocpd_info_queue (id BIGINT, name VARCHAR);

CREATE TABLE rocpd_info_stream (id BIGINT, name VARCHAR);

-- Kernel symbols: LDS (group segment) and scratch (private segment) in bytes, register counts.
CREATE TABLE rocpd_info_kernel_symbol (
    id BIGINT, kernel_name VARCHAR, display_name VARCHAR, group_segment_size BIGINT,
    private_segment_size BIGINT, sgpr_count BIGINT, arch_vgpr_count BIGINT, accum_vgpr_count BIGINT
);

-- Events: the correlation of an API call (region) and the GPU work it caused is stack_id, the
-- tracer's internal correlation id (correlation_id is the external one, 0 unless set by the user).
CREATE TABLE rocpd_event (id BIGINT, category_id BIGINT, stack_id BIGINT, parent_stack_id BIGINT, correlation_id BIGINT);

CREATE TABLE rocpd_kernel_dispatch (
    id BIGINT, pid BIGINT, tid BIGINT, agent_id BIGINT, kernel_id BIGINT, dispatch_id BIGINT,
    queue_id BIGINT, stream_id BIGINT, start BIGINT, "end" BIGINT, private_segment_size BIGINT,
    group_segment_size BIGINT, workgroup_size_x BIGINT, workgroup_size_y BIGINT, workgroup_size_z BIGINT,
    grid_size_x BIGINT, grid_size_y BIGINT, grid_size_z BIGINT, region_name_id BIGINT, event_id BIGINT
);

-- Regions: HIP/HSA API calls and rocTX ranges (the event's category says which).
CREATE TABLE rocpd_region (id BIGINT, pid BIGINT, tid BIGINT, start BIGINT, "end" BIGINT, name_id BIGINT, event_id BIGINT);

CREATE TABLE rocpd_memory_copy (
    id BIGINT, pid BIGINT, tid BIGINT, start BIGINT, "end" BIGINT, name_id BIGINT, dst_agent_id BIGINT,
    src_agent_id BIGINT, size BIGINT, queue_id BIGINT, stream_id BIGINT, event_id BIGINT
);

CREATE TABLE rocpd_memory_allocate (id BIGINT);

CREATE TABLE rocpd_sample (id BIGINT);

CREATE TABLE rocpd_pmc_event (id BIGINT);
