"""Tests of store: the workspace file, upgrades, stored reports, extreme inputs at ingest."""
