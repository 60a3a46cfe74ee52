-- derived_family: which families of derived tables (schemas/derive/graph.csv) are built for which
-- trace (traceql/derivation.py). Not a contract table: a family not listed for a trace is built
-- the first time a query reads one of its tables. A workspace without this table holds them all.
CREATE TABLE IF NOT EXISTS derived_family (
    trace_id          INTEGER NOT NULL, -- trace the family was built for (trace.trace_id)
    family            VARCHAR NOT NULL  -- family name, as in schemas/derive/graph.csv
);
