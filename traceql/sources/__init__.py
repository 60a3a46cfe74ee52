"""Layer 2, sources: what a file is (detect) and how its tables reach DuckDB: the SQLite reader, the
PyTorch profiler JSON reader, nsys reports through `nsys export`, the adapters' data, demangling,
who a trace is in a job (ranks). Imports core only."""
