-- src_mem_kind: memory kinds of pre-2022 exports (no schema version), which have no ENUM tables; the report
-- scripts of that time hard-coded a 5-value list in which 4 means Unknown, not Managed.
CREATE OR REPLACE TEMP VIEW src_mem_kind AS
SELECT * FROM (VALUES
    (0, 'Pageable'), (1, 'Pinned'), (2, 'Device'), (3, 'Array'), (4, 'Unknown')
) AS t(id, label);
