"""Validation: run the schedules a model predicts fastest, and set measured beside predicted.

For each message size the model (any :class:`commsim.models.Model`) predicts every schedule and
picks the fastest; those schedules (or all of them) then run for real, on MPI processes through
:func:`commsim.bench.measure_mpi` or in this process through :func:`commsim.bench.measure`. Each
size gives one :class:`Validation`: the predicted winner, its prediction at the bytes that
actually ran (counts round down like nccl-tests), its measured median, the backend's own
collective, ``measured / predicted``, and which schedule was fastest for real — with every
schedule that ran predicted and measured beside it.

Ties are said, not hidden behind list order: the model's ties (predictions within a relative
1e-9 of the best, :data:`commsim.models.TIE_RTOL`: ring and direct allreduce cost the same) are ``predicted_ties``, and the
schedules whose measured interquartile range overlaps the fastest one's are ``measured_ties``
(their order can change from one run to the next), and schedules that are the same program as the
winner under another name (``identical``: ring, direct and Rabenseifner allreduce on 2 ranks) count
as the winner when ranking is judged. A prediction is only as good as its
parameters: ``measured / predicted`` says by how much the modelled machine differs from this one.

:func:`validate_tuned` judges a tuner the same way: each algorithm runs at each size with the
parameters the tuner found best for it there (``segments`` of a pipeline), and the pick is the
tuner's own choice, so ``ranked_right`` says whether :func:`commsim.tune`'s table chose what the
clock calls fastest.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from commsim._ir import Schedule
from commsim.bench._any import measure_any
from commsim.bench._error_interval import median_error_interval
from commsim.bench._launch import DEFAULT_TIMEOUT
from commsim.bench._measurement import Measurement
from commsim.bench._ranks import under_mpirun
from commsim.bench._request import BenchRequest
from commsim.errors import CommsimError
from commsim.exec import backend_info
from commsim.models import Model, fastest, tied

if TYPE_CHECKING:  # a sweep arrives built: bench never builds a schedule by name
    from commsim.tuner import Sweep

__all__ = [
    "AlgorithmAccuracy",
    "Validation",
    "ValidationSummary",
    "summarize",
    "validate",
    "validate_tuned",
]


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
    predicted: dict[str, float] = dataclasses.field(default_factory=dict)  # at nbytes, all ran
    spread: dict[str, float] = dataclasses.field(default_factory=dict)  # IQR / median, all ran
    predicted_ties: tuple[str, ...] = ()  # every schedule the model rates as fast as the best
    measured_ties: tuple[str, ...] = ()  # every schedule whose IQR overlaps the fastest one's
    overhead_s: float = 0.0  # the executor's measured per-call overhead (0: not known)
    host_native: str | None = None  # the library called directly, e.g. "MPI_Allreduce (mpi4py)"
    host_native_s: float | None = None  # its median: the transport's own time
    identical: tuple[str, ...] = ()  # other schedules that ran the winner's very transfers
    params: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)  # tuned, by name
    checks: dict[str, str] = dataclasses.field(default_factory=dict)  # every schedule's check
    iters: int = 0  # timed repeats behind each median (0: not known)

    @property
    def error(self) -> dict[str, float]:
        """Relative error of each prediction, ``(predicted - measured) / measured``."""
        return {a: _relative(self.predicted[a], t) for a, t in self.measured.items()}

    @property
    def error_with_overhead(self) -> dict[str, float]:
        """The same with the per-call overhead added to every prediction."""
        o = self.overhead_s
        return {a: _relative(self.predicted[a] + o, t) for a, t in self.measured.items()}

    @property
    def ranked_right(self) -> bool | None:
        """Did the model pick the measured winner, or one within its measurement spread? A schedule
        identical to the pick (:attr:`commsim.Schedule.fingerprint`) counts as the pick: which of
        two copies of one program measures faster is noise.
            ``None`` when fewer than two schedules ran (nothing to rank)."""
        if len(self.measured) < 2:
            return None
        right = {self.fastest_measured, *self.measured_ties}
        return any(a in right for a in (self.predicted_best, *self.identical))

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        return {
            **out,
            "predicted_ties": list(self.predicted_ties),
            "measured_ties": list(self.measured_ties),
            "error": self.error,
            "error_with_overhead": self.error_with_overhead,
            "ranked_right": self.ranked_right,
        }


def _relative(predicted: float, measured: float) -> float:
    return (predicted - measured) / measured if measured > 0 else float("nan")


@dataclasses.dataclass(frozen=True)
class AlgorithmAccuracy:
    """How well one algorithm's predictions matched, over the sizes it ran at."""

    algorithm: str
    points: int
    median_abs_error: float  # median over sizes of |predicted - measured| / measured
    median_abs_error_with_overhead: float  # the same, per-call overhead added to predictions
    median_spread: float  # the measurements' own IQR / median, median over sizes
    #: 95% interval of median_abs_error over the repeats (:func:`median_error_interval`)
    error_interval: tuple[float, float] = (float("nan"), float("nan"))


