-- trace.gpu_api of the trace being ingested (getvariable('trace_id')): 'HIP' for the AMD profilers'
-- formats (rocpd, rocprofv3_json, rocprof, rpd), and for any other trace whose API calls are HIP's
-- (hip*: a PyTorch profiler trace of a ROCm build) or whose GPUs are AMD's; 'CUDA' otherwise.
UPDATE trace SET gpu_api = CASE
    WHEN source_format IN ('rocpd', 'rocprofv3_json', 'rocprof', 'rpd') THEN 'HIP'
    WHEN EXISTS (SELECT 1 FROM api_call a WHERE a.trace_id = getvariable('trace_id') AND a.name LIKE 'hip%') THEN 'HIP'
    WHEN EXISTS (SELECT 1 FROM device d WHERE d.trace_id = getvariable('trace_id') AND d.name LIKE 'AMD %') THEN 'HIP'
    ELSE 'CUDA' END
WHERE trace_id = getvariable('trace_id');
