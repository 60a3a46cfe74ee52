"""The rules of `traceql diff` that its parts share: the defaults of alpha, the minimum effect
and the trim, the sections and their titles, the headline rows the verdict and the gate read, the
fewest iterations of a joint anchor, the gated sections, the versions compared, the gate's exit code."""

from __future__ import annotations


GATE_EXIT = 7  # exit code of `traceql diff --gate PCT` when the gate fails
DEFAULT_ALPHA = 0.01
DEFAULT_MIN_EFFECT_PCT = 5.0
DEFAULT_TRIM = 0.2
SECTIONS = ("total", "kernel", "op", "range", "range_gpu", "api", "memcpy", "memset")
HEADLINE = ("iteration time", "GPU operations")  # the rows the verdict and the gate read
SUMS = ("GPU operations", "kernels", "copies", "memsets")  # totals that are sums of instances
CHANGED = ("slower", "faster", "added", "removed", "more calls", "fewer calls")
TITLES = {"total": "Totals", "kernel": "Kernels", "op": "PyTorch ops (GPU time per op call)",
          "range": "NVTX ranges (CPU time per instance)",
          "range_gpu": "NVTX ranges (GPU busy time of the work launched inside)", "api": "API calls",
          "memcpy": "Copies", "memset": "Memsets"}
MIN_ITERATIONS = 3  # fewest iterations of the joint anchor on each side (analyze/iterations' min_iterations)
GATED = ("kernel", "op", "range")  # the sections whose keys the gate reads, besides the headline rows


# trace columns the warnings compare, with what they are called there
VERSIONS = (("driver_version", "NVIDIA driver"), ("cuda_driver_version", "CUDA driver version"),
            ("cuda_runtime_version", "CUDA runtime"), ("torch_version", "PyTorch"))
