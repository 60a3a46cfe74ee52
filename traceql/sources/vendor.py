"""Which vendor's API a trace's calls belong to, for the words a report prints; a module of its
own so that a report's text does not import the file readers (sqlite3, msgspec) of detect.py."""

from __future__ import annotations

# Source formats whose API calls are AMD's HIP (and HSA) calls, not CUDA's.
AMD_FORMATS = frozenset(("rocpd", "rocprofv3_json", "rocprof", "rpd"))


def api_words(source_formats) -> str:
    """What the API calls of traces of these source formats are, for headings: 'HIP API calls' for
    AMD traces, 'CUDA API calls' for NVIDIA's (and PyTorch profiler traces), 'API calls' for a mix."""
    amd = {f in AMD_FORMATS for f in source_formats}
    return "API calls" if len(amd) > 1 else "HIP API calls" if amd == {True} else "CUDA API calls"
