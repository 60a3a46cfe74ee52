"""The versions a trace records beside its exporter's: the NVIDIA driver, the CUDA driver and
runtime, PyTorch (trace.driver_version, cuda_driver_version, cuda_runtime_version, torch_version),
as people write them."""

from __future__ import annotations


def cuda_version(value) -> str | None:
    """CUDA's integer version (1000 * major + 10 * minor: 12060) as 'major.minor' ('12.6');
    None for anything else."""
    try:
        v = int(str(value).strip())
    except (TypeError, ValueError):
        return None
    return f"{v // 1000}.{v % 1000 // 10}" if v >= 1000 else None


def driver_version(value) -> str | None:
    """An NVIDIA driver version as people write it: '560.94' stays; the digits-only form of
    older nsys exports ('4952905', '52510517', Windows '42600') reads as a three-digit major,
    then the rest with its last two digits apart ('495.29.05', '525.105.17', '426.00')."""
    text = None if value is None else str(value).strip()
    if not text:
        return None
    if not text.isdigit() or len(text) <= 3:
        return text
    major, rest = text[:3], text[3:]
    return ".".join(p for p in (major, rest[:-2], rest[-2:]) if p)


def nsys_versions(system_env: dict) -> dict[str, str]:
    """trace.driver_version and cuda_driver_version from TARGET_INFO_SYSTEM_ENV's rows."""
    out = {"driver_version": driver_version(system_env.get("NvDriverVersion")),
           "cuda_driver_version": cuda_version(system_env.get("CudaDriverVersion"))}
    return {k: v for k, v in out.items() if v}


def kineto_versions(members: dict) -> dict[str, str]:
    """trace.driver_version, cuda_driver_version, cuda_runtime_version and torch_version from a
    PyTorch profiler trace's top-level members (metadata.system.torch_env_info is what
    benchmark harnesses such as TraceLens' add; the profiler writes the two CUDA versions)."""
    env = members.get("metadata")
    for key in ("system", "torch_env_info"):
        env = env.get(key) if isinstance(env, dict) else None
    env = env if isinstance(env, dict) else {}
    torch = env.get("torch_version")
    out = {"driver_version": driver_version(env.get("nvidia_driver_version")),
           "cuda_driver_version": cuda_version(members.get("cuda_driver_version")),
           "cuda_runtime_version": cuda_version(members.get("cuda_runtime_version")),
           "torch_version": torch.strip() if isinstance(torch, str) and torch.strip() else None}
    return {k: v for k, v in out.items() if v}
