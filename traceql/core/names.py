"""Name matching for messages: the name a user probably meant ('did you mean ...?'), with the
synonyms of the raw profiler tables and columns (nsys's CUPTI_ACTIVITY_KIND_KERNEL is kernel,
its correlationId correlation_id)."""

from __future__ import annotations

import difflib
import re

# Names people bring from the raw nsys / nvprof tables, and the contract names for them.
RAW_TABLES = {
    "cupti_activity_kind_kernel": "kernel", "cupti_activity_kind_concurrent_kernel": "kernel",
    "cupti_activity_kind_runtime": "api_call", "cupti_activity_kind_driver": "api_call",
    "cupti_activity_kind_memcpy": "memcpy", "cupti_activity_kind_memcpy2": "memcpy",
    "cupti_activity_kind_memset": "memset", "nvtx_events": "nvtx_range",
    "cupti_activity_kind_marker": "nvtx_range", "target_info_gpu": "device",
    "target_info_cuda_device": "device", "cupti_activity_kind_device": "device",
    "threadnames": "thread", "cupti_activity_kind_name": "thread", "processes": "thread",
}

RAW_COLUMNS = {
    "start": "ts", "timestamp": "ts", "begin": "ts", "duration": "dur", "elapsed": "dur",
    "demangled_name": "name", "kernel_name": "name", "text": "name", "global_pid": "pid",
    "global_tid": "tid", "process_id": "pid", "thread_id": "tid", "size": "bytes",
}


def closest(name: str, candidates: list[str]) -> str | None:
    """The candidate closest to name: the same name in snake_case (correlationId ->
    correlation_id), a raw-table synonym (duration -> dur), else the best of difflib's
    similarity with a bonus for a shared prefix of three or more characters."""
    if not candidates:
        return None
    by_lower = {c.lower(): c for c in candidates}
    snake = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()
    for key in (name.lower(), snake, RAW_COLUMNS.get(snake), RAW_TABLES.get(snake)):
        if key and key in by_lower:
            return by_lower[key]
    best, best_score = None, 0.0
    for cand in candidates:
        c = cand.lower()
        score = difflib.SequenceMatcher(None, snake, c).ratio()
        short = min(len(snake), len(c))
        if short >= 3 and (c.startswith(snake) or snake.startswith(c)):
            score = max(score, 0.75)
        if score > best_score:
            best, best_score = cand, score
    return best if best_score >= 0.6 else None
