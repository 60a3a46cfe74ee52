-- The kernel names whose short names traceql.adapters derives: rpd stores kernel names demangled
-- (rocpd_op.description, a rocpd_string id), so they are used as stored and only short_name is new.
SELECT id, string FROM raw.rocpd_string WHERE id IN (SELECT description_id FROM raw.rocpd_op)
