"""Which vendor's API a trace's calls belong to, for the words a report prints; a module of its
own so that a report's text does not import the file readers (sqlite3, msgspec) of detect.py."""

from __future__ import annotations


def api_words(gpu_apis) -> str:
    """What the API calls of traces with these trace.gpu_api values ('CUDA', 'HIP': see
    schemas/derive/gpu_api.sql) are, for headings: 'HIP API calls', 'CUDA API calls' (also for
    a trace that records none), 'API calls' for a mix."""
    apis = {a or "CUDA" for a in gpu_apis}
    return "API calls" if len(apis) > 1 else f"{apis.pop() if apis else 'CUDA'} API calls"
