-- The staged form of a PyTorch profiler (Kineto) JSON trace (traceql/kineto.py reads the file
-- into these; the adapters of schemas/kineto/common/ read nothing else).

-- One row per element of traceEvents, in file order. Values as the JSON has them: pid, tid and
-- id are integers in current writers and strings in some (2021: "tid": "1890023232", "stream 7"),
-- so each comes as the integer (a string of digits read as one) and, when it was a string, that
-- string. ts and dur are the exact decimal text of the number (microseconds), args the JSON text
-- of the arguments object ('' when absent; also '' for the categories whose args no adapter
-- reads, see traceql.kineto.ARGS_KEPT; the allocator events named [memory] keep theirs).
CREATE TABLE kineto_event (
    src_row BIGINT, ph VARCHAR, cat VARCHAR, name VARCHAR,
    pid BIGINT, pid_text VARCHAR, tid BIGINT, tid_text VARCHAR,
    ts VARCHAR, dur VARCHAR, id BIGINT, id_text VARCHAR, args VARCHAR
);

-- The top-level members other than traceEvents (schemaVersion, deviceProperties,
-- distributedInfo, baseTimeNanoseconds, traceName, ...), each value as JSON text.
CREATE TABLE kineto_member (key VARCHAR, value VARCHAR);

-- baseTimeNanoseconds (newer writers): the UTC Unix-epoch ns of ts 0, which ingest records as the
-- trace's start_utc_ns and utc_offset_ns. Older files count ts from the epoch itself.
CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs BIGINT);
