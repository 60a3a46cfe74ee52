"""Layer 4, query: the query library, the report registry and reports, the --where and --range
filters, the checks of a user's SQL and its dialects, and what is read from the trace rows of a
job (jobs, clocks). Imports the layers below; never the workspace file (store) or above."""
