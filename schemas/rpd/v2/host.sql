-- src_sync_event: synchronizations, one per synchronizing HIP call (hipDeviceSynchronize,
-- hipStreamSynchronize, hipEventSynchronize, hipEventQuery, hipStreamWaitEvent): the file records
-- no synchronization activity of its own. The other host views (OS runtime calls, profiler
-- overhead, GPU metrics) stay the empty defaults of schemas/default/host.sql.
CREATE OR REPLACE TEMP VIEW src_sync_event AS
/* include: hip_sync_event */;
