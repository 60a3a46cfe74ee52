-- _internal/timeline: the events of one trace that overlap a time window as Chrome trace events, one row per event with the track it is drawn on, in drawing order; what `traceql export --format perfetto` writes (traceql/timeline.py adds the pid and tid of the track).
-- param trace_id: the trace
-- param start: window start in ns on the trace clock (NULL: from the beginning of the trace)
-- param end: window end in ns on the trace clock, exclusive (NULL: to the end of the trace)
-- param origin: ns subtracted from every time written (0 for session-clock traces)
-- param id_base: added to the id of every async range in the JSON (0; a timeline of several traces keeps each trace's ids apart with it)
-- param from_ts: only events that start at or after this ns (NULL: no bound); a slice of the rows, to write them in parts
-- param to_ts: only events that start before this ns (NULL: no bound)
-- column section: 0 for events of CPU threads, 1 for GPU work; CPU rows come first
-- column kind: 'range' (push/pop NVTX range), 'async' (start/end NVTX range), 'mark' (NVTX mark), 'api' (CUDA API call), 'kernel', 'memcpy' or 'memset'
-- column id: range_id, mark_id, api_id or op_id of the event
-- column pid: process of the event (for GPU work, the process that issued it)
-- column tid: thread of a CPU event; NULL for GPU work
-- column device_id: GPU that ran GPU work; NULL for CPU events
-- column context_id: CUDA context of GPU work
-- column stream_id: CUDA stream of GPU work
-- column ts: start in ns (trace clock)
-- column end_ts: end in ns: ts + dur; the end of the trace for an unclosed range; ts for a negative duration
-- column head: the event's JSON up to its pid: phase, category, name (and id of an async range)
-- column tail: the event's JSON after its tid: ts and dur in microseconds, and args (ids, sizes, kinds)
-- column end_tail: for an async range, the JSON after the tid of its end event ("e"); else NULL
-- column api_id: for GPU work whose launching call is in the window too, that call (api_call.api_id): a flow arrow; else NULL
-- column api_pid: process of that call
-- column api_tid: thread of that call
-- column flow_start_tail: the JSON after the tid of the flow's start event ("s"), inside the call
-- column flow_end_tail: the JSON after the tid of the flow's end event ("f"), inside the GPU work
--
-- Window rule: an event is in the window [start, end) when it starts before `end` and
-- ends after `start`; an event without length (a mark, a zero or negative duration) when
-- start <= ts < end. Events are kept whole, never clipped to the window. Rows are ordered
-- by track (thread, or GPU, context and stream), then start, longer events first, so that
-- enclosing events come before the events they hold.
--
-- Times are microseconds with the ns as three decimals and a fourth decimal 4 (0.4 ns):
-- Perfetto multiplies by 1000 and truncates, which without it can lose a ns.
WITH span AS (
    SELECT end_ts AS trace_end FROM trace WHERE trace_id = $trace_id
),
events AS (
    SELECT 0 AS section, CASE WHEN r.style = 'push/pop' THEN 'range' ELSE 'async' END AS kind,
           r.range_id AS id, r.pid, r.tid, CAST(NULL AS INTEGER) AS device_id,
           CAST(NULL AS BIGINT) AS context_id, CAST(NULL AS BIGINT) AS stream_id, r.ts, r.dur,
           CASE WHEN r.dur IS NULL THEN greatest(r.ts, s.trace_end) ELSE r.ts + greatest(r.dur, 0) END AS end_ts,
           r.name,
           CASE WHEN r.style = 'push/pop' THEN json_object('range_id', r.range_id, 'domain', r.domain, 'depth', r.depth)
                ELSE json_object('range_id', r.range_id, 'domain', r.domain, 'end_tid', coalesce(r.end_tid, r.tid))
           END AS args
    FROM nvtx_range r, span s
    WHERE r.trace_id = $trace_id
    UNION ALL
    SELECT 0, 'mark', m.mark_id, m.pid, m.tid, NULL, NULL, NULL, m.ts, 0, m.ts, m.name,
           json_object('mark_id', m.mark_id, 'domain', m.domain)
    FROM nvtx_mark m
    WHERE m.trace_id = $trace_id
    UNION ALL
    SELECT 0, 'api', a.api_id, a.pid, a.tid, NULL, NULL, NULL, a.ts, a.dur, a.ts + greatest(a.dur, 0), a.name,
           json_object('api_id', a.api_id, 'correlation_id', a.correlation_id, 'api_kind', a.api_kind,
                       'return_value', a.return_value)
    FROM api_call a
    WHERE a.trace_id = $trace_id
    UNION ALL
    SELECT 1, 'kernel', k.kernel_id, k.pid, NULL, k.device_id, k.context_id, k.stream_id, k.ts, k.dur,
           k.ts + greatest(k.dur, 0), k.name,
           json_object('op_id', k.kernel_id, 'correlation_id', k.correlation_id, 'short_name', k.short_name,
                       'grid', concat_ws(',', k.grid_x, k.grid_y, k.grid_z),
                       'block', concat_ws(',', k.block_x, k.block_y, k.block_z),
                       'registers_per_thread', k.registers_per_thread,
                       'static_shared_memory', k.static_shared_memory,
                       'dynamic_shared_memory', k.dynamic_shared_memory)
    FROM kernel k
    WHERE k.trace_id = $trace_id
    UNION ALL
    SELECT 1, 'memcpy', c.memcpy_id, c.pid, NULL, c.device_id, c.context_id, c.stream_id, c.ts, c.dur,
           c.ts + greatest(c.dur, 0), '[' || (SELECT coalesce(max(gpu_api), 'CUDA') FROM trace WHERE trace_id = $trace_id) || ' memcpy ' || coalesce(c.copy_kind, 'Unknown') || ']',
           json_object('op_id', c.memcpy_id, 'correlation_id', c.correlation_id, 'bytes', c.bytes,
                       'copy_kind', c.copy_kind, 'src_kind', c.src_kind, 'dst_kind', c.dst_kind)
    FROM memcpy c
    WHERE c.trace_id = $trace_id
    UNION ALL
    SELECT 1, 'memset', m.memset_id, m.pid, NULL, m.device_id, m.context_id, m.stream_id, m.ts, m.dur,
           m.ts + greatest(m.dur, 0), '[' || (SELECT coalesce(max(gpu_api), 'CUDA') FROM trace WHERE trace_id = $trace_id) || ' memset]',
           json_object('op_id', m.memset_id, 'correlation_id', m.correlation_id, 'bytes', m.bytes,
                       'value', m.value, 'mem_kind', m.mem_kind)
    FROM memset m
    WHERE m.trace_id = $trace_id
),
in_window AS (
    SELECT *
    FROM events
    WHERE ($end IS NULL OR ts < $end)
      AND ($start IS NULL OR end_ts > $start OR ts >= $start)
      AND ($from_ts IS NULL OR ts >= $from_ts)
      AND ($to_ts IS NULL OR ts < $to_ts)
),
launched AS (  -- launching calls that are in the window themselves
    SELECT l.op_id, l.api_id, l.pid, l.tid, l.api_ts, l.api_ts + greatest(l.api_dur, 0) AS api_end_ts
    FROM launch l
    WHERE l.trace_id = $trace_id AND l.api_id IS NOT NULL
      AND ($end IS NULL OR l.api_ts < $end)
      AND ($start IS NULL OR l.api_ts + greatest(l.api_dur, 0) > $start OR l.api_ts >= $start)
),
timed AS (
    -- times in ns from the origin; a flow's ends lie 1 ns inside their slices when those are
    -- that long, so that each binds to its enclosing slice whatever order a viewer gives
    -- events that start at the same time
    SELECT e.*, l.api_id, l.pid AS api_pid, l.tid AS api_tid,
           e.ts - $origin AS rel_ts, e.end_ts - $origin AS rel_end,
           l.api_ts + CASE WHEN l.api_end_ts - l.api_ts >= 2 THEN 1 ELSE 0 END - $origin AS rel_flow_start,
           e.ts + CASE WHEN e.end_ts - e.ts >= 2 THEN 1 ELSE 0 END - $origin AS rel_flow_end
    FROM in_window e
    LEFT JOIN launched l ON l.op_id = CASE WHEN e.section = 1 THEN e.id END  -- an equi-join: a hash join
)
SELECT section, kind, id, pid, tid, device_id, context_id, stream_id, ts, end_ts,
       '{"ph":"' || CASE kind WHEN 'async' THEN 'b' WHEN 'mark' THEN 'i","s":"t' ELSE 'X' END
           || '","cat":"' || CASE kind WHEN 'range' THEN 'nvtx' WHEN 'async' THEN 'nvtx' WHEN 'mark' THEN 'nvtx_mark'
                                       WHEN 'api' THEN 'cuda_api' ELSE kind END
           || '","name":' || CAST(to_json(coalesce(name, '[unnamed]')) AS VARCHAR)
           || CASE kind WHEN 'async' THEN ',"id":' || (id + $id_base) ELSE '' END || ',' AS head,
       '"ts":' || printf('%s%d.%03d4', CASE WHEN rel_ts < 0 THEN '-' ELSE '' END, abs(rel_ts) // 1000, abs(rel_ts) % 1000)
           || CASE WHEN kind IN ('async', 'mark') THEN ''
                   ELSE ',"dur":' || printf('%d.%03d4', (end_ts - ts) // 1000, (end_ts - ts) % 1000) END
           || ',"args":' || CAST(CASE WHEN dur < 0 THEN json_merge_patch(args, json_object('recorded_dur_ns', dur))
                                      WHEN dur IS NULL THEN json_merge_patch(args, json_object('unclosed', true))
                                      ELSE args END AS VARCHAR) || '}' AS tail,
       CASE WHEN kind = 'async' THEN '"ts":' || printf('%s%d.%03d4', CASE WHEN rel_end < 0 THEN '-' ELSE '' END, abs(rel_end) // 1000, abs(rel_end) % 1000) || '}' END AS end_tail,
       api_id, api_pid, api_tid,
       '"ts":' || printf('%s%d.%03d4', CASE WHEN rel_flow_start < 0 THEN '-' ELSE '' END, abs(rel_flow_start) // 1000, abs(rel_flow_start) % 1000) || '}' AS flow_start_tail,
       '"ts":' || printf('%s%d.%03d4', CASE WHEN rel_flow_end < 0 THEN '-' ELSE '' END, abs(rel_flow_end) // 1000, abs(rel_flow_end) % 1000) || '}' AS flow_end_tail
FROM timed
ORDER BY section, device_id, context_id, stream_id, pid, tid, ts, end_ts DESC,
         CASE kind WHEN 'api' THEN 1 WHEN 'mark' THEN 2 ELSE 0 END, id;
