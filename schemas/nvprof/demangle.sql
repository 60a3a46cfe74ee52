-- The symbols traceql.adapters demangles before the nvprof adapters run, as (id, symbol) rows: the
-- distinct kernel names (StringTable ids of CONCURRENT_KERNEL and KERNEL rows; nvprof stores them
-- mangled). The result is the temporary table src_demangled(id, symbol, name, short_name).
SELECT s._id_ AS id, s.value AS symbol
FROM raw.StringTable s
WHERE s._id_ <> 0
  AND s._id_ IN (SELECT name FROM raw.CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
                 UNION SELECT name FROM raw.CUPTI_ACTIVITY_KIND_KERNEL);
