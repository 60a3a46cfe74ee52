-- _internal/traces: the ingested traces with their source and time span; the top of `traceql summary`.
-- param trace_id: only this trace (NULL: every trace in the workspace)
-- column trace_id: trace (trace.trace_id)
-- column path: source file at ingest time
-- column source_format: 'nsys', 'nvprof', 'kineto', 'rocpd', 'rocprofv3_json', 'rocprof' or 'rpd' (trace.source_format)
-- column exporter_version: version of the tool that wrote the file, NULL when not recorded
-- column schema_version: export schema version, NULL when absent
-- column host: host name, when recorded
-- column rank: rank in a multi-rank job, when known
-- column start_ts: earliest ts of any event (ns, trace clock)
-- column end_ts: latest end of any event (ns, trace clock)
-- column span_ns: end_ts - start_ts in ns (trace.duration)
-- column gpu_api: 'CUDA' or 'HIP', the GPU interface the program called (trace.gpu_api)
SELECT trace_id, path, source_format, exporter_version, schema_version, host, rank, start_ts, end_ts,
       duration AS span_ns, gpu_api
FROM trace
WHERE ($trace_id IS NULL OR trace_id = $trace_id)
ORDER BY trace_id;
