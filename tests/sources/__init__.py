"""Tests of sources: what a file is and how each format's tables are read."""
