"""Tests of the repository as a whole: layers, docs, packaging, benchmarks, fixture generators."""
