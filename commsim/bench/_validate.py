"""Validation: run the schedules a model predicts fastest, and set measured beside predicted.

For each message size the model (any :class:`commsim.models.Model`) predicts every schedule and
picks the fastest; those schedules (or all of them) then run for real, on MPI processes through
:func:`commsim.bench.measure_mpi` or in this process through :func:`commsim.bench.measure`. Each
size gives one :class:`Validation`: the predicted winner, its prediction at the bytes that
actually ran (counts round down like nccl-tests), its measured median, the backend's own
collective, ``measured / predicted``, and which schedule was fastest for real. A prediction is
only as good as its parameters: the ratio says by how much the modelled machine differs from
this one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from commsim import Schedule
from commsim.bench._launch import DEFAULT_TIMEOUT, measure_mpi
from commsim.bench._local import measure
from commsim.bench._measurement import Measurement
from commsim.bench._ranks import under_mpirun
from commsim.bench._request import BenchRequest
from commsim.errors import CommsimError
from commsim.models import Model

__all__ = ["Validation", "validate"]


@dataclasses.dataclass(frozen=True)
class Validation:
    """One message size: the predicted winner, predicted and measured (times in s)."""

    size: int  # bytes asked for
    nbytes: int  # bytes that ran
    predicted_best: str  # the winner's schedule.algorithm
    predicted_s: float  # the model's time for the winner at nbytes
    measured_s: float  # the winner's measured median
    native: str | None  # the backend's collective, e.g. "MPI_Allreduce"
    native_s: float | None
    measured_over_predicted: float | None
    fastest_measured: str
    check: str  # the winner's check: "ok", "skipped" or "FAILED"
    measured: dict[str, float]  # median of every schedule that ran, by algorithm

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _run(
    schedules: list[Schedule],
    backend: str,
    request: BenchRequest,
    timeout: float,
    progress: bool | None,
) -> list[Measurement]:
    """Measurements of every schedule, schedule-major, size-minor."""
    if backend == "mpi":
        if under_mpirun():
            raise CommsimError("validate starts mpirun itself: run it without mpirun")
        return measure_mpi(schedules, request, timeout=timeout, progress=progress)
    from commsim._compat import ensure_cpu_devices
    from commsim.exec import get_backend

    if backend == "jax":
        ensure_cpu_devices(schedules[0].nranks)
    be = get_backend(backend)
    return [m for s in schedules for m in measure(s, be, request, progress=progress)]


def _one_size(model: Model, winner: Schedule, ran: dict[str, Measurement], size: int) -> Validation:
    m = ran[winner.algorithm]
    # predict again at the bytes that actually ran (counts round down like nccl-tests)
    t_pred = float(model.predict(winner, float(m.nbytes)).time)
    measured = {a: r.time_s for a, r in ran.items()}
    return Validation(
        size=size,
        nbytes=m.nbytes,
        predicted_best=winner.algorithm,
        predicted_s=t_pred,
        measured_s=m.time_s,
        native=m.native,
        native_s=m.native_time_s,
        measured_over_predicted=m.time_s / t_pred if t_pred > 0 else None,
        fastest_measured=min(measured, key=measured.__getitem__),
        check=m.check,
        measured=measured,
    )


def validate(
    schedules: Sequence[Schedule],
    model: Model,
    backend: str,
    request: BenchRequest,
    *,
    run_all: bool = False,
    timeout: float = DEFAULT_TIMEOUT,
    progress: bool | None = None,
) -> tuple[list[Validation], list[Measurement]]:
    """Run the predicted-fastest schedules for real and compare with the prediction.

    Args:
        schedules: the candidates, one collective and ``nranks``, distinct ``algorithm`` names.
        model: predicts each schedule at each of ``request.sizes``.
        backend: ``"mpi"`` (``p`` processes started with ``mpirun``; refused when this process
            already runs under ``mpirun``), ``"numpy"``, ``"jax"`` or ``"cuda"``.
        request: sizes, dtype, runs, checks.
        run_all: run every schedule, not only the predicted winners.
        timeout: seconds for ``mpirun`` (MPI only).
        progress: a progress bar on stderr (``None``: on a terminal).

    Returns:
        One :class:`Validation` per size, and the raw :class:`Measurement` s of every schedule
        that ran (schedule-major, size-minor).
    """
    schedules = list(schedules)
    names = [s.algorithm for s in schedules]
    if not schedules:
        raise CommsimError("give at least one schedule to validate")
    if len(set(names)) < len(names):
        raise CommsimError(f"validate needs distinct algorithm names, got {', '.join(names)}")
    sizes = np.array(request.sizes, dtype=np.float64)
    predicted = np.array([np.reshape(model.predict(s, sizes).time, len(sizes)) for s in schedules])
    winners = [int(np.argmin(predicted[:, j])) for j in range(len(sizes))]  # first on ties
    run = list(range(len(schedules))) if run_all else list(dict.fromkeys(winners))
    results = _run([schedules[i] for i in run], backend, request, timeout, progress)
    n = len(request.sizes)
    out = []
    for j, size in enumerate(request.sizes):
        ran = {names[i]: results[k * n + j] for k, i in enumerate(run)}
        out.append(_one_size(model, schedules[winners[j]], ran, size))
    return out, results
