-- The Nsight Systems source tables and columns that the nsys adapters read, with
-- the DuckDB types they are read as. Ingest stages exactly these: a column the
-- file lacks (older or newer exporters, lazy exports) is read as NULL, a table
-- the file lacks is an empty table, and anything the file has beyond this list
-- (tables or columns added by other tools) is never read. A layout folder may add tables
-- of its own in its raw.sql (schemas/nsys/legacy/raw.sql).

CREATE TABLE StringIds (id BIGINT, value VARCHAR);

CREATE TABLE ThreadNames (nameId BIGINT, priority BIGINT, globalTid BIGINT);

CREATE TABLE PROCESSES (globalPid BIGINT, pid BIGINT, name VARCHAR);

CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs BIGINT);

CREATE TABLE ANALYSIS_DETAILS (duration BIGINT);

-- 41-column layout (2.9.1 on); pre-2022 exports have a short form with deviceId.
CREATE TABLE TARGET_INFO_GPU (
    id BIGINT, deviceId BIGINT, name VARCHAR, busLocation VARCHAR, totalMemory BIGINT,
    memoryBandwidth BIGINT, clockRate BIGINT, smCount BIGINT, uuid VARCHAR, l2CacheSize BIGINT,
    computeMajor BIGINT, computeMinor BIGINT, cuDevice BIGINT
);

CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (
    start BIGINT, "end" BIGINT, deviceId BIGINT, contextId BIGINT, streamId BIGINT,
    correlationId BIGINT, globalPid BIGINT, demangledName BIGINT, shortName BIGINT, mangledName BIGINT,
    launchType BIGINT, registersPerThread BIGINT, gridX BIGINT, gridY BIGINT, gridZ BIGINT,
    blockX BIGINT, blockY BIGINT, blockZ BIGINT, staticSharedMemory BIGINT, dynamicSharedMemory BIGINT,
    localMemoryPerThread BIGINT, gridId BIGINT, graphNodeId BIGINT, graphId BIGINT
);

CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (
    start BIGINT, "end" BIGINT, eventClass BIGINT, globalTid BIGINT, correlationId BIGINT,
    nameId BIGINT, returnValue BIGINT, callchainId BIGINT
);

-- CUDA backtraces (--cudabacktrace, schemas/nsys/common/stacks.sql): the native call stack of a
-- CUDA call, one row per frame (stackDepth 0 = innermost), referenced by the callchainId of the
-- call's eventClass 67 row. symbol and module are StringIds ids.
CREATE TABLE CUDA_CALLCHAINS (
    id BIGINT, symbol BIGINT, module BIGINT, unresolved BIGINT, originalIP BIGINT, stackDepth BIGINT
);

CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (
    start BIGINT, "end" BIGINT, deviceId BIGINT, contextId BIGINT, streamId BIGINT,
    correlationId BIGINT, globalPid BIGINT, bytes BIGINT, copyKind BIGINT, srcKind BIGINT,
    dstKind BIGINT, srcDeviceId BIGINT, dstDeviceId BIGINT, graphNodeId BIGINT
);

CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (
    start BIGINT, "end" BIGINT, deviceId BIGINT, contextId BIGINT, streamId BIGINT,
    correlationId BIGINT, globalPid BIGINT, value BIGINT, bytes BIGINT, memKind BIGINT,
    graphNodeId BIGINT
);

-- CUDA memory allocations and frees (--cuda-memory-usage=true; schemas/nsys/common/memory.sql).
CREATE TABLE CUDA_GPU_MEMORY_USAGE_EVENTS (
    start BIGINT, globalPid BIGINT, deviceId BIGINT, contextId BIGINT, address BIGINT, pc BIGINT,
    bytes BIGINT, memKind BIGINT, memoryOperationType BIGINT, name VARCHAR, correlationId BIGINT
);

-- Stream-ordered memory pools created, destroyed or trimmed (--cuda-memory-usage=true with
-- cudaMallocAsync): counted in ingest_stats (schemas/nsys/common/stats.sql), not memory_event rows.
CREATE TABLE CUDA_GPU_MEMORY_POOL_EVENTS (
    start BIGINT, globalPid BIGINT, deviceId BIGINT, address BIGINT, operationType BIGINT, poolType BIGINT
);

-- CUDA graphs (schemas/nsys/common/graph.sql). GRAPH_TRACE: one row per whole-graph execution
-- under --cuda-graph-trace=graph (3.x). CUDA_GRAPH_EVENTS: graph creation, instantiation and
-- clone events with graph ids in 3.x; in 2.9.1 it had the node layout (graphNodeId,
-- originalGraphNodeId) that 3.x moved to CUDA_GRAPH_NODE_EVENTS. Both layouts are declared
-- here: the columns a file lacks read as NULL.
CREATE TABLE CUPTI_ACTIVITY_KIND_GRAPH_TRACE (
    start BIGINT, "end" BIGINT, deviceId BIGINT, contextId BIGINT, streamId BIGINT,
    correlationId BIGINT, globalPid BIGINT, graphId BIGINT, graphExecId BIGINT
);

CREATE TABLE CUDA_GRAPH_EVENTS (
    start BIGINT, "end" BIGINT, eventClass BIGINT, globalTid BIGINT, nameId BIGINT,
    graphId BIGINT, originalGraphId BIGINT, graphExecId BIGINT,
    graphNodeId BIGINT, originalGraphNodeId BIGINT
);

CREATE TABLE CUDA_GRAPH_NODE_EVENTS (
    start BIGINT, "end" BIGINT, eventClass BIGINT, globalTid BIGINT, nameId BIGINT,
    graphNodeId BIGINT, originalGraphNodeId BIGINT
);

CREATE TABLE NVTX_EVENTS (
    start BIGINT, "end" BIGINT, eventType BIGINT, rangeId BIGINT, category BIGINT,
    color BIGINT, text VARCHAR, globalTid BIGINT, endGlobalTid BIGINT, textId BIGINT,
    domainId BIGINT
);

-- What the CPU waited on (schemas/nsys/common/host.sql): CUDA synchronizations, OS runtime calls
-- (--trace osrt), the profiler's own overhead, and GPU metric samples (--gpu-metrics-devices).
-- SYNCHRONIZATION's syncType is not read: its numbering differs between exporter versions
-- (3.16 counts from 0, 3.17.2 moved the old values to deprecatedSyncType and writes 0), so the
-- kind is taken from the API call with the record's correlation id.
CREATE TABLE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (
    start BIGINT, "end" BIGINT, deviceId BIGINT, contextId BIGINT, streamId BIGINT,
    correlationId BIGINT, globalPid BIGINT, eventId BIGINT
);

CREATE TABLE OSRT_API (
    start BIGINT, "end" BIGINT, globalTid BIGINT, nameId BIGINT, returnValue BIGINT, nestingLevel BIGINT
);

CREATE TABLE PROFILER_OVERHEAD (start BIGINT, "end" BIGINT, globalTid BIGINT, nameId BIGINT);

CREATE TABLE GPU_METRICS (timestamp BIGINT, typeId BIGINT, metricId BIGINT, value DOUBLE);

CREATE TABLE TARGET_INFO_GPU_METRICS (typeId BIGINT, metricId BIGINT, metricName VARCHAR);
