"""What every execution backend provides, and the optional capabilities some add.

A backend lowers *any* schedule (it never looks at the algorithm's name) and hands back a
:class:`Compiled`: ``put`` moves per-rank buffers ``[p, nelems]`` to where the backend computes
and returns once they are there (so a timed ``run`` never waits for a transfer), ``run``
executes the whole schedule once and returns when it is done (so it can be timed), and ``get``
brings the buffers back. ``native`` gives the same for the backend's own collective
(``MPI_Allreduce``, ``jax.lax.psum``, ...), the baseline :mod:`commsim.bench` times beside it.

What a backend *is* (its launcher, its class, what it can do before it is imported) is its row
in :mod:`commsim.exec._registry`; what a running backend can do beyond :class:`Backend` is one of
the capability protocols here (:class:`HostNative`, :class:`StepTimed`, :class:`IdleRun`,
:class:`OnCommunicator`), asked with :func:`supports`, never by its name.

Every device backend is a package with one anatomy (:mod:`commsim.exec.jax`,
:mod:`commsim.exec.mpi`, :mod:`commsim.exec.cuda`): ``_plan`` lowers a schedule to a static
plan with numpy alone (which rounds, segments, launches: testable anywhere), ``_program`` builds
the device program from a plan, and ``_backend`` holds the backend class, its sections in the
order **validate → plan → program → native collective → register**. The class lists the members
of :class:`Backend` in the protocol's order; its plans and programs live in one
:class:`~commsim.exec._lowering.CompileCache`.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import numpy as np

from commsim._ir import Schedule
from commsim.errors import CommsimError
from commsim.exec._layout import Layout

__all__ = [
    "Backend",
    "Compiled",
    "HostNative",
    "IdleRun",
    "OnCommunicator",
    "StepTimed",
    "blocking",
    "rank_row",
    "supports",
    "uploaded",
]


@dataclasses.dataclass(frozen=True)
class Compiled:
    """A schedule (or native collective) ready to run on one backend for one layout and dtype.

    ``repeat(buf, k)``, where a backend offers it, runs the schedule ``k`` times back to back in
    one call (one dispatch), each run on the previous run's output, and returns the last output:
    what nccl-tests times, so that the per-call cost of the runtime (JAX's dispatch) is paid once
    per ``k`` runs. ``k`` is an argument of the compiled program (one compilation serves all).
    """

    put: Callable[[np.ndarray], Any]
    run: Callable[[Any], Any]
    get: Callable[[Any], np.ndarray]
    repeat: Callable[[Any, int], Any] | None = None


def rank_row(host: Any, rank: int, dtype: np.dtype, nelems: int) -> np.ndarray:
    """Rank ``rank``'s row of ``[p, nelems]`` host buffers (or a ``[nelems]`` buffer as is),
    C-contiguous in ``dtype`` (a view where it already is): what a rank's ``put`` starts from
    in the backends whose processes each hold one row (MPI, SHMEM)."""
    a = np.asarray(host)
    if a.ndim == 2:
        a = a[rank]
    if a.shape != (nelems,):
        raise CommsimError(f"expected [p, {nelems}] or [{nelems}] buffers, got {a.shape}")
    return np.ascontiguousarray(a, dtype=dtype)


def uploaded(array: Any) -> Any:
    """A JAX array (or a tuple of them) once its transfer to the device is done
    (``device_put`` is asynchronous): a :attr:`Compiled.put` returns only then, so no timed
    ``run`` waits for an upload."""
    import jax

    return jax.block_until_ready(array)


def blocking(exe: Callable[..., Any]) -> Callable[..., Any]:
    """``exe`` (a compiled JAX function) as a :attr:`Compiled.run` (or ``repeat``): it returns
    only when its result (an array or a tuple of arrays) is ready, so that the call can be timed."""
    import jax

    def run(*args: Any) -> Any:
        return jax.block_until_ready(exe(*args))

    return run


class Backend(Protocol):
    """What the harness, :func:`~commsim.exec.execute` and the CLI use of a backend, in order."""

    name: str

    @staticmethod
    def prepare(nranks: int) -> None:
        """Get ready for ``nranks`` ranks before the backend starts (callable on the class;
        :func:`~commsim.exec.get_backend` calls it when given ``nranks``): JAX on CPU asks XLA
        for that many devices; most backends need nothing."""

    def check_dtype(self, dtype: Any) -> np.dtype:
        """``dtype`` as a numpy dtype if this backend runs it, else a one-line CommsimError
        (callable on the class: it never starts the device or MPI)."""

    def unavailable(self) -> str | None:
        """``None`` when usable here, else one line: why not, and how to fix it."""

    def native_name(self, collective: str) -> str:
        """What :meth:`native` runs for ``collective``, e.g. ``"MPI_Allreduce"``."""

    def host_workers(self, nranks: int) -> int:
        """Host threads or processes that run at once for ``nranks`` ranks (1 for one process
        driving a GPU; ``nranks`` for MPI processes or JAX CPU devices): more than the cores,
        and timings measure the operating system's scheduler."""

    def compile(self, schedule: Schedule, layout: Layout, dtype: np.dtype) -> Compiled:
        """Lower ``schedule`` for buffers of ``layout`` and ``dtype``."""

    def native(self, schedule: Schedule, layout: Layout, dtype: np.dtype) -> Compiled | None:
        """The backend's own implementation of ``schedule``'s collective, or ``None``."""


# -- optional capabilities ---------------------------------------------------------------------
@runtime_checkable
class HostNative(Protocol):
    """A backend whose executor wraps a library, offering that library's collective called
    directly on host buffers, outside the executor (MPI: mpi4py on numpy), so a measurement
    shows the transport's own time beside the executor's."""

    def host_native(self, schedule: Schedule, layout: Layout, dtype: Any) -> Compiled | None:
        """The library collective on host buffers, or ``None`` for this collective."""

    def host_native_name(self, collective: str) -> str:
        """What :meth:`host_native` runs, e.g. ``"MPI_Allreduce (mpi4py)"``."""


@runtime_checkable
class StepTimed(Protocol):
    """A backend that can run a schedule one step at a time, for a run that reads the clock
    between steps (a measured trace, :func:`commsim.bench.trace_mpi`)."""

    def compile_steps(self, schedule: Schedule, layout: Layout, dtype: Any) -> Any:
        """``put``, ``steps`` (``(index, run)`` per step this rank takes part in) and ``get``."""


@runtime_checkable
class IdleRun(Protocol):
    """A backend with a run that moves nothing through its call path: its time is the
    executor's own per-call overhead (:func:`commsim.bench.call_samples`)."""

    def idle(self, nranks: int, dtype: Any = "float32") -> Compiled:
        """A :class:`Compiled` whose run moves nothing."""


@runtime_checkable
class OnCommunicator(Protocol):
    """A backend whose ranks are the processes of an MPI communicator (timed by the slowest
    rank, :class:`commsim.bench.MpiTimer`)."""

    comm: Any


def supports(backend: Any, capability: type) -> bool:
    """Whether ``backend`` (an instance or a class) offers ``capability``, one of the protocols
    above: it has every member and none is ``None``. A subclass declines an inherited
    capability by setting the member to ``None``, as ``__hash__ = None`` declines hashing.

    Examples:
        >>> from commsim.exec.reference import NumpyBackend
        >>> supports(NumpyBackend, HostNative), supports(NumpyBackend(), StepTimed)
        (False, False)
    """
    members = {*getattr(capability, "__annotations__", {}), *vars(capability)}
    return all(  # static: a property (an MPI communicator) is not started by asking
        inspect.getattr_static(backend, m, None) is not None
        for m in members
        if not m.startswith("_")
    )
