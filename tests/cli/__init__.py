"""Tests of cli and mcp: the commands end to end, bad input, hardening."""
