"""Tests of engines: Spark and the SQL transpiler."""
