-- The nvprof source tables and columns that the nvprof adapters read, with the DuckDB
-- types they are read as (nvprof databases: `nvprof -o out.nvvp|out.sql`; layout in
-- ../shared/reference/nvprof-sqlite-schema.md). Ingest stages exactly these: a column
-- the file lacks (older nvprof versions) is read as NULL, a table it lacks is an empty
-- table, and everything else in the file is never read. Every nvprof table has an
-- `_id_` row id; names are StringTable ids; timestamps are absolute Unix-epoch ns.

CREATE TABLE StringTable (_id_ BIGINT, value VARCHAR);

CREATE TABLE Version (version BIGINT);

-- Kernels: CONCURRENT_KERNEL by default, KERNEL when nvprof serialized kernels
-- (e.g. --analysis-metrics). Same columns; graphNodeId/graphId from Version 16 on.
CREATE TABLE CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL (
    _id_ BIGINT, start BIGINT, "end" BIGINT, deviceId BIGINT, contextId BIGINT, streamId BIGINT,
    correlationId BIGINT, name BIGINT, gridX BIGINT, gridY BIGINT, gridZ BIGINT,
    blockX BIGINT, blockY BIGINT, blockZ BIGINT, registersPerThread BIGINT,
    staticSharedMemory BIGINT, dynamicSharedMemory BIGINT, localMemoryPerThread BIGINT,
    gridId BIGINT, launchType BIGINT, graphNodeId BIGINT, graphId BIGINT
);

CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (
    _id_ BIGINT, start BIGINT, "end" BIGINT, deviceId BIGINT, contextId BIGINT, streamId BIGINT,
    correlationId BIGINT, name BIGINT, gridX BIGINT, gridY BIGINT, gridZ BIGINT,
    blockX BIGINT, blockY BIGINT, blockZ BIGINT, registersPerThread BIGINT,
    staticSharedMemory BIGINT, dynamicSharedMemory BIGINT, localMemoryPerThread BIGINT,
    gridId BIGINT, launchType BIGINT, graphNodeId BIGINT, graphId BIGINT
);

-- CUDA runtime and driver API calls: cbid is a CUPTI callback id (separate id spaces),
-- threadId a signed 32-bit copy of the unsigned OS thread id.
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (
    _id_ BIGINT, cbid BIGINT, start BIGINT, "end" BIGINT, processId BIGINT, threadId BIGINT,
    correlationId BIGINT, returnValue BIGINT
);

CREATE TABLE CUPTI_ACTIVITY_KIND_DRIVER (
    _id_ BIGINT, cbid BIGINT, start BIGINT, "end" BIGINT, processId BIGINT, threadId BIGINT,
    correlationId BIGINT, returnValue BIGINT
);

CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (
    _id_ BIGINT, copyKind BIGINT, srcKind BIGINT, dstKind BIGINT, bytes BIGINT, start BIGINT,
    "end" BIGINT, deviceId BIGINT, contextId BIGINT, streamId BIGINT, correlationId BIGINT,
    graphNodeId BIGINT, graphId BIGINT
);

-- Peer-to-peer copies.
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY2 (
    _id_ BIGINT, copyKind BIGINT, srcKind BIGINT, dstKind BIGINT, bytes BIGINT, start BIGINT,
    "end" BIGINT, deviceId BIGINT, contextId BIGINT, streamId BIGINT, srcDeviceId BIGINT,
    dstDeviceId BIGINT, correlationId BIGINT, graphNodeId BIGINT
);

CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (
    _id_ BIGINT, value BIGINT, bytes BIGINT, start BIGINT, "end" BIGINT, deviceId BIGINT,
    contextId BIGINT, streamId BIGINT, correlationId BIGINT, memoryKind BIGINT, graphNodeId BIGINT,
    graphId BIGINT
);

-- NVTX: one row per marker record (flags 1 mark, 2 range start, 4 range end); objectId is
-- the 12-byte CUPTI object id (THREAD: pid u32 LE, tid u32 LE, 4 zero bytes).
CREATE TABLE CUPTI_ACTIVITY_KIND_MARKER (
    _id_ BIGINT, flags BIGINT, "timestamp" BIGINT, id BIGINT, objectKind BIGINT, objectId BLOB,
    name BIGINT, domain BIGINT
);

CREATE TABLE CUPTI_ACTIVITY_KIND_MARKER_DATA (
    _id_ BIGINT, flags BIGINT, id BIGINT, color BIGINT, category BIGINT
);

-- Process (objectKind 1, the command line) and thread (objectKind 2) names.
CREATE TABLE CUPTI_ACTIVITY_KIND_NAME (_id_ BIGINT, objectKind BIGINT, objectId BLOB, name BIGINT);

-- GPUs: bandwidth in kB/s, core clock in kHz, memory sizes in bytes.
CREATE TABLE CUPTI_ACTIVITY_KIND_DEVICE (
    _id_ BIGINT, id BIGINT, name BIGINT, globalMemoryBandwidth BIGINT, globalMemorySize BIGINT,
    l2CacheSize BIGINT, coreClockRate BIGINT, numMultiprocessors BIGINT,
    computeCapabilityMajor BIGINT, computeCapabilityMinor BIGINT, uuid BLOB
);

-- CUDA synchronizations (schemas/nvprof/common/host.sql): type is CUPTI's
-- CUpti_ActivitySynchronizationType (1 event synchronize, 2 stream wait event, 3 stream
-- synchronize, 4 context synchronize); ids of 0xFFFFFFFF mean none. A context's device comes
-- from CONTEXT.
CREATE TABLE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (
    _id_ BIGINT, type BIGINT, start BIGINT, "end" BIGINT, correlationId BIGINT, contextId BIGINT,
    streamId BIGINT, cudaEventId BIGINT
);

CREATE TABLE CUPTI_ACTIVITY_KIND_CONTEXT (_id_ BIGINT, contextId BIGINT, deviceId BIGINT);
