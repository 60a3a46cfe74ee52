-- src_thread: the OS threads that made API calls (rpd records no thread or process names).
CREATE OR REPLACE TEMP VIEW src_thread AS
SELECT DISTINCT pid, tid, CAST(NULL AS VARCHAR) AS thread_name, CAST(NULL AS VARCHAR) AS process_name
FROM raw.rocpd_api
WHERE pid IS NOT NULL AND tid IS NOT NULL;
