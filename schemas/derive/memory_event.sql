-- derived_memory_event: the memory allocations and frees of the trace being ingested
-- (getvariable('trace_id')), from the temporary table memory_stage (the adapter's src_memory_event,
-- kept past the freeing of the source tables). Linear: window functions over (device, kind,
-- address) and (device, kind). Their ranges (range_id) are NULL here: the family 'nesting' places
-- them when it nests the ranges (schemas/derive/memory_range.sql), and a query that reads
-- memory_event builds it first (schemas/derive/graph.csv: nvtx_range writes memory_event).
--
-- Pairing: on one device, memory kind and address an allocator alternates allocation and free, so
-- a free's allocation is the event just before it at that address when that is an allocation, and
-- an allocation's free the event just after it when that is a free. A free with no allocation
-- before it frees a block allocated before the capture began.
-- Levels: where the source records the allocator's total (PyTorch since 2022) it is the level;
-- else the running sum of bytes per device and kind, in id order, without the frees known to
-- free a block allocated before the capture (address recorded, no allocation found). Without
-- addresses (PyTorch 2021) such frees cannot be told apart: when the sum goes below zero, every
-- level of the device and kind is raised by the deepest deficit, the bytes those frees show were
-- held before the capture; a level is never negative.
CREATE OR REPLACE TABLE raw.mem_ev AS
SELECT row_number() OVER (ORDER BY ts, src_row) - 1 AS memory_event_id, * EXCLUDE (src_row)
FROM temp.main.memory_stage;

CREATE OR REPLACE TABLE raw.mem_pair AS
SELECT memory_event_id,
       CASE WHEN bytes < 0 AND lag(bytes) OVER w > 0 THEN lag(memory_event_id) OVER w END AS alloc_event_id,
       CASE WHEN bytes > 0 AND lead(bytes) OVER w < 0 THEN lead(memory_event_id) OVER w END AS free_event_id
FROM raw.mem_ev
WHERE address IS NOT NULL
WINDOW w AS (PARTITION BY device_id, mem_kind, address ORDER BY memory_event_id);

CREATE OR REPLACE TEMP VIEW derived_memory_event AS
WITH e AS (
    SELECT e.*, p.alloc_event_id, p.free_event_id,
           CASE WHEN e.bytes < 0 AND e.address IS NOT NULL AND p.alloc_event_id IS NULL THEN 0
                ELSE e.bytes END AS counted
    FROM raw.mem_ev e
    LEFT JOIN raw.mem_pair p USING (memory_event_id)
),
run AS (
    SELECT *, sum(counted) OVER (PARTITION BY device_id, mem_kind ORDER BY memory_event_id
                                 ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS running
    FROM e
)
SELECT getvariable('trace_id')::INTEGER AS trace_id, run.memory_event_id, run.device_id, run.mem_kind,
       run.pid, run.tid, run.ts, run.bytes, run.address, run.correlation_id,
       coalesce(run.total_allocated,
                CAST(run.running + greatest(0, -min(run.running) OVER (PARTITION BY run.device_id, run.mem_kind))
                     AS BIGINT)) AS allocated,
       run.total_reserved AS reserved,
       CASE WHEN run.total_allocated IS NOT NULL THEN 'recorded' ELSE 'running_sum' END AS level_source,
       run.alloc_event_id, run.free_event_id, CAST(NULL AS BIGINT) AS range_id, run.stack_id
FROM run;
