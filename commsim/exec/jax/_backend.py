r"""The JAX mesh backend: a whole schedule as one jitted ``shard_map`` over ``p`` devices.

Rank ``r`` is device ``r`` of a 1-D mesh along :data:`AXIS`. The anatomy, as in every backend:

* **validate**: the dtype (:data:`DTYPES`; 64-bit types need JAX's 64-bit mode), the layout,
  and that ``p`` devices are there (on CPU, ``XLA_FLAGS`` must ask for them before JAX starts).
* **plan**: :func:`commsim.exec.jax._plan.plan`, numpy only: rounds of ``ppermute`` s and
  windows of the buffer.
* **program**: :func:`commsim.exec.jax._program.program`, the plan traced into one jitted
  ``shard_map``, compiled with region-based copy insertion so that it runs in place.
* **native collective**: ``psum`` (allreduce), ``psum`` (reduce: every rank gets the sum, the
  root keeps it), ``psum`` of the root's data masked to zero elsewhere (broadcast: what JAX
  programs write; it costs an allreduce), ``psum_scatter(tiled=True)`` (reduce-scatter),
  ``all_gather(tiled=True)`` (allgather) and ``all_to_all(tiled=True)`` (alltoall). Its ``put``
  uploads only the collective's input (:meth:`Layout.take_input`) and its ``get`` puts the result
  back where the schedule would leave it (:meth:`Layout.place_output`), so the timed ``run`` is
  the bare collective and :func:`commsim.exec.check_outputs` checks both the same way.
* **register**: :class:`JaxMeshBackend`, its row in the backend table (:mod:`commsim.exec._registry`).

Plans and compiled functions are cached on the backend per (schedule object, count, dtype): a
second ``compile`` of the same schedule does not retrace. ``run`` donates its input buffer (the
schedule runs in place, like the reference interpreter: no copy of the buffer per run), so call
it as ``buf = run(buf)``; the native collectives do not donate. JAX is imported only when a
program is built.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from commsim._compat import INTEGER_DTYPES, check_dtype, ensure_cpu_devices
from commsim._ir import Schedule
from commsim._wire import Wire, check_wire
from commsim._wire import wire as as_wire
from commsim.errors import CommsimError, ResourceError
from commsim.exec._backend import Compiled
from commsim.exec._layout import Layout
from commsim.exec._lowering import CompileCache, check_layout
from commsim.exec.jax._plan import Plan, plan

__all__ = ["AXIS", "DTYPES", "JaxMeshBackend"]

AXIS = "ranks"


# -- validate --------------------------------------------------------------------------------------
DTYPES = ("float16", "bfloat16", "float32", "float64", "complex64", "complex128", *INTEGER_DTYPES)


def _check_dtype(dtype: Any) -> np.dtype:
    return check_dtype(dtype, "jax", DTYPES, jax=True)


def _devices(given: list[Any] | None, p: int) -> list[Any]:
    """The first ``p`` devices of ``given`` (default: ``jax.devices()``), or a one-line error."""
    import jax

    devs = given if given is not None else jax.devices()
    if given is not None and len(devs) != p:
        raise CommsimError(
            f"schedule has p={p} ranks but the jax backend was given {len(devs)} devices"
        )
    if len(devs) < p:
        raise CommsimError(
            f"schedule has p={p} ranks but only {len(devs)} JAX devices are visible "
            f"(on CPU, set XLA_FLAGS=--xla_force_host_platform_device_count={p} "
            "before JAX starts)"
        )
    return list(devs[:p])


# -- plan ------------------------------------------------------------------------------------------
# commsim.exec.jax._plan.plan (numpy only), made once per (schedule, count)
def _planned(cache: CompileCache, schedule: Schedule, layout: Layout) -> Plan:
    return cache.get(schedule, ("plan", layout.count), lambda: plan(schedule, layout))


# -- program ---------------------------------------------------------------------------------------
# commsim.exec.jax._program (JAX), built once per (schedule, count, dtype)
def _compiled(
    cache: CompileCache,
    schedule: Schedule,
    layout: Layout,
    dt: np.dtype,
    devs: list[Any],
    *,
    donate: bool,
    on_trace: Callable[[], None],
    wire: Wire | None = None,
) -> Compiled:
    from commsim.exec.jax import _program as prog

    def make() -> Compiled:
        body = prog.program(_planned(cache, schedule, layout), AXIS, on_trace, wire)
        shape = (schedule.nranks, layout.nelems)
        return prog.compiled(prog.mesh(devs, AXIS), AXIS, body, shape, dt, donate)

    key = ("program", layout.count, dt.str, wire.name if wire else None)
    return cache.get(schedule, key, make)


# -- native collective -----------------------------------------------------------------------------
_NATIVE_NAMES = {
    "allreduce": "lax.psum",
    "reduce": "lax.psum",
    "broadcast": "lax.psum (masked)",
    "reduce_scatter": "lax.psum_scatter",
    "allgather": "lax.all_gather",
    "alltoall": "lax.all_to_all",
}


def _native_compiled(
    cache: CompileCache, schedule: Schedule, layout: Layout, dt: np.dtype, devs: list[Any]
) -> Compiled:
    from commsim.exec.jax import _program as prog

    def make() -> Compiled:
        body = prog.native_program(schedule.collective, schedule.root, AXIS)
        mesh = prog.mesh(devs, AXIS)
        inner = prog.compiled(mesh, AXIS, body, layout.input_shape(), dt, donate=False)
        return Compiled(
            put=lambda host: inner.put(layout.take_input(np.asarray(host))),
            run=inner.run,
            get=lambda buf: layout.place_output(inner.get(buf)),
            repeat=inner.repeat,
        )

    return cache.get(schedule, ("native", layout.count, dt.str), make)


# -- register --------------------------------------------------------------------------------------
class JaxMeshBackend:
    """Runs schedules on ``p`` JAX devices (the first ``p`` of ``devices``, default all).

    Args:
        devices: the devices to use, in rank order; ``None``: ``jax.devices()``.
        donate: donate the input buffer to ``run`` (in place, no copy of the buffer per run).
        wire: send every message in this wire format (``"fp16"``, ``"bf16"``, ``"int8"``,
            :mod:`commsim._wire`; reductions of float data only); ``None``: exact.
    """

    name = "jax"
    #: the wire format every message travels in (``None``: the data's own dtype)
    wire: Wire | None = None

    @staticmethod
    def prepare(nranks: int) -> None:
        """Ask XLA for ``nranks`` host (CPU) devices, if JAX has not started and ``XLA_FLAGS``
        does not say (:func:`commsim._compat.ensure_cpu_devices`)."""
        ensure_cpu_devices(nranks)

    check_dtype = staticmethod(_check_dtype)

    #: ``ppermute`` rounds one program may have: XLA's compile time and memory grow with them
    #: (about 50 ms a round on CPU, 2,000 rounds took 150 s and 5 GB), so longer schedules are
    #: refused up front instead of compiling for minutes without a word.
    MAX_ROUNDS = 1024

    def __init__(
        self,
        devices: Any = None,
        donate: bool = True,
        max_rounds: int = MAX_ROUNDS,
        wire: str | Wire | None = None,
    ) -> None:
        self._devices = None if devices is None else list(devices)
        self.wire = as_wire(wire)
        self.donate = donate
        self.max_rounds = max_rounds
        self.traces = 0  # how many times a program was traced (the no-recompile tests read it)
        self._cache = CompileCache()

    def unavailable(self) -> str | None:
        try:
            import jax  # noqa: F401
        except ImportError as e:
            return f"JAX cannot be imported ({e}); install it with `pip install jax`"
        return None

    @staticmethod
    def native_name(collective: str) -> str:
        """The JAX collective :meth:`native` uses for ``collective``."""
        return _NATIVE_NAMES[collective]

    def host_workers(self, nranks: int) -> int:
        """CPU devices are host threads, one per rank; accelerators run beside one process."""
        return nranks if _devices(self._devices, nranks)[0].platform == "cpu" else 1

    def plan(self, schedule: Schedule, layout: Layout) -> Plan:
        """The plan :meth:`compile` lowers (cached per schedule and count)."""
        check_layout(schedule, layout)
        return _planned(self._cache, schedule, layout)

    def compile(self, schedule: Schedule, layout: Layout, dtype: Any) -> Compiled:
        """Lower ``schedule`` to one jitted ``shard_map`` (cached per schedule, count, dtype)."""
        dt = _check_dtype(dtype)
        check_layout(schedule, layout)
        check_wire(self.wire, schedule.collective, dt)
        self._check_rounds(schedule.nsteps, schedule)  # every step is at least one round
        self._check_rounds(self.plan(schedule, layout).nppermutes, schedule)
        devs = _devices(self._devices, schedule.nranks)
        return _compiled(
            self._cache, schedule, layout, dt, devs,
            donate=self.donate, on_trace=self._count_trace, wire=self.wire,
        )  # fmt: skip

    def native(self, schedule: Schedule, layout: Layout, dtype: Any) -> Compiled | None:
        """JAX's own collective for ``schedule``'s kind on the same ``[p, nelems]`` buffers."""
        dt = _check_dtype(dtype)
        check_layout(schedule, layout)
        devs = _devices(self._devices, schedule.nranks)
        return _native_compiled(self._cache, schedule, layout, dt, devs)

    def idle(self, nranks: int, dtype: Any = "float32") -> Compiled:
        """A run that moves nothing through the same call path as :meth:`compile`'s programs
        (:func:`commsim.exec.jax._program.idle`): its time is the executor's per-call (``run``)
        and per-run (``repeat``) overhead."""
        from commsim.exec.jax import _program as prog

        devs = _devices(self._devices, nranks)
        return prog.idle(prog.mesh(devs, AXIS), AXIS, _check_dtype(dtype), self.donate)

    def _check_rounds(self, rounds: int, schedule: Schedule) -> None:
        if rounds > self.max_rounds:
            raise ResourceError(
                f"{schedule.collective} {schedule.algorithm!r} needs {rounds:,} ppermute rounds "
                f"or more, past the {self.max_rounds:,} one JAX program compiles in reasonable "
                "time and memory (about 50 ms a round on CPU); use fewer segments or steps, the "
                "numpy or mpi backend, or JaxMeshBackend(max_rounds=...)"
            )

    def _count_trace(self) -> None:
        self.traces += 1
