-- src_copy_kind: Nsight Systems copyKind ids (ENUM_CUDA_MEMCPY_OPER) and their readable labels.
CREATE OR REPLACE TEMP VIEW src_copy_kind AS
SELECT * FROM (VALUES
    (0, 'Unknown'), (1, 'Host-to-Device'), (2, 'Device-to-Host'), (3, 'Host-to-Array'),
    (4, 'Array-to-Host'), (5, 'Array-to-Array'), (6, 'Array-to-Device'), (7, 'Device-to-Array'),
    (8, 'Device-to-Device'), (9, 'Host-to-Host'), (10, 'Peer-to-Peer'),
    (11, 'Unified Host-to-Device'), (12, 'Unified Device-to-Host'), (13, 'Unified Device-to-Device')
) AS t(id, label);

-- src_launch_type: Nsight Systems launchType ids (ENUM_CUDA_KERNEL_LAUNCH_TYPE; not the CUPTI numbering).
CREATE OR REPLACE TEMP VIEW src_launch_type AS
SELECT * FROM (VALUES
    (0, NULL), (1, 'Regular'), (2, 'Cooperative single device'), (3, 'Cooperative multi device')
) AS t(id, label);
