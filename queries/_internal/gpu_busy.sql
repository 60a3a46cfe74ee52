-- _internal/gpu_busy: every GPU of each trace (from the device view, idle ones too) with the time it ran at least one operation and that time's share of the trace span; the header of `traceql summary`.
-- param trace_id: only this trace (NULL: every trace in the workspace)
-- column trace_id: trace (trace.trace_id)
-- column device_id: GPU (device.device_id)
-- column device: GPU name (device.name)
-- column ops: GPU operations the GPU ran: kernels, copies, memsets and executions of CUDA graphs traced whole (graph_exec)
-- column busy_ns: union of those operations' intervals in ns (overlapping streams counted once; a graph execution from its start to its end); 0 for an idle GPU
-- column span_ns: the trace's time span in ns (trace.duration: first to last event of any kind)
-- column busy_pct: busy_ns as a percentage of span_ns (the trace span)
-- column compute_ns: time at least one compute kernel or whole-graph execution ran, in ns (device_busy; `report --by breakdown`)
-- column comm_ns: time communication kernels ran while no compute kernel did (exposed communication), in ns
-- column memory_ns: time only copies or memsets ran, no kernel, in ns
-- column idle_ns: span_ns - busy_ns: time the GPU ran nothing, in ns
--
-- Busy time is stored at ingest (device_busy, schemas/derive/device_busy.sql): the sweep over
-- every GPU operation it takes is most of the cost of `traceql summary`.
-- One FULL JOIN of the GPUs and their busy time: a GPU the device view lacks still counts (its
-- name NULL), an idle GPU has 0. (It replaced a UNION of the two with a NOT EXISTS: the same rows,
-- and DuckDB plans this in half the time, about 3 ms of every summary.)
SELECT
    coalesce(g.trace_id, b.trace_id) AS trace_id, coalesce(g.device_id, b.device_id) AS device_id,
    g.name AS device,
    coalesce(b.ops, 0) AS ops,
    coalesce(b.busy_ns, 0) AS busy_ns,
    t.duration AS span_ns,
    100.0 * coalesce(b.busy_ns, 0) / nullif(t.duration, 0) AS busy_pct,
    coalesce(b.compute_ns, 0) AS compute_ns, coalesce(b.comm_exposed_ns, 0) AS comm_ns,
    coalesce(b.memory_exposed_ns, 0) AS memory_ns, t.duration - coalesce(b.busy_ns, 0) AS idle_ns
FROM (SELECT trace_id, device_id, name FROM device WHERE ($trace_id IS NULL OR trace_id = $trace_id)) g
FULL JOIN (SELECT trace_id, device_id, ops, busy_ns, compute_ns, comm_exposed_ns, memory_exposed_ns
           FROM device_busy WHERE ($trace_id IS NULL OR trace_id = $trace_id)) b
  ON b.trace_id = g.trace_id AND b.device_id IS NOT DISTINCT FROM g.device_id
JOIN trace t ON t.trace_id = coalesce(g.trace_id, b.trace_id)
ORDER BY 1, 2 NULLS LAST;
