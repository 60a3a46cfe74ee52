-- _internal/timeline_names: the names of a trace's processes, threads and GPUs, for the track names of `traceql export --format perfetto`.
-- param trace_id: the trace
-- column kind: 'thread' (a CPU thread) or 'device' (a GPU)
-- column pid: process of a thread; NULL for a GPU
-- column tid: the thread; NULL for a GPU
-- column device_id: the GPU; NULL for a thread
-- column name: thread name, or GPU name; NULL when unknown
-- column process_name: process name of a thread; NULL when unknown
SELECT 'thread' AS kind, pid, tid, CAST(NULL AS INTEGER) AS device_id, thread_name AS name, process_name
FROM thread
WHERE trace_id = $trace_id
UNION ALL
SELECT 'device', NULL, NULL, device_id, name, NULL
FROM device
WHERE trace_id = $trace_id
ORDER BY kind DESC, pid, tid, device_id;
