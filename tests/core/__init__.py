"""Tests of core (errors, settings, units, progress)."""
