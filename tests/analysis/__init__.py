"""Tests of analysis: analyze rules and diff."""
