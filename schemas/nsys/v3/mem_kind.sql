-- src_mem_kind: memory kinds of schema 3.x exports (ENUM_CUDA_MEM_KIND, 8 values; not the CUPTI numbering).
CREATE OR REPLACE TEMP VIEW src_mem_kind AS
SELECT * FROM (VALUES
    (0, 'Pageable'), (1, 'Pinned'), (2, 'Device'), (3, 'Array'), (4, 'Managed'),
    (5, 'Device Static'), (6, 'Managed Static'), (7, 'Unknown')
) AS t(id, label);
