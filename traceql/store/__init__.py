"""Layer 5, store: the workspace file: its connection and guard, the lock, the writing copy
(transaction), ingest and its workers, rm, upgrade, contract versions, reports stored at ingest."""
