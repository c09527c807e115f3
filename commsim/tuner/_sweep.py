"""The search: every candidate predicted at every size at once, and the best per size.

A model's ``predict`` is vectorized over sizes, so each candidate schedule is walked once for the
whole sweep: the cost is one pass per candidate, ``O(transfers · sizes)`` array work, and the
progress bar counts the steps walked, weighted by ranks (as ``commsim compare`` does). A family
of pipeline depths (``segments`` or ``pipeline`` = 1, 2, 4, …) is walked in increasing order and stops at the
first depth that improves no size over the shallower ones: a pipeline's time is unimodal in its
depth at each size, so no deeper one would win either (the bar skips their planned work). The result
is a matrix ``times[candidate, size]`` (``inf`` where a candidate is not eligible, see
:mod:`commsim.tuner._candidates`); the table is its argmin per size, and ``commsim compare --tune``
reads the best candidate of each algorithm per size from it.

Channels (``channels=(1, 2, 4)``) are a parameter of the collective library, not of the
algorithm: each candidate is also tried on C channels, each on 1/C of the buffer, laid out as
its registry row says (:func:`commsim.algorithms.on_channels`: spread over the servers' NICs
for ``snake_ring`` and ``nccl_tree``, copies otherwise; NCCL's channels), recorded as
``channels = C`` in
its parameters (C = 1 adds nothing, so a sweep without channels is unchanged); ties go to fewer
channels.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from commsim._ir import Schedule
from commsim._progress import Progress
from commsim.algorithms import available, info, on_channels
from commsim.errors import ParameterError, ResourceError, ScheduleError
from commsim.models import Model, as_sizes, fastest
from commsim.tuner._candidates import (
    MAX_WORK,
    MIN_SLOT_BYTES,
    Candidate,
    check_params,
    families,
    work,
)

__all__ = ["CHANNELS", "Sweep", "channel_counts", "evaluate", "size_grid", "sweep"]

#: the parameter a candidate's channel count is recorded under (a library parameter: every
#: algorithm takes it, :meth:`TunerTable.schedule <commsim.tuner.TunerTable.schedule>` applies it)
CHANNELS = "channels"


def channel_counts(largest: int) -> tuple[int, ...]:
    """The channel counts the tuner tries up to ``largest``: 1, 2, 4, ... (powers of two) and
    ``largest`` itself.

    Examples:
        >>> channel_counts(1), channel_counts(8), channel_counts(6)
        ((1,), (1, 2, 4, 8), (1, 2, 4, 6))
    """
    if isinstance(largest, bool) or not isinstance(largest, int | np.integer) or largest < 1:
        raise ParameterError(f"channels must be an integer >= 1, got {largest!r}")
    counts = [1 << k for k in range(int(largest).bit_length()) if 1 << k < largest]
    return (*counts, int(largest))


@dataclasses.dataclass(frozen=True, eq=False)
class Sweep:
    """Predicted ``times[i, j]`` of ``candidates[i]`` at ``sizes[j]`` (s; ``inf``: not eligible),
    and the algorithms ``skipped`` with why (they could not be built on ``nranks`` ranks);
    ``protocols[i, j]`` the protocol each prediction used when the model chooses one per size
    (:class:`commsim.models.ProtocolChoice`), else ``None``."""

    collective: str
    nranks: int
    model: Model
    sizes: np.ndarray
    candidates: tuple[Candidate, ...]
    times: np.ndarray
    skipped: Mapping[str, str]
    protocols: np.ndarray | None = None  # [candidate, size]: the protocol that won, if chosen

    def best(self, algorithms: Sequence[str] | None = None) -> np.ndarray:
        """Per size, the index of the fastest candidate (of ``algorithms`` only, if given; ties,
        within :data:`commsim.models.TIE_RTOL`, go to the earlier candidate: registry order,
        then fewer segments, as ``commsim validate`` breaks them)."""
        times = self.times
        if algorithms is not None:
            keep = np.array([c.algorithm in algorithms for c in self.candidates])
            times = np.where(keep[:, None], times, np.inf)
        return fastest(times)

    def runner_up(self, winners: np.ndarray) -> np.ndarray:
        """Per size, the fastest candidate of an algorithm other than the winner's (``-1`` when
        no other algorithm took part)."""
        names = np.array([c.algorithm for c in self.candidates])
        other = names[:, None] != names[winners][None, :]
        times = np.where(other, self.times, np.inf)
        best = np.argmin(times, axis=0)
        return np.where(np.isfinite(times[best, np.arange(len(best))]), best, -1)


def size_grid(sizes: Any) -> np.ndarray:
    """Sizes as sorted distinct whole bytes, read as every model reads them
    (:func:`commsim.models.as_sizes`: a unit string, a number or a 1-D array)."""
    values, _ = as_sizes(sizes)
    if np.any(values != np.round(values)):
        raise ParameterError("sizes must be whole numbers of bytes")
    return np.unique(values)


def sweep(
    collective: str,
    model: Model,
    nranks: int,
    sizes: Any,
    *,
    algorithms: Sequence[str] | None = None,
    params: Mapping[str, Mapping[str, Any]] | None = None,
    ranks_per_node: int | None = None,
    progress: bool | None = False,
    max_work: int = MAX_WORK,
    min_slot_bytes: float = MIN_SLOT_BYTES,
    channels: Sequence[int] = (1,),
    check: Callable[[Schedule], None] | None = None,
    switch_rows: bool | None = None,
) -> Sweep:
    """Predict every candidate of ``algorithms`` (default: all of the collective's) at ``sizes``.

    Args:
        collective: the collective to tune.
        model: the cost model (:class:`commsim.models.Model`).
        nranks: ranks.
        sizes: bytes, or a unit string.
        algorithms: the algorithms to consider (default: every registered one).
        params: per algorithm, parameter values: a list is a list of candidates, any other
            value (a tuple included) is fixed (``{"nccl_tree": {"segments": [4, 16, 64]}}``).
        ranks_per_node: the network's, for algorithms that take it and were not given it.
        progress: ``True`` a bar on stderr, ``False`` none, ``None`` one for long runs.
        max_work, min_slot_bytes: where growing ``segments`` stops (see
            :mod:`commsim.tuner._candidates`).
        channels: the channel counts to try per candidate (default ``(1,)``; see the module
            docstring and :func:`channel_counts`).
        check: called on every candidate's schedule before anything is predicted (the CLI's
            memory budget); a candidate it refuses (:class:`~commsim.errors.ResourceError`) is
            left out, and an algorithm with none left is skipped with its sentence as the note.
        switch_rows: tune in-network rows (``nvls``: ``nranks`` GPUs plus their switch
            helpers) on a model that places them; ``None``: named rows where the model does
            (:func:`_with_switch_rows`).
    """
    chosen, given = _chosen(collective, algorithms, params, nranks)
    chosen, switch_rows = _with_switch_rows(collective, chosen, algorithms, model, switch_rows)
    grid = size_grid(sizes)
    counts = tuple(dict.fromkeys(channel_counts(c)[-1] for c in channels))
    if not counts:
        raise ParameterError("channels: give at least one channel count")
    planned: list[list[Candidate]] = []
    skipped: dict[str, str] = {}
    for a in chosen:
        try:
            found = families(
                collective,
                nranks,
                a,
                given[a],
                float(grid[-1]),
                ranks_per_node=ranks_per_node,
                max_work=max_work,
                min_slot_bytes=min_slot_bytes,
                switch_rows=switch_rows,
            )
            mine = [_on_channels(family, c) for family in found for c in counts]
            planned += _checked(mine, check)
        except (ScheduleError, ResourceError) as e:
            if given[a]:  # the user's own parameters for it: their error, not a note
                raise
            skipped[a] = str(e).splitlines()[0]
    if not planned:
        raise _none_left(f"no {collective} algorithm can be built on {nranks} ranks", skipped)
    label = f"tune {collective} p={nranks}"
    kept, rows, protos = _predict_families(model, planned, grid, label, progress, skipped)
    if not kept:
        raise _none_left(f"no {collective} algorithm could be predicted on {nranks} ranks", skipped)
    chosen_protocols = (
        np.array(protos, dtype=object) if protos and all(p is not None for p in protos) else None
    )
    return Sweep(
        collective, nranks, model, grid, tuple(kept), np.array(rows), skipped, chosen_protocols
    )


def _none_left(what: str, skipped: Mapping[str, str]) -> ParameterError:
    """The error of a sweep with nothing left: ``what``, then each algorithm's reason."""
    return ParameterError(f"{what}: " + "; ".join(f"{a}: {why}" for a, why in skipped.items()))


