"""Version shims for optional heavy dependencies (JAX), in one place.

Nothing here imports JAX at module import time: each shim imports it when called, so
``import commsim`` never needs JAX.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["compiler_options", "shard_map", "x64_enabled"]


def shard_map(f: Callable[..., Any], *, mesh: Any, in_specs: Any, out_specs: Any) -> Any:
    """``jax.shard_map`` (JAX >= 0.7); ``jax.experimental.shard_map`` on older JAX."""
    import jax

    if hasattr(jax, "shard_map"):
        return jax.shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs)
    from jax.experimental.shard_map import shard_map as _old  # pragma: no cover

    return _old(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs)  # pragma: no cover


def x64_enabled() -> bool:
    """Whether JAX keeps 64-bit dtypes (``JAX_ENABLE_X64``); otherwise they become 32-bit."""
    import jax

    return bool(jax.config.read("jax_enable_x64"))


def compiler_options(platform: str) -> dict[str, Any]:
    """XLA options for the mesh backend's programs on ``platform`` ("cpu", "gpu", "cuda", ...).

    Region-based live-range analysis in copy insertion: with it XLA proves that a step's reads
    (slices of the buffer sent in several ``ppermute`` rounds) all precede its in-place writes;
    without it, a step of several rounds costs two copies of the whole buffer.
    """
    if platform == "cpu":
        return {"xla_cpu_copy_insertion_use_region_analysis": True}
    if platform in ("gpu", "cuda", "rocm"):
        return {"xla_gpu_copy_insertion_use_region_analysis": True}
    return {}
