-- stored_report: which default reports ingest stored for which trace (traceql/store/stored.py). The rows
-- of a report are in the table stored_<report>_<fingerprint>, with the report's columns, trace_id
-- set, and row_no, the row's place in the report. Not a contract table: an index that answers a
-- report without computing it, dropped when the workspace is written to with `traceql sql --write`.
CREATE TABLE IF NOT EXISTS stored_report (
    trace_id          INTEGER NOT NULL, -- trace the rows belong to (trace.trace_id)
    report            VARCHAR NOT NULL, -- report name, as in `traceql report --by NAME`
    fingerprint       VARCHAR NOT NULL, -- hash of the report's SQL and default options: rows stored by another version are never read
    row_count         BIGINT NOT NULL   -- rows stored for the trace (0 is a stored empty report)
);