def _with_switch_rows(
    collective: str,
    chosen: tuple[str, ...],
    algorithms: Sequence[str] | None,
    model: Model,
    switch_rows: bool | None,
) -> tuple[tuple[str, ...], bool]:
    """``switch_rows`` decided (``None``: named rows on a model that places switch helpers),
    and the default list without in-network rows unless they are tuned (as ``compare``'s)."""
    if switch_rows is None:
        switch_rows = algorithms is not None and bool(getattr(model, "places_in_network", False))
    if algorithms is None and not switch_rows:
        chosen = tuple(a for a in chosen if info(collective, a).helpers_for is None)
    return chosen, switch_rows


def _chosen(
    collective: str,
    algorithms: Sequence[str] | None,
    params: Mapping[str, Mapping[str, Any]] | None,
    nranks: Any,
) -> tuple[tuple[str, ...], dict[str, dict[str, Any]]]:
    """The algorithms to tune (each known) and their checked parameters; ``nranks`` checked."""
    names = available(collective)  # UnknownNameError for an unknown collective
    chosen = tuple(dict.fromkeys(algorithms)) if algorithms is not None else tuple(names)
    for a in chosen:
        info(collective, a)  # UnknownNameError with the closest names
    if not chosen:
        raise ParameterError(f"no {collective} algorithm to tune")
    given = check_params(collective, chosen, params)
    if isinstance(nranks, bool) or not isinstance(nranks, (int, np.integer)) or nranks < 1:
        raise ParameterError(f"nranks must be an integer >= 1, got {nranks!r}")
    return chosen, given


