r"""The mpi4jax backend: one process per rank, each running its own transfers as MPI messages.

Rank ``r`` is MPI rank ``r`` of a communicator of exactly ``p`` processes (a private clone of
``COMM_WORLD`` by default). Run it under ``mpirun`` (``commsim run --backend mpi`` starts
``mpirun`` itself: :func:`commsim.bench.measure_mpi`). The anatomy, as in every backend:

* **validate**: the dtype (:data:`DTYPES`; 64-bit types need JAX's 64-bit mode), the layout, and
  that MPI runs exactly ``p`` processes; :func:`missing` says, without importing anything,
  whether mpi4py, mpi4jax and ``mpirun`` are installed (:data:`INSTALL_HINT` says how).
* **plan**: :func:`commsim.exec.mpi._plan.plan`, numpy only: this rank's rounds of
  ``sendrecv`` / ``send`` / ``recv`` (the module states why they cannot deadlock). mpi4jax has
  no non-blocking operations, so this backend runs a rank's channels (IR rule 6) one round
  after another; :class:`HostMpiBackend` runs them at once (``Isend`` / ``Irecv``).
* **program**: :func:`commsim.exec.mpi._program.program`, the rank's plan as one ``jax.jit``
  function of its buffer held as chunks (cut where the plan reads or writes), donated:
  ``buf = run(buf)``; ``repeat(buf, k)`` runs it ``k`` times in one call, and :meth:`idle` is
  a run that moves nothing (the executor's own overhead).
* **native collective**: the MPI library's own collective on the same data (MPI_Allreduce,
  MPI_Reduce, MPI_Bcast, MPI_Allgather, MPI_Alltoall through mpi4jax; MPI_Reduce_scatter_block
  through mpi4py).
* **register**: :class:`MpiBackend`, its row in the backend table (:mod:`commsim.exec._registry`).

Heavy imports (``mpi4py``, which initializes MPI, and ``mpi4jax``) happen only when a backend
needs its communicator or builds a program; ``import commsim`` never needs MPI. Starting
``mpirun`` and collecting the ranks' results is :mod:`commsim.bench`'s job.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np

from commsim._compat import INTEGER_DTYPES, check_dtype
from commsim._ir import Schedule
from commsim._wire import Wire, check_wire
from commsim._wire import wire as as_wire
from commsim.errors import CommsimError, ParameterError
from commsim.exec._backend import Compiled
from commsim.exec._layout import Layout
from commsim.exec._lowering import CompileCache, check_layout
from commsim.exec.mpi._plan import RankPlan, plan

__all__ = ["DTYPES", "INSTALL_HINT", "HostMpiBackend", "MpiBackend", "find_mpirun", "missing"]

INSTALL_HINT = (
    "run scripts/bootstrap.sh (installs the mpich wheel, mpi4py and mpi4jax into .venv), or "
    "`pip install mpich mpi4py` then `MPI4JAX_BUILD_MPICC=$(which mpicc) "
    "pip install --no-build-isolation mpi4jax`"
)


# -- validate --------------------------------------------------------------------------------------
DTYPES = ("float32", "float64", "complex64", "complex128", *INTEGER_DTYPES)


def find_mpirun() -> str | None:
    """``mpirun`` beside the running interpreter (the venv's mpich wheel), else on ``PATH``."""
    here = Path(sys.executable).parent / "mpirun"
    if here.is_file() and os.access(here, os.X_OK):
        return str(here)
    return shutil.which("mpirun")


def missing(need_mpirun: bool = True) -> str | None:
    """One line when mpi4py, mpi4jax (or ``mpirun``) are absent, else ``None``; imports nothing."""
    absent = [m for m in ("mpi4py", "mpi4jax") if importlib.util.find_spec(m) is None]
    if need_mpirun and find_mpirun() is None:
        absent.append("mpirun")
    if absent:
        return f"MPI is not installed ({', '.join(absent)} not found): {INSTALL_HINT}"
    return None


def _check_dtype(dtype: Any) -> np.dtype:
    return check_dtype(dtype, "mpi", DTYPES, jax=True)


def _check_world(schedule: Schedule, size: int) -> None:
    if schedule.nranks != size:
        raise CommsimError(
            f"schedule {schedule.algorithm!r} has p={schedule.nranks} ranks but MPI runs {size} "
            f"processes; start it with `mpirun -n {schedule.nranks}`"
        )


# -- plan ------------------------------------------------------------------------------------------
# commsim.exec.mpi._plan.plan (numpy only), made once per (schedule, count)
def _planned(cache: CompileCache, schedule: Schedule, layout: Layout, rank: int) -> RankPlan:
    def make() -> RankPlan:
        [pl] = plan(schedule, layout, ranks=[rank])
        return pl

    return cache.get(schedule, ("plan", layout.count), make)


# -- program ---------------------------------------------------------------------------------------
# commsim.exec.mpi._program (mpi4jax), built once per (schedule, count, dtype)
def _compiled(
    cache: CompileCache,
    schedule: Schedule,
    layout: Layout,
    dt: np.dtype,
    comm: Any,
    *,
    donate: bool,
    wire: Wire | None = None,
) -> Compiled:
    from commsim.exec.mpi import _program as prog

    def make() -> Compiled:
        pl = _planned(cache, schedule, layout, comm.Get_rank())
        return prog.compiled(pl, comm, dt, donate, wire)

    key = ("program", layout.count, dt.str, wire.name if wire else None)
    return cache.get(schedule, key, make)


# -- native collective -----------------------------------------------------------------------------
_NATIVE_NAMES = {
    "allreduce": "MPI_Allreduce",
    "reduce": "MPI_Reduce",
    "broadcast": "MPI_Bcast",
    "allgather": "MPI_Allgather",
    "alltoall": "MPI_Alltoall",
    "reduce_scatter": "MPI_Reduce_scatter_block",
}


def _native_compiled(
    cache: CompileCache, schedule: Schedule, layout: Layout, dt: np.dtype, comm: Any
) -> Compiled:
    from commsim.exec.mpi import _program as prog

    def make() -> Compiled:
        return prog.native_compiled(schedule.collective, schedule.root, layout, comm, dt)

    return cache.get(schedule, ("native", layout.count, dt.str), make)


# -- register --------------------------------------------------------------------------------------
class MpiBackend:
    """Runs schedules with one MPI process per rank; create it on every rank (it clones ``comm``).

    Args:
        comm: the communicator whose ranks are the schedule's ranks (default: a clone of
            ``COMM_WORLD``, so commsim's messages never match the application's).
        donate: donate the buffer to ``run`` (in place, no copy per run): call ``buf = run(buf)``.
        wire: send every message in this wire format (``"fp16"``, ``"bf16"``, ``"int8"``,
            :mod:`commsim._wire`; reductions of float data only); ``None``: exact.
    """

    name = "mpi"
    #: the wire format every message travels in (``None``: the data's own dtype)
    wire: Wire | None = None

    @staticmethod
    def prepare(nranks: int) -> None:
        """Nothing: ``mpirun`` starts the ``nranks`` processes (:func:`commsim.bench.measure_mpi`)."""

    check_dtype = staticmethod(_check_dtype)

    def __init__(
        self, comm: Any = None, donate: bool = True, wire: str | Wire | None = None
    ) -> None:
        self._comm = comm
        self.donate = donate
        self.wire = as_wire(wire)
        self._cache = CompileCache()

    def unavailable(self) -> str | None:
        why = missing(need_mpirun=False)
        if why:
            return why
        try:
            import mpi4jax  # noqa: F401
            from mpi4py import MPI  # noqa: F401
        except ImportError as e:  # installed but broken (e.g. built against another MPI)
            return f"mpi4py/mpi4jax cannot be imported ({e}); {INSTALL_HINT}"
        return None

    @staticmethod
    def native_name(collective: str) -> str:
        """The MPI collective :meth:`native` uses for ``collective``."""
        return _NATIVE_NAMES[collective]

    @staticmethod
    def host_workers(nranks: int) -> int:
        return nranks  # one process per rank

    def plan(self, schedule: Schedule, layout: Layout) -> RankPlan:
        """This rank's plan, the one :meth:`compile` lowers (cached per schedule and count)."""
        check_layout(schedule, layout)
        return _planned(self._cache, schedule, layout, self.rank)

    def compile(self, schedule: Schedule, layout: Layout, dtype: Any) -> Compiled:
        """This rank's program for ``schedule``, jitted once per (schedule, count, dtype).

        ``put`` takes the ``[p, nelems]`` buffers of all ranks (or this rank's ``[nelems]``) and
        cuts this rank's row into chunks; ``run`` runs the schedule on them; ``get`` gathers
        every rank's buffer (``[p, nelems]``, on every rank), so :func:`commsim.exec.execute`
        works under ``mpirun``.
        """
        dt = _check_dtype(dtype)
        check_layout(schedule, layout)
        check_wire(self.wire, schedule.collective, dt)
        _check_world(schedule, self.size)
        return self._program(schedule, layout, dt)

    def _program(self, schedule: Schedule, layout: Layout, dt: np.dtype) -> Compiled:
        """The checked schedule lowered by this executor (mpi4jax inside ``jax.jit``)."""
        return _compiled(
            self._cache, schedule, layout, dt, self.comm, donate=self.donate, wire=self.wire
        )

    def compile_steps(self, schedule: Schedule, layout: Layout, dtype: Any) -> Any:
        """This rank's program one step at a time
        (:class:`commsim.exec.mpi._program.Stepped`: ``put``, per step ``(index, run)``,
        ``get``), for a run that reads the clock between steps (a trace). Not cached: a
        traced run builds it once."""
        from commsim.exec.mpi import _program as prog

        dt = _check_dtype(dtype)
        check_layout(schedule, layout)
        _check_world(schedule, self.size)
        check_wire(self.wire, schedule.collective, dt)
        pl = _planned(self._cache, schedule, layout, self.rank)
        return prog.stepped(pl, self.comm, dt, self.wire)

    def native(self, schedule: Schedule, layout: Layout, dtype: Any) -> Compiled | None:
        """The MPI library's collective for ``schedule``'s kind, on the same buffers.

        ``put`` keeps only this rank's input, ``run`` is the bare collective (it does not consume
        its argument), ``get`` puts the result where the schedule leaves it and gathers.
        """
        dt = _check_dtype(dtype)
        check_layout(schedule, layout)
        _check_world(schedule, self.size)
        if schedule.collective not in _NATIVE_NAMES:
            return None
        return _native_compiled(self._cache, schedule, layout, dt, self.comm)

    def idle(self, nranks: int, dtype: Any = "float32") -> Compiled:
        """A run that moves nothing through the same call path as :meth:`compile`'s programs
        (:func:`commsim.exec.mpi._program.idle`): its time is the executor's per-call (``run``)
        and per-run (``repeat``) overhead, beside the transport's. Call it on every rank."""
        if nranks != self.size:
            raise CommsimError(
                f"idle run for p={nranks} ranks but MPI runs {self.size} processes; start it "
                f"with `mpirun -n {nranks}`"
            )
        return self._idle(np.dtype(_check_dtype(dtype)))

    def _idle(self, dt: np.dtype) -> Compiled:
        from commsim.exec.mpi import _program as prog

        return prog.idle(self.comm, dt)

    def host_native(self, schedule: Schedule, layout: Layout, dtype: Any) -> Compiled | None:
        """The MPI library's collective called through mpi4py on numpy buffers, outside JAX
        (as the OSU micro-benchmarks call it): the transport's own time beside :meth:`native`
        (the same collective through mpi4jax inside ``jax.jit``)."""
        from commsim.exec.mpi import _host  # numpy and mpi4py only: no JAX on this path

        dt = _check_dtype(dtype)
        check_layout(schedule, layout)
        _check_world(schedule, self.size)
        if schedule.collective not in _NATIVE_NAMES:
            return None
        return _host.host_compiled(schedule.collective, schedule.root, layout, self.comm, dt)

    @staticmethod
    def host_native_name(collective: str) -> str:
        """What :meth:`host_native` runs, e.g. ``"MPI_Allreduce (mpi4py)"``."""
        return f"{_NATIVE_NAMES[collective]} (mpi4py)"

    @property
    def comm(self) -> Any:
        """The communicator (cloned from ``COMM_WORLD`` on first use, which starts MPI)."""
        if self._comm is None:
            from mpi4py import MPI

            self._comm = MPI.COMM_WORLD.Clone()
        return self._comm

    @property
    def rank(self) -> int:
        return int(self.comm.Get_rank())

    @property
    def size(self) -> int:
        return int(self.comm.Get_size())


class HostMpiBackend(MpiBackend):
    """The same plans run by mpi4py on numpy buffers (:mod:`commsim.exec.mpi._host`): no JAX,
    no XLA between the schedule and the MPI library, the way a C MPI library runs its own
    algorithms. Its baseline is the library's collective called the same way (mpi4py on numpy,
    :meth:`MpiBackend.host_native`). ``--backend mpi4py``; create it on every rank."""

    name = "mpi4py"

    def __init__(self, comm: Any = None, wire: str | Wire | None = None) -> None:
        if wire is not None:
            raise ParameterError(
                "the mpi4py executor sends the buffer's own dtype; a wire format runs on the "
                "mpi, jax and numpy backends"
            )
        super().__init__(comm, donate=True)

    def unavailable(self) -> str | None:
        try:  # mpi4jax is not needed here
            from mpi4py import MPI  # noqa: F401
        except ImportError as e:
            return f"mpi4py cannot be imported ({e}); {INSTALL_HINT}"
        return None

    @staticmethod
    def native_name(collective: str) -> str:
        return f"{_NATIVE_NAMES[collective]} (mpi4py)"

    def _program(self, schedule: Schedule, layout: Layout, dt: np.dtype) -> Compiled:
        """This rank's plan on a numpy buffer: ``put`` copies this rank's row, ``run`` runs the
        schedule in place on it, ``get`` gathers every rank's buffer (``[p, nelems]``)."""
        from commsim.exec.mpi import _host

        def make() -> Compiled:
            pl = _planned(self._cache, schedule, layout, self.rank)
            return _host.compiled(pl, self.comm, dt)

        return self._cache.get(schedule, ("host program", layout.count, dt.str), make)

    def native(self, schedule: Schedule, layout: Layout, dtype: Any) -> Compiled | None:
        """The MPI library's collective through mpi4py on numpy buffers (what
        :meth:`MpiBackend.host_native` runs): this executor's own kind of call."""
        return MpiBackend.host_native(self, schedule, layout, dtype)

    #: declined capabilities (:func:`commsim.exec.supports`): the baseline already is the
    #: library called directly, and its rounds are not jitted step by step
    host_native = host_native_name = compile_steps = None

    def _idle(self, dt: np.dtype) -> Compiled:
        """A run that moves nothing through this executor's path
        (:func:`commsim.exec.mpi._host.idle`)."""
        from commsim.exec.mpi import _host

        return _host.idle(self.comm, dt)