@dataclasses.dataclass(frozen=True)
class ValidationSummary:
    """Accuracy per algorithm, and how often the model ranked the winner right."""

    algorithms: tuple[AlgorithmAccuracy, ...]
    ranked_right: int  # sizes where the predicted winner was measured fastest or within spread
    ranked: int  # sizes where at least two schedules ran

    @property
    def ranking_share(self) -> float | None:
        return self.ranked_right / self.ranked if self.ranked else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "algorithms": [dataclasses.asdict(a) for a in self.algorithms],
            "ranked_right": self.ranked_right,
            "ranked": self.ranked,
            "ranking_share": self.ranking_share,
        }


def summarize(validations: Sequence[Validation]) -> ValidationSummary:
    """Median absolute relative error per algorithm (with and without the per-call overhead),
    its 95% interval over the measurement's repeats (:func:`median_error_interval`), the
    measurements' median spread beside it, and the share of sizes ranked right."""
    names = list(dict.fromkeys(a for v in validations for a in v.measured))
    rows = []
    for a in names:
        here = [v for v in validations if a in v.measured]
        err = np.abs([v.error[a] for v in here])
        err_o = np.abs([v.error_with_overhead[a] for v in here])
        spread = [v.spread.get(a, float("nan")) for v in here]
        interval = median_error_interval(
            np.array([v.predicted[a] for v in here]),
            np.array([v.measured[a] for v in here]),
            np.array(spread),
            min(v.iters for v in here),
        )
        accuracy = AlgorithmAccuracy(
            a, len(here), float(np.median(err)), float(np.median(err_o)), float(np.median(spread)),
            interval,
        )  # fmt: skip
        rows.append(accuracy)
    verdicts = [v.ranked_right for v in validations if v.ranked_right is not None]
    return ValidationSummary(tuple(rows), sum(verdicts), len(verdicts))


def _run(
    schedules: list[Schedule],
    backend: str,
    request: BenchRequest,
    timeout: float,
    progress: bool | None,
) -> list[Measurement]:
    """Measurements of every schedule, schedule-major, size-minor."""
    if backend_info(backend).multiprocess and under_mpirun():
        raise CommsimError("validate starts mpirun itself: run it without mpirun")
    return measure_any(schedules, backend, request, timeout=timeout, progress=progress)


def _overlapping(ran: dict[str, Measurement], fastest: str) -> tuple[str, ...]:
    """Schedules whose measured interquartile range reaches the fastest one's."""

    def iqr(m: Measurement) -> tuple[float, float]:
        if m.time_q1_s is not None and m.time_q3_s is not None:
            return m.time_q1_s, m.time_q3_s
        half = m.spread * m.time_s / 2  # a measurement from before quartiles were kept
        return m.time_s - half, m.time_s + half

    top = iqr(ran[fastest])[1]
    return tuple(a for a, m in ran.items() if iqr(m)[0] <= top)


def _one_size(
    model: Model,
    at_size: dict[str, Schedule],
    pick: str,
    ties: tuple[str, ...],
    ran: dict[str, Measurement],
    size: int,
    overhead: float,
    params: dict[str, dict[str, Any]] | None = None,
) -> Validation:
    """One size's :class:`Validation`: ``at_size[name]`` is the schedule that ran under ``name``,
    ``pick`` the model's (or the tuner's) choice."""
    m = ran[pick]
    # predict again at the bytes that actually ran (counts round down like nccl-tests)
    predicted = {a: float(model.predict(at_size[a], float(r.nbytes)).time) for a, r in ran.items()}
    t_pred = predicted[pick]
    measured = {a: r.time_s for a, r in ran.items()}
    best = min(measured, key=measured.__getitem__)
    mine = at_size[pick].fingerprint
    return Validation(
        size=size,
        nbytes=m.nbytes,
        predicted_best=pick,
        predicted_s=t_pred,
        measured_s=m.time_s,
        native=m.native,
        native_s=m.native_time_s,
        measured_over_predicted=m.time_s / t_pred if t_pred > 0 else None,
        fastest_measured=best,
        check=m.check,
        measured=measured,
        predicted=predicted,
        spread={a: r.spread for a, r in ran.items()},
        predicted_ties=ties,
        measured_ties=_overlapping(ran, best),
        overhead_s=overhead,
        host_native=m.host_native,
        host_native_s=m.host_native_time_s,
        identical=tuple(a for a in ran if a != pick and at_size[a].fingerprint == mine),
        params={a: dict(v) for a, v in (params or {}).items() if a in ran},
        checks={a: r.check for a, r in ran.items()},
        iters=min(r.iters for r in ran.values()),
    )


