-- src_mem_kind: memory kinds of nvprof Version 12-16 databases: raw CUPTI ids (CUpti_ActivityMemoryKind
-- of the CUDA 10-11 CUPTI that wrote them; not the nsys numbering), mapped to the nsys labels.
CREATE OR REPLACE TEMP VIEW src_mem_kind AS
SELECT * FROM (VALUES
    (0, 'Unknown'), (1, 'Pageable'), (2, 'Pinned'), (3, 'Device'), (4, 'Array'), (5, 'Managed'),
    (6, 'Device Static'), (7, 'Managed Static')
) AS t(id, label);
