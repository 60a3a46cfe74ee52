-- device_peak: one row per GPU with its peak throughput for rooflines, from a built-in table of GPUs by name, else from its SM count, clock and compute capability.
CREATE TABLE device_peak (
    trace_id          INTEGER NOT NULL, -- trace this row belongs to (trace.trace_id)
    device_id         INTEGER NOT NULL, -- the GPU (device.device_id)
    source            VARCHAR,          -- where the peaks come from: 'table: <GPU>' (schemas/torch/gpu_peaks.csv, datasheet dense figures), 'sm_count x clock x sm<CC>' (schemas/torch/sm_throughput.csv), NULL when unknown
    fp64_flops        DOUBLE,           -- peak FP64 FLOP/s without tensor cores
    fp32_flops        DOUBLE,           -- peak FP32 FLOP/s on CUDA cores
    fp16_flops        DOUBLE,           -- peak FP16 FLOP/s on CUDA cores
    tf32_tc_flops     DOUBLE,           -- peak TF32 tensor-core FLOP/s (dense)
    fp16_tc_flops     DOUBLE,           -- peak FP16 tensor-core FLOP/s (dense, FP32 accumulate where the datasheet tells)
    bf16_tc_flops     DOUBLE,           -- peak BF16 tensor-core FLOP/s (dense)
    fp8_tc_flops      DOUBLE,           -- peak FP8 tensor-core FLOP/s (dense)
    int8_tc_ops       DOUBLE,           -- peak INT8 tensor-core OP/s (dense)
    memory_bandwidth  DOUBLE            -- peak DRAM bandwidth in bytes/s: the device's own figure (device.memory_bandwidth) when the export has it, else the table's
);