def _measure_plan(
    plan: Sequence[tuple[Schedule, tuple[int, ...]]],
    backend: str,
    request: BenchRequest,
    timeout: float,
    progress: bool | None,
) -> list[dict[int, Measurement]]:
    """Run each ``(schedule, size indices)`` of ``plan`` at its sizes; per plan entry, the
    measurement at each size index. Entries with the same sizes share one run (one ``mpirun``)."""
    groups: dict[tuple[int, ...], list[int]] = {}
    for k, (_, idx) in enumerate(plan):
        groups.setdefault(idx, []).append(k)
    out: list[dict[int, Measurement]] = [{} for _ in plan]
    for idx, members in groups.items():
        sub = dataclasses.replace(request, sizes=tuple(request.sizes[j] for j in idx))
        results = _run([plan[k][0] for k in members], backend, sub, timeout, progress)
        for m, k in enumerate(members):
            for n, j in enumerate(idx):
                out[k][j] = results[m * len(idx) + n]
    return out


def validate(
    schedules: Sequence[Schedule],
    model: Model,
    backend: str,
    request: BenchRequest,
    *,
    run_all: bool = False,
    timeout: float = DEFAULT_TIMEOUT,
    progress: bool | None = None,
    overhead: float = 0.0,
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
        overhead: the executor's per-call overhead in seconds (a profile's), for the errors
            :attr:`Validation.error_with_overhead`.

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
    tie = tied(predicted)  # [schedule, size]
    winners = fastest(predicted)  # the first of the ties
    run = list(range(len(schedules))) if run_all else list(dict.fromkeys(winners.tolist()))
    results = _run([schedules[i] for i in run], backend, request, timeout, progress)
    n, by_name = len(request.sizes), dict(zip(names, schedules, strict=True))
    out = []
    for j, size in enumerate(request.sizes):
        ran = {names[i]: results[k * n + j] for k, i in enumerate(run)}
        ties = tuple(names[i] for i in np.flatnonzero(tie[:, j]))
        out.append(_one_size(model, by_name, names[winners[j]], ties, ran, size, overhead))
    return out, results


def validate_tuned(
    result: Sweep,
    backend: str,
    request: BenchRequest,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    progress: bool | None = None,
    overhead: float = 0.0,
) -> tuple[list[Validation], list[Measurement]]:
    """Judge a tuner: at each size every algorithm of the sweep ``result`` runs with the
    parameters the tuner found best for it there (``segments`` per size), and the pick is the
    tuner's own choice (:meth:`commsim.tuner.Sweep.best`, what :func:`commsim.tune`'s table says).
    ``ranked_right`` then says whether the tuner's choice was measured fastest or within spread.

    ``request.sizes`` must be the sweep's sizes. A candidate runs only at the sizes where it is its
    algorithm's best, so a deep pipeline never runs at a size too small for it.
    """
    grid = [int(x) for x in result.sizes]
    if sorted(set(request.sizes)) != grid:
        raise CommsimError("validate_tuned: the request's sizes must be the sweep's sizes")
    j_of = {size: j for j, size in enumerate(grid)}
    cols = [j_of[s] for s in request.sizes]
    picks = result.best()[cols]
    names = list(dict.fromkeys(c.algorithm for c in result.candidates))
    chosen: dict[str, np.ndarray] = {a: result.best([a])[cols] for a in names}
    for col, k in enumerate(picks):  # the winning algorithm runs the tuner's very candidate
        chosen[result.candidates[k].algorithm][col] = k
    where: dict[int, list[int]] = {}
    for a in names:
        for col, k in enumerate(chosen[a].tolist()):
            if np.isfinite(result.times[k, cols[col]]):
                where.setdefault(k, []).append(col)
    plan = [(result.candidates[k].schedule, tuple(idx)) for k, idx in where.items()]
    measured = _measure_plan(plan, backend, request, timeout, progress)
    by_candidate = dict(zip(where, measured, strict=True))
    out = []
    for col, size in enumerate(request.sizes):
        here = {
            a: int(chosen[a][col])
            for a in names
            if col in by_candidate.get(int(chosen[a][col]), {})
        }
        ran = {a: by_candidate[k][col] for a, k in here.items()}
        at_size = {a: result.candidates[k].schedule for a, k in here.items()}
        times = np.array([[result.times[k, cols[col]]] for k in here.values()])
        ties = tuple(a for a, t in zip(here, tied(times)[:, 0], strict=True) if t)
        pick = result.candidates[int(picks[col])].algorithm
        params = {a: dict(result.candidates[k].params) for a, k in here.items()}
        out.append(_one_size(result.model, at_size, pick, ties, ran, size, overhead, params))
    raw = [m for k in where for m in by_candidate[k].values()]
    return out, raw
