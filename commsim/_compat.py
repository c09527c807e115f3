"""Version shims for optional heavy dependencies (JAX), in one place.

Nothing here imports JAX at module import time: each shim imports it when called, so
``import commsim`` never needs JAX.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

import numpy as np

__all__ = [
    "INTEGER_DTYPES",
    "as_dtype",
    "check_dtype",
    "compile_ahead",
    "compiler_options",
    "ensure_cpu_devices",
    "ensure_x64",
    "float_eps",
    "shard_map",
    "x64_enabled",
]

_EXTRA_FLOATS = ("bfloat16",)  # machine-learning floats numpy knows once ml_dtypes is imported


def as_dtype(dtype: Any) -> np.dtype:
    """``dtype`` as a numpy dtype, ``"bfloat16"`` included (through ``ml_dtypes``, which JAX
    ships); a one-line :class:`CommsimError` for anything else numpy does not know."""
    from commsim.errors import CommsimError

    if str(dtype) in _EXTRA_FLOATS:
        import ml_dtypes  # noqa: F401  (registers the names with numpy)
    try:
        return np.dtype(dtype)
    except (TypeError, ValueError):
        raise CommsimError(f"unknown dtype {dtype!r}; e.g. float32, float64, int32") from None


def float_eps(dtype: np.dtype) -> float:
    """Machine epsilon of a floating dtype, numpy's or ``ml_dtypes``' (bfloat16)."""
    if dtype.name in _EXTRA_FLOATS:
        import ml_dtypes

        return float(ml_dtypes.finfo(dtype).eps)
    return float(np.finfo(dtype).eps)


def ensure_x64(dtype: np.dtype) -> None:
    """Turn on JAX's 64-bit mode when ``dtype`` needs it: the environment variable (read when JAX
    starts, here or in MPI ranks started from here), and JAX's config if it has started."""
    import os
    import sys

    if not (dtype.itemsize == 8 and dtype.kind in "iuf"):
        return
    os.environ["JAX_ENABLE_X64"] = "1"
    jax = sys.modules.get("jax")
    if jax is not None:
        jax.config.update("jax_enable_x64", True)


# every backend runs these; each adds its floating-point types (its ``DTYPES``)
INTEGER_DTYPES = tuple(f"{k}int{b}" for k in ("", "u") for b in (8, 16, 32, 64))


def ensure_cpu_devices(n: int) -> None:
    """Ask XLA for ``n`` host (CPU) devices, if JAX has not started and ``XLA_FLAGS`` does not say.

    JAX reads ``XLA_FLAGS`` once, when its backend starts; after that the device count is fixed.
    """
    import os
    import sys

    flags = os.environ.get("XLA_FLAGS", "")
    if sys.modules.get("jax") is None and "xla_force_host_platform_device_count" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={n}".strip()


def check_dtype(
    dtype: Any, backend: str, supported: Collection[str], *, jax: bool = False
) -> np.dtype:
    """The element type ``dtype`` as a numpy dtype, or a one-line :class:`CommsimError`.

    ``supported`` lists the dtype names ``backend`` runs; byte orders other than the machine's
    (``>f4`` on a little-endian machine) are refused too. A backend that runs through JAX
    (``jax=True``) asked for a 64-bit type turns JAX's 64-bit mode on (:func:`ensure_x64`): the
    type is supported, so no one should have to set an environment variable for it.
    """
    from commsim.errors import CommsimError

    dt = as_dtype(dtype)
    if not dt.isnative:
        raise CommsimError(f"dtype {dt.str!r} is not in this machine's byte order; use {dt.name}")
    if dt.name not in supported:
        raise CommsimError(f"the {backend} backend runs {', '.join(supported)}; got {dt.name}")
    if jax:
        ensure_x64(dt)
    return dt


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


#: JAX's names for GPU platforms (``jax.Device.platform``)
_XLA_GPU_PLATFORMS = ("gpu", "cuda", "rocm")


def compiler_options(platform: str) -> dict[str, Any]:
    """XLA options for the mesh backend's programs on ``platform`` ("cpu", "gpu", "cuda", ...).

    Region-based live-range analysis in copy insertion: with it XLA proves that a step's reads
    (slices of the buffer sent in several ``ppermute`` rounds) all precede its in-place writes;
    without it, a step of several rounds costs two copies of the whole buffer.
    """
    if platform == "cpu":
        return {"xla_cpu_copy_insertion_use_region_analysis": True}
    if platform in _XLA_GPU_PLATFORMS:
        return {"xla_gpu_copy_insertion_use_region_analysis": True}
    return {}


def compile_ahead(jitted: Any, args: tuple[Any, ...], platform: str) -> Any:
    """``jitted`` (a ``jax.jit`` function) compiled now for ``args`` (arrays or shapes) with
    :func:`compiler_options`; an XLA that lacks an option compiles without them."""
    lowered = jitted.lower(*args)
    options = compiler_options(platform)
    try:
        return lowered.compile(compiler_options=options)
    except Exception:  # an XLA without the option: compile as is
        if not options:
            raise
        return lowered.compile()
