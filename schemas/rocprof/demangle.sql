-- The kernel names whose short names traceql.adapters derives: rocprof v1 writes kernel names
-- demangled already (OPS.Name), so they are used as stored and only short_name is new. The id is
-- the name's rank among the distinct names (kernel.sql joins on the name itself).
SELECT row_number() OVER (ORDER BY Name) AS id, Name FROM (SELECT DISTINCT Name FROM raw.OPS WHERE Name IS NOT NULL)
