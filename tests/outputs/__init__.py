"""Tests of outputs: text tables, formats, plots, timelines, exports."""
