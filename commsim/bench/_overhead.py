"""The executor's own cost per run, apart from the transport: time a run that moves nothing.

A backend's ``idle(nranks, dtype)`` is a program that moves no data through the same call path
as its schedules' programs (for MPI: one jitted call holding one ordered MPI effect, a
zero-element ``sendrecv`` of each rank with itself; for JAX: the same ``shard_map`` over the
same mesh on a one-element row). :func:`call_samples` times it exactly as the measurement loop
times a schedule (:func:`commsim.bench._loop._timed_runs`: barrier and slowest rank under MPI,
``k`` back-to-back runs per call where one run is short), so its median is what every measured
point carries on top of the transport: the dispatch of one call divided by ``k``, plus one loop
iteration and one custom call. The time of one un-batched call (JAX's dispatch with the effects
token, ``block_until_ready``) is in the samples' ``notes``.

``validate`` adds the median to a model's prediction to report the error with the overhead, and
leaves it out to report it without.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from commsim.bench._loop import _timed_runs
from commsim.bench._request import BenchRequest
from commsim.bench._timer import LocalTimer, MpiTimer, Timer
from commsim.bench.calibrate._samples import Samples
from commsim.errors import CommsimError
from commsim.exec import Backend, IdleRun, OnCommunicator, backend_info, get_backend, supports

__all__ = ["call_overhead", "call_samples"]


def call_samples(
    backend: Backend,
    nranks: int,
    *,
    iters: int = 50,
    warmup: int = 10,
    dtype: Any = "float32",
    timer: Timer | None = None,
) -> Samples:
    """``Samples`` of kind ``"call"`` (size 0): ``iters`` per-run times of ``backend``'s idle run.

    Under MPI call it on every rank (``timer`` defaults to an :class:`MpiTimer` on the backend's
    communicator there); every rank returns the same samples (the slowest rank's per run).
    """
    if not supports(backend, IdleRun):
        raise CommsimError(f"backend {backend.name!r} has no idle run to time its call overhead")
    if iters < 1 or warmup < 1:
        raise CommsimError(f"call overhead needs iters >= 1 and warmup >= 1, got {iters}, {warmup}")
    if timer is None:
        timer = MpiTimer(backend.comm) if supports(backend, OnCommunicator) else LocalTimer()
    compiled = backend.idle(nranks, dtype)
    request = BenchRequest(sizes=(0,), iters=iters, warmup=warmup, baseline=False, check=False)
    host = np.zeros((nranks, 0), dtype=np.dtype(dtype))
    per_run = _timed_runs(compiled, None, host, request, timer, None)[0]
    single = [timer.time(compiled.run, compiled.put(host))[1] for _ in range(warmup)]
    once = float(np.median(timer.slowest(np.array(single))))
    note = f"one un-batched call: {once * 1e6:.1f} us (the per-call dispatch)"
    return Samples("call", np.zeros(1), per_run[None, :], backend.name, nranks, notes=(note,))


def call_overhead(backend_name: str, nranks: int, **options: Any) -> float:
    """The median per-run overhead (seconds) of backend ``backend_name`` on ``nranks`` ranks.

    For an ``mpirun`` backend every rank of an ``mpirun -n nranks`` calls it; ``options`` go
    to :func:`call_samples`.
    """
    if backend_info(backend_name).multiprocess:
        from commsim.bench._ranks import under_mpirun

        if not under_mpirun():
            raise CommsimError(
                "the mpi backend's call overhead is measured on its ranks: call call_overhead "
                f"on every rank of `mpirun -n {nranks}`"
            )
    return float(np.median(call_samples(get_backend(backend_name), nranks, **options).times))
