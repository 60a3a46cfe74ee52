"""Tests of query: the report library, SQL checks, range filters, join plans."""
