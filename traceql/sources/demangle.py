"""Demangle C++ (Itanium ABI) symbol names, such as the kernel names nvprof stores, without a
new dependency: `__cxa_demangle` from the C++ runtime already on the machine (libstdc++ on
Linux, libc++abi on macOS), called through ctypes.

    demangle("_Z4gemmIfEvPKf")   -> 'void gemm<float>(float const*)'
    short_name("void at::native::elementwise_kernel<128, 4>(int)") -> 'elementwise_kernel'

Names that are not mangled (extern "C" kernels, cuBLAS's 'volta_sgemm_128x64_nn') and names
the runtime cannot demangle are returned unchanged. When no C++ runtime can be loaded,
`available()` is False and every name is returned unchanged.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from functools import lru_cache

_LIBRARIES = ("libstdc++.so.6", "libc++abi.so.1", "libc++abi.dylib", "libc++.1.dylib")


def _candidates():
    """Library names to try: the usual sonames first (loading one is instant), then what
    ctypes.util.find_library finds, which runs ldconfig and gcc in subprocesses (0.07 CPU s):
    only when no usual name loads."""
    yield from _LIBRARIES
    for lib in ("stdc++", "c++abi"):
        found = ctypes.util.find_library(lib)
        if found:
            yield found


@lru_cache(maxsize=None)
def _cxa():
    """(__cxa_demangle, free) of the first C++ runtime that loads, or None; looked up on the
    first name demangled, not at import (an export with no mangled name never needs it)."""
    for name in _candidates():
        try:
            lib = ctypes.CDLL(name)
            func = lib.__cxa_demangle
        except (OSError, AttributeError):
            continue
        func.restype = ctypes.c_void_p
        func.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
        try:
            libc = ctypes.CDLL(None if sys.platform != "win32" else "msvcrt")
            free = libc.free
        except (OSError, AttributeError):
            continue
        free.restype = None
        free.argtypes = [ctypes.c_void_p]
        return func, free
    return None


def available() -> bool:
    """True when a C++ runtime with __cxa_demangle was found."""
    return _cxa() is not None


def is_mangled(name: str | None) -> bool:
    return bool(name) and (name.startswith("_Z") or name.startswith("__Z"))


@lru_cache(maxsize=65536)
def demangle(name: str) -> str:
    """The demangled form of an Itanium-mangled symbol, or `name` unchanged when it is not
    mangled or cannot be demangled."""
    if not is_mangled(name) or _cxa() is None:
        return name
    func, free = _cxa()
    status = ctypes.c_int(0)
    for candidate in (name, name[1:]) if name.startswith("__Z") else (name,):
        ptr = func(candidate.encode("utf-8", "surrogateescape"), None, None, ctypes.byref(status))
        if ptr:
            try:
                if status.value == 0:
                    return ctypes.string_at(ptr).decode("utf-8", "replace")
            finally:
                free(ptr)
    return name


_CLOSE = {")": "(", ">": "<", "]": "[", "}": "{"}
_OPEN = {v: k for k, v in _CLOSE.items()}


def _matching_open(s: str, end: int) -> int:
    """Index of the bracket that opens the group closed at s[end], or -1."""
    depth = 0
    for i in range(end, -1, -1):
        c = s[i]
        if c in _CLOSE:
            depth += 1
        elif c in _OPEN:
            depth -= 1
            if depth == 0:
                return i
    return -1


def _split_top(s: str, sep: str) -> list[str]:
    """Split s on sep where it is outside every bracket pair."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(s):
        c = s[i]
        if c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth = max(depth - 1, 0)
        elif depth == 0 and s.startswith(sep, i):
            parts.append(s[start:i])
            i += len(sep)
            start = i
            continue
        i += 1
    parts.append(s[start:])
    return parts


@lru_cache(maxsize=65536)
def short_name(name: str) -> str:
    """The base function name of a (demangled) symbol: without return type, namespaces or
    classes, template arguments and parameters. 'void at::native::elementwise_kernel<128,
    4, F>(int, F)' gives 'elementwise_kernel'; a plain name is returned unchanged."""
    if not name:
        return name
    s = name.strip()
    for suffix in (" const", " volatile", " &&", " &"):
        if s.endswith(suffix):
            s = s[: -len(suffix)].rstrip()
    if s.endswith(")"):
        i = _matching_open(s, len(s) - 1)
        if i > 0:
            s = s[:i].rstrip()
    if s.endswith(">") and not s.endswith("->"):
        i = _matching_open(s, len(s) - 1)
        if i > 0:
            s = s[:i].rstrip()
    last = _split_top(s, "::")[-1].strip()
    last = _split_top(last, " ")[-1].strip()
    return last or name
