-- The rocmProfileData (rpd_tracer, "RPD") source tables the rpd adapters read: an older rocpd schema
-- (rocpd_metadata schema_version 2) with plain table names. rocpd_api: HIP/HSA/roctx API calls;
-- rocpd_op: GPU operations (opType KernelExecution, Task (a graph's kernel), CopyHostToDevice, FillBuffer,
-- ...; description is the kernel name); rocpd_api_ops pairs each op with the API call that enqueued
-- it; rocpd_kernelapi and rocpd_copyapi add a call's launch or copy arguments. gpuId is the HIP
-- device ordinal, queueId the HSA queue; timestamps are host-clock ns.
CREATE TABLE rocpd_string (id BIGINT, string VARCHAR);

CREATE TABLE rocpd_metadata (id BIGINT, tag VARCHAR, value VARCHAR);

CREATE TABLE rocpd_api (id BIGINT, pid BIGINT, tid BIGINT, start BIGINT, "end" BIGINT, apiName_id BIGINT, args_id BIGINT);

CREATE TABLE rocpd_op (
    id BIGINT, gpuId BIGINT, queueId BIGINT, sequenceId BIGINT, start BIGINT, "end" BIGINT,
    description_id BIGINT, opType_id BIGINT
);

CREATE TABLE rocpd_api_ops (id BIGINT, api_id BIGINT, op_id BIGINT);

CREATE TABLE rocpd_kernelapi (
    api_ptr_id BIGINT, stream VARCHAR, gridX BIGINT, gridY BIGINT, gridZ BIGINT, workgroupX BIGINT,
    workgroupY BIGINT, workgroupZ BIGINT, groupSegmentSize BIGINT, privateSegmentSize BIGINT,
    kernelName_id BIGINT
);

CREATE TABLE rocpd_copyapi (api_ptr_id BIGINT, stream VARCHAR, size BIGINT, kind BIGINT);

-- ext_autogradapi: PyTorch's autograd details of the roctx ranges it opened (seq, op_id, sizes), which
-- rpd's torch hook adds; only counted (ingest_stats rpd.autograd_not_read).
CREATE TABLE ext_autogradapi (api_ptr_id BIGINT);

-- rocpd_monitor: rocm-smi samples (GPU clock 'sclk', ...) per SMI device index, which need not be the
-- HIP ordinal of rocpd_op.gpuId; only counted (ingest_stats rpd.monitor_not_read).
CREATE TABLE rocpd_monitor (id BIGINT);
