-- src_thread: the threads rocpd_info_thread records (OS pid and tid), with the thread's name and
-- the process's command line (rocpd_info_process.command).
CREATE OR REPLACE TEMP VIEW src_thread AS
SELECT
    p.pid,
    t.tid,
    t.name                 AS thread_name,
    p.command              AS process_name
FROM raw.rocpd_info_thread t
JOIN raw.rocpd_info_process p ON p.id = t.pid
WHERE p.pid IS NOT NULL AND t.tid IS NOT NULL;
