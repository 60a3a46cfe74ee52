-- The kernel names traceql.adapters passes through traceql.demangle before the Kineto adapters run,
-- as (id, symbol) rows: the distinct kernel names. Kineto writes them demangled already, so this
-- gives their short names (src_demangled.short_name: 'gemm' for 'void gemm<float>(float const*, ...)').
SELECT row_number() OVER (ORDER BY name) AS id, name AS symbol
FROM (SELECT DISTINCT e.name FROM raw.kineto_event e JOIN src_categories c ON c.category = e.cat
      WHERE c.kind = 'kernel' AND e.name IS NOT NULL);
