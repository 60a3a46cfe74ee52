-- dur_stats: the time statistics of a group of rows with a `dur` column, as nsys stats gives them
-- (the report queries kernel, api, gpu, memcpy and memset): calls, total_ns, avg_ns (rounded to
-- 0.1 ns), med_ns, min_ns, max_ns, stddev_ns (sample, n - 1, as nsys stats; 0 for one row).
count(*) AS calls,
sum(dur) AS total_ns,
round(avg(dur), 1) AS avg_ns,
median(dur) AS med_ns,
min(dur) AS min_ns,
max(dur) AS max_ns,
round(coalesce(stddev_samp(dur), 0), 1) AS stddev_ns