def _predict_families(
    model: Model,
    planned: list[list[Candidate]],
    grid: np.ndarray,
    label: str,
    progress: bool | None,
    skipped: dict[str, str],
) -> tuple[list[Candidate], list[np.ndarray], list[tuple[str, ...] | None]]:
    """Predict each family's members in order, stopping a family at the first member that
    improves no size, or that the model refuses (:class:`~commsim.errors.ResourceError`:
    flow's effort limit; deeper members cost more); the candidates predicted, their times and
    their protocols. A family refused at its first member is noted in ``skipped``."""
    total = sum(work(c.schedule) for family in planned for c in family)
    kept: list[Candidate] = []
    rows: list[np.ndarray] = []
    protos: list[tuple[str, ...] | None] = []
    with Progress(total, label, enabled=progress, count=False) as bar:
        for family in planned:
            previous = None
            for k, c in enumerate(family):
                try:
                    times, used = _predict(model, c, grid, bar)
                except ResourceError as e:
                    if k == 0:
                        skipped.setdefault(c.algorithm, str(e).splitlines()[0])
                    bar.update(sum(work(x.schedule) for x in family[k + 1 :]))
                    break
                kept.append(c)
                rows.append(times)
                protos.append(used)
                if previous is not None and not np.any(times < previous):
                    bar.update(sum(work(x.schedule) for x in family[k + 1 :]))
                    break  # deeper pipelines help nowhere either (the module docstring)
                previous = np.minimum(previous, times) if previous is not None else times
    return kept, rows, protos


def _checked(
    planned: list[list[Candidate]], check: Callable[[Schedule], None] | None
) -> list[list[Candidate]]:
    """``planned`` without the candidates ``check`` refuses; the first refusal is raised when
    none is left (the algorithm is then skipped with that sentence)."""
    if check is None:
        return planned
    kept: list[list[Candidate]] = []
    first: ResourceError | None = None
    for family in planned:
        fits = []
        for c in family:
            try:
                check(c.schedule)
            except ResourceError as e:
                first = first or e
                break  # a family grows: the members after this one need more
            fits.append(c)
        if fits:
            kept.append(fits)
    if not kept and first is not None:
        raise first
    return kept


def _on_channels(family: list[Candidate], k: int) -> list[Candidate]:
    """``family`` as ``k`` copies on their own channels (itself for ``k = 1``); a candidate's
    smallest eligible size grows with its slots (each split ``k`` ways)."""
    if k == 1:
        return family
    return [
        Candidate(
            c.algorithm, {**c.params, CHANNELS: k}, on_channels(c.schedule, k), c.min_bytes * k
        )
        for c in family
    ]


def _predict(
    model: Model, c: Candidate, grid: np.ndarray, bar: Progress
) -> tuple[np.ndarray, tuple[str, ...] | None]:
    """``c``'s times at ``grid`` (``inf`` where it is not eligible), and the protocol of each
    (``None`` when the model has none); the bar advances by its
    :func:`~commsim.tuner._candidates.work` (ranks per step pulled, and at few ranks the steps'
    fixed cost up front)."""
    s = c.schedule
    bar.update(work(s) - s.nsteps * s.nranks, note=c.algorithm)
    label = f"{c.algorithm} {_short(c.params)}".rstrip()
    pred = model.predict(bar.track(s, label), grid)
    times = np.asarray(pred.time, dtype=np.float64)
    used = None
    if pred.protocol is not None:
        used = tuple(str(x) for x in np.atleast_1d(np.asarray(pred.protocol, dtype=object)))
    return np.where(grid >= c.min_bytes, np.atleast_1d(times), np.inf), used


def _short(params: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items())


def evaluate(model: Model, candidate: Candidate, nbytes: np.ndarray) -> np.ndarray:
    """``candidate``'s predicted times at ``nbytes`` (one pass over its schedule)."""
    return np.atleast_1d(np.asarray(model.predict(candidate.schedule, nbytes).time, float))
