-- derived_device_peak: peak throughput of every GPU of the trace being ingested
-- (getvariable('trace_id')), for rooflines. A GPU whose export gives its SM count, SM clock and
-- compute capability gets count x clock x the FLOP per clock per SM of its architecture
-- (temporary table torch_sm_throughput, schemas/torch/sm_throughput.csv); otherwise the first
-- row of torch_gpu_peaks (schemas/torch/gpu_peaks.csv, datasheet dense figures in TFLOP/s and
-- GB/s) whose pattern matches its name, ignoring case; a figure the first source lacks comes from
-- the other. Bandwidth: the export's own figure (device.memory_bandwidth), else the table's.
CREATE OR REPLACE TEMP VIEW derived_device_peak AS
WITH d AS (SELECT * FROM device WHERE trace_id = getvariable('trace_id')),
named AS (
    SELECT d.device_id, arg_min(p.row_id, p.prio) AS row_id
    FROM d JOIN (SELECT row_number() OVER () AS prio, row_number() OVER () AS row_id, pattern FROM torch_gpu_peaks) p
      ON d.name IS NOT NULL AND regexp_matches(d.name, p.pattern, 'i')
    GROUP BY d.device_id
),
tbl AS (
    SELECT row_number() OVER () AS row_id, gpu,
           TRY_CAST(fp64 AS DOUBLE) * 1e12 AS fp64, TRY_CAST(fp32 AS DOUBLE) * 1e12 AS fp32,
           TRY_CAST(fp16 AS DOUBLE) * 1e12 AS fp16, TRY_CAST(tf32_tc AS DOUBLE) * 1e12 AS tf32_tc,
           TRY_CAST(fp16_tc AS DOUBLE) * 1e12 AS fp16_tc, TRY_CAST(bf16_tc AS DOUBLE) * 1e12 AS bf16_tc,
           TRY_CAST(fp8_tc AS DOUBLE) * 1e12 AS fp8_tc, TRY_CAST(int8_tc AS DOUBLE) * 1e12 AS int8_tc,
           TRY_CAST(bandwidth_gbps AS DOUBLE) * 1e9 AS bandwidth
    FROM torch_gpu_peaks
),
per_clock AS (
    SELECT d.device_id, CAST(d.sm_count AS DOUBLE) * d.clock_rate AS sm_hz, s.cc_major, s.cc_minor,
           TRY_CAST(s.fp64 AS DOUBLE) AS fp64, TRY_CAST(s.fp32 AS DOUBLE) AS fp32, TRY_CAST(s.fp16 AS DOUBLE) AS fp16,
           TRY_CAST(s.tf32_tc AS DOUBLE) AS tf32_tc, TRY_CAST(s.fp16_tc AS DOUBLE) AS fp16_tc,
           TRY_CAST(s.bf16_tc AS DOUBLE) AS bf16_tc, TRY_CAST(s.fp8_tc AS DOUBLE) AS fp8_tc,
           TRY_CAST(s.int8_tc AS DOUBLE) AS int8_tc
    FROM d JOIN torch_sm_throughput s ON s.cc_major = d.compute_major AND s.cc_minor = d.compute_minor
    WHERE d.sm_count > 0 AND d.clock_rate > 0
)
SELECT d.trace_id, d.device_id,
       CASE WHEN c.device_id IS NOT NULL THEN 'sm_count x clock x sm' || c.cc_major || c.cc_minor
            WHEN t.row_id IS NOT NULL THEN 'table: ' || t.gpu END AS source,
       coalesce(c.sm_hz * c.fp64, t.fp64) AS fp64_flops,
       coalesce(c.sm_hz * c.fp32, t.fp32) AS fp32_flops,
       coalesce(c.sm_hz * c.fp16, t.fp16) AS fp16_flops,
       coalesce(c.sm_hz * c.tf32_tc, t.tf32_tc) AS tf32_tc_flops,
       coalesce(c.sm_hz * c.fp16_tc, t.fp16_tc) AS fp16_tc_flops,
       coalesce(c.sm_hz * c.bf16_tc, t.bf16_tc) AS bf16_tc_flops,
       coalesce(c.sm_hz * c.fp8_tc, t.fp8_tc) AS fp8_tc_flops,
       coalesce(c.sm_hz * c.int8_tc, t.int8_tc) AS int8_tc_ops,
       coalesce(CAST(d.memory_bandwidth AS DOUBLE), t.bandwidth) AS memory_bandwidth
FROM d
LEFT JOIN per_clock c ON c.device_id = d.device_id
LEFT JOIN named n ON n.device_id = d.device_id
LEFT JOIN tbl t ON t.row_id = n.row_id;
