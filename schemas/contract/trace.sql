-- trace: one row per ingested profiler file; every other contract row points here through trace_id.
CREATE TABLE trace (
    trace_id          INTEGER NOT NULL, -- id of the trace in this workspace, stable when the same file is re-ingested
    path              VARCHAR NOT NULL, -- absolute path of the source file at ingest time
    file_size         BIGINT,           -- size of the source file in bytes
    file_sha256       VARCHAR,          -- SHA-256 of the source file's bytes at ingest (hex): traceql upgrade reads the file again only when it still matches
    source_format     VARCHAR NOT NULL, -- 'nsys' (Nsight Systems SQLite export), 'nvprof' (nvprof SQLite database), 'kineto' (PyTorch profiler Chrome-trace JSON), 'rocpd' (AMD rocprofv3 SQLite database), 'rocprofv3_json' (AMD rocprofv3 JSON output), 'rocprof' (AMD rocprof v1 results.db) or 'rpd' (rocmProfileData rpd_tracer file)
    exporter_version  VARCHAR,          -- version of the tool that wrote the file (EXPORT_PRODUCT_VERSION); NULL when the file does not say
    schema_version    VARCHAR,          -- export schema version stored in the file (EXPORT_SCHEMA_VERSION, nvprof Version); NULL when absent
    layout            VARCHAR NOT NULL, -- schemas/ adapter folder that read the file, e.g. 'nsys/v3'
    host              VARCHAR,          -- the profiled machine (nsys: TARGET_INFO_SYSTEM_ENV Hostname, not the machine that ran nsys export), NULL when unknown; rule in traceql/sources/ranks.py
    host_source       ENUM('recorded', 'file name', 'user', 'exporter'), -- where host came from: 'recorded' in the trace, 'file name' (nsys -o %h_%p), 'user' (ingest --host), 'exporter' (EXPORT_HOST, the exporting machine, when nothing names the profiled one)
    rank              INTEGER,          -- rank of this file in a multi-rank job (RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID ... of the profiled process; Kineto's distributedInfo.rank; 'rank3' in the file name; ingest --rank), NULL when unknown
    rank_source       ENUM('recorded', 'file name', 'user', 'exporter'), -- where rank came from: 'recorded' in the trace, 'file name', or 'user' (ingest --rank)
    local_rank        INTEGER,          -- rank within its host (LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID ...; 'local_rank3' in the file name), NULL when unknown
    local_rank_source ENUM('recorded', 'file name', 'user', 'exporter'), -- where local_rank came from: 'recorded' or 'file name'
    world_size        INTEGER,          -- number of ranks of the job (WORLD_SIZE, OMPI_COMM_WORLD_SIZE, PMI_SIZE, SLURM_NTASKS ...; Kineto's distributedInfo.world_size), NULL when the trace does not record it
    world_size_source ENUM('recorded', 'file name', 'user', 'exporter'), -- where world_size came from: 'recorded'
    clock             VARCHAR NOT NULL, -- 'session' when ts counts ns from the session start, 'epoch' when ts is absolute Unix-epoch ns
    start_utc_ns      BIGINT,           -- UTC Unix-epoch ns of the session start (ts = 0 on the session clock); NULL when unknown
    utc_offset_ns     BIGINT,           -- add to any ts of this trace to get UTC Unix-epoch ns (aligns ranks); NULL when unknown
    start_ts          BIGINT,           -- earliest ts of any event in the trace (ns, trace clock)
    end_ts            BIGINT,           -- latest end (ts + dur) of any event in the trace (ns, trace clock)
    duration          BIGINT,           -- end_ts - start_ts in ns: the time span the trace covers
    ingested_at       TIMESTAMP,        -- when traceql ingested the file (UTC)
    traceql_version   VARCHAR,          -- version of traceql that ingested the file
    driver_version    VARCHAR,          -- NVIDIA driver of the profiled machine, e.g. '560.94' (nsys: TARGET_INFO_SYSTEM_ENV NvDriverVersion, whose older digits-only form '4952905' reads '495.29.05'; Kineto: nvidia_driver_version of torch_env_info in metadata.system, where a harness records it); NULL when the trace does not say (nvprof, nsys before 2021, most Kineto traces)
    cuda_driver_version VARCHAR,        -- CUDA version the driver provides, 'major.minor' (nsys: TARGET_INFO_SYSTEM_ENV CudaDriverVersion 12060 -> '12.6'; Kineto: cuda_driver_version); NULL when the trace does not say (nvprof, older nsys and Kineto)
    cuda_runtime_version VARCHAR,       -- CUDA runtime the profiled program ran with, 'major.minor' (Kineto: cuda_runtime_version 12040 -> '12.4'); NULL where the trace does not record it (nsys and nvprof never do)
    torch_version     VARCHAR,          -- PyTorch version of the profiled program, e.g. '2.6.0+cu124' (Kineto: torch_version of torch_env_info in metadata.system, where a harness records it); NULL otherwise (the profiler itself does not write it, nor does nsys or nvprof)
    gpu_api           VARCHAR           -- GPU programming interface the program called, 'CUDA' or 'HIP' (AMD's profilers; PyTorch profiler traces of ROCm builds, whose runtime calls are hip*): copies are named '[HIP memcpy <kind>]' in gpu_op on HIP traces, and summary's API section says 'HIP API calls'
);
