"""Layer 3, derive: the derivation graph of the contract tables, PyTorch ops and their FLOPs,
PyProf's params, call stacks. Imports core and sources."""
