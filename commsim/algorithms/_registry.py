"""The algorithm registry: one row per (collective, algorithm), swept by the tests.

A new algorithm is a factory ``fn(nranks, **params) -> Schedule`` decorated with
:func:`register`; it is then built by :func:`build`, listed by ``commsim algorithms``, verified,
cost-checked and executed by every registry-parametrized test. Factories build rooted collectives
for root 0; :func:`build` relabels ranks for any other root.

A row owns every property of its algorithm. Its cost is written twice, on purpose: once for
readers, in the factory docstring's ``.. math::`` block (from which the table's text, ``cost``,
is derived by :func:`commsim.algorithms.cost_text`), and once as code, the exact single-port
Hockney time ``cost_fn`` with the domain where it is exact (``exact``), so the registry sweep
(``tests/test_registry.py``) checks the formula against the model, the lower bound, the declared
transfer counts and every backend's results without naming the algorithm.
:func:`unregister` removes a row again (a test's temporary algorithm, a plug-in experiment).
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import numbers
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from commsim._collectives import COLLECTIVES, spec
from commsim._deprecation import warn_deprecated
from commsim._ir import MAX_NRANKS, Schedule
from commsim.algorithms._math import cost_text
from commsim.errors import ParameterError, ResourceError, ScheduleError, UnknownNameError

__all__ = [
    "REGISTRY",
    "AlgorithmInfo",
    "ChannelRanks",
    "CostFn",
    "Domain",
    "FloatOrArray",
    "available",
    "build",
    "every_p",
    "info",
    "register",
    "unregister",
]

Factory = Callable[..., Schedule]
FloatOrArray = float | np.ndarray
"""A message size or time: one number, or a numpy array of them (cost formulas take both)."""
CostFn = Callable[..., FloatOrArray]
"""``cost_fn(nranks, nbytes, alpha, beta, gamma, **params)``: the single-port Hockney time in
seconds (``nbytes`` a number or a numpy array of sizes; the result has its shape)."""
ChannelRanks = Callable[..., "np.ndarray | None"]
"""``channel_ranks(nranks, k, **params)``: ``[k, nranks]`` rank permutations, channel ``c``'s in
row ``c`` (``None``: no layout of its own for these parameters; the copies serve)."""
Domain = Callable[..., bool]
"""``exact(nranks, **params)``: whether ``cost_fn`` is the exact time for these arguments."""


def every_p(nranks: int, **params: Any) -> bool:
    """The domain of a formula that is exact for every ``p`` and every parameter value."""
    return True


@dataclasses.dataclass(frozen=True)
class AlgorithmInfo:
    """A registry row.

    Attributes:
        collective: the collective it computes.
        algorithm: registry name.
        factory: ``factory(nranks, **params)``, root 0 for rooted collectives.
        constraints: when it applies and what it does off its best case, for tables.
        params: parameter names and defaults (besides ``nranks`` and ``root``).
        reference: where the algorithm and its cost come from.
        cost_fn: the exact single-port Hockney time as code (see :data:`CostFn`), written from
            the factory docstring's ``.. math::``; the model must reproduce it where ``exact``.
        exact: where ``cost_fn`` is exact (see :data:`Domain`); elsewhere it is only an estimate.
        legacy_cost: the text a plug-in passed as the deprecated ``register(cost=...)``; shown
            only when its factory's docstring has no ``.. math::`` block.
        choices: the parameters that take one of a few named values, and those values (the
            default first), e.g. ``{"order": ("far_first", "near_first")}``: :func:`build`
            rejects any other value, the registry sweep checks every value and the tuner tries
            each one.
        helpers_for: for a row whose helper ranks are switches (in-network reduction,
            ``Schedule.in_network``): how many helpers ``w`` workers come with, so that a
            command line's ``-p`` can count the GPUs (:meth:`nranks_for`); ``None`` otherwise.
        channel_ranks: how the algorithm lays out ``k`` channels, or ``None`` (the generic
            copies, :func:`commsim.algorithms.channels`): ``channel_ranks(nranks, k, **params)``
            returns ``[k, nranks]`` rank permutations, channel ``c`` running the schedule with
            its ranks renamed by row ``c`` (:func:`commsim.algorithms.on_channels`, which every
            caller of channels goes through; only where renaming ranks keeps the collective:
            no root, no blocks per rank, i.e. allreduce).
    """

    collective: str
    algorithm: str
    factory: Factory
    constraints: str
    params: dict[str, Any]
    reference: str
    cost_fn: CostFn
    exact: Domain = every_p
    legacy_cost: str = ""
    choices: Mapping[str, tuple[Any, ...]] = dataclasses.field(default_factory=dict)
    helpers_for: Callable[[int], int] | None = None
    channel_ranks: ChannelRanks | None = None

    def nranks_for(self, workers: int) -> int:
        """The rank count that gives ``workers`` GPUs: ``workers`` plus the switch helpers of an
        in-network row (:attr:`helpers_for`), ``workers`` for every other row.

        Examples:
            >>> from commsim.algorithms import info
            >>> info("allreduce", "ring").nranks_for(8), info("allreduce", "nvls").nranks_for(8)
            (8, 16)
        """
        return workers + (self.helpers_for(workers) if self.helpers_for else 0)

    @property
    def doc(self) -> str:
        """The factory's docstring (its ``.. math::`` block states the cost)."""
        return inspect.getdoc(self.factory) or ""

    @property
    def cost(self) -> str:
        """The Hockney cost as plain text, for tables: the docstring's ``.. math::``, converted.

        Examples:
            >>> from commsim.algorithms import info
            >>> info("allgather", "ring").cost
            '(p-1)α + (p-1)/p·nβ'
        """
        return cost_text(self.doc) or self.legacy_cost

    def time(
        self,
        nranks: int,
        nbytes: FloatOrArray,
        alpha: float,
        beta: float,
        gamma: float,
        **params: Any,
    ) -> FloatOrArray:
        """``cost_fn`` with the row's default parameters for those not given.

        Examples:
            >>> from commsim.algorithms import info
            >>> info("broadcast", "chain").time(5, 800.0, 1.0, 0.01, 0.0)  # k = 8: 11 (α + 100 β)
            22.0
        """
        return self.cost_fn(nranks, nbytes, alpha, beta, gamma, **{**self.params, **params})

    def is_exact(self, nranks: int, **params: Any) -> bool:
        """``exact`` with the row's default parameters for those not given."""
        return bool(self.exact(nranks, **{**self.params, **params}))


REGISTRY: dict[tuple[str, str], AlgorithmInfo] = {}


def register(
    collective: str,
    name: str,
    *,
    cost_fn: CostFn,
    exact: Domain = every_p,
    constraints: str = "any p",
    reference: str = "",
    cost: str | None = None,
    choices: Mapping[str, tuple[Any, ...]] | None = None,
    helpers_for: Callable[[int], int] | None = None,
    channel_ranks: ChannelRanks | None = None,
) -> Callable[[Factory], Factory]:
    """Decorator adding ``fn`` to the registry under ``(collective, name)``.

    The cost formula is ``fn``'s docstring's ``.. math::`` block: the table's text
    (:attr:`AlgorithmInfo.cost`) is derived from it, and ``cost_fn`` is the same time as code.

    Args:
        collective: the collective ``fn`` computes.
        name: the algorithm's name (unique within the collective).
        cost_fn: the cost as code, ``cost_fn(nranks, nbytes, alpha, beta, gamma, **params)``,
            with the factory's parameters as keywords (their defaults when omitted).
        exact: ``exact(nranks, **params)``, where ``cost_fn`` is exact (default: every ``p``).
        constraints: when it applies and what it does off its best case, for tables.
        reference: where the algorithm and its cost come from.
        cost: deprecated (the text is derived from the docstring); shown only for a factory
            without a ``.. math::`` block.
        choices: parameters that take one of a few named values, with the values; each
            parameter's default must be among them (see :attr:`AlgorithmInfo.choices`).
        helpers_for: for rows whose helper ranks are switches, their count for ``w`` workers
            (see :attr:`AlgorithmInfo.helpers_for`).
        channel_ranks: the algorithm's own layout of ``k`` channels (see
            :attr:`AlgorithmInfo.channel_ranks`); only for allreduce, where renaming ranks keeps
            the collective.
    """
    if collective not in COLLECTIVES:
        raise ValueError(f"unknown collective {collective!r}")
    if channel_ranks is not None and (spec(collective).rooted or spec(collective).block_multiple):
        raise ValueError(
            f"{collective}/{name}: channel_ranks renames ranks, which keeps only a collective "
            "without a root or blocks per rank (allreduce)"
        )
    if cost is not None:
        warn_deprecated(
            "register(cost=...)",
            "the factory docstring's '.. math::' block (the table's cost text is derived from it)",
        )

    def deco(fn: Factory) -> Factory:
        sig = inspect.signature(fn)
        params = {
            k: v.default
            for k, v in sig.parameters.items()
            if k != "nranks" and v.default is not inspect.Parameter.empty
        }
        named = {k: tuple(v) for k, v in (choices or {}).items()}
        for k, values in named.items():
            if k not in params or params[k] not in values:
                raise ValueError(
                    f"{collective}/{name}: choices[{k!r}] must name a parameter and hold its default"
                )
            named[k] = (params[k], *(v for v in values if v != params[k]))
        key = (collective, name)
        old = REGISTRY.get(key)
        if old is not None and (old.factory.__qualname__, old.factory.__code__.co_filename) != (
            fn.__qualname__,
            fn.__code__.co_filename,
        ):  # the same module imported twice (doctest collection) re-registers harmlessly
            raise ValueError(f"{collective}/{name} registered twice")
        REGISTRY[key] = AlgorithmInfo(
            collective, name, fn, constraints, params, reference, cost_fn, exact, cost or "", named,
            helpers_for, channel_ranks,
        )  # fmt: skip
        return fn

    return deco


def unregister(collective: str, name: str) -> AlgorithmInfo:
    """Remove the row ``(collective, name)`` and return it (:class:`UnknownNameError` if absent).

    For rows added for a while: a test's toy algorithm, an experiment in a notebook.

    Examples:
        >>> row = info("allgather", "ring")
        >>> _ = register("allgather", "ring_again", cost_fn=row.cost_fn)(row.factory)
        >>> "ring_again" in available("allgather")
        True
        >>> unregister("allgather", "ring_again").factory is row.factory
        True
        >>> "ring_again" in available("allgather")
        False
    """
    row = info(collective, name)
    del REGISTRY[(collective, name)]
    return row


def _closest(word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(str(word), choices, n=3, cutoff=0.5)
    return f"did you mean {', '.join(close)}? " if close else ""


def _check_collective(collective: str) -> None:
    spec(collective)  # UnknownNameError suggesting the closest names


def available(collective: str | None = None) -> list[str]:
    """Algorithm names for ``collective`` (or ``"collective/name"`` for all when ``None``)."""
    if collective is None:
        return [f"{c}/{n}" for c, n in REGISTRY]
    _check_collective(collective)
    return [n for c, n in REGISTRY if c == collective]


def info(collective: str, algorithm: str) -> AlgorithmInfo:
    """The registry row, or :class:`UnknownNameError` suggesting the closest names."""
    _check_collective(collective)
    try:
        return REGISTRY[(collective, algorithm)]
    except KeyError:
        names = available(collective)
        raise UnknownNameError(
            f"unknown {collective} algorithm {algorithm!r}; {_closest(algorithm, names)}"
            f"available: {', '.join(names)}"
        ) from None


def _check_nranks(nranks: Any) -> int:
    if isinstance(nranks, bool) or not isinstance(nranks, numbers.Integral):
        if isinstance(nranks, float) and nranks.is_integer():
            return _check_nranks(int(nranks))
        raise ScheduleError(f"nranks must be an integer >= 1, got {nranks!r}")
    if nranks < 1:
        raise ScheduleError(f"nranks must be an integer >= 1, got {nranks}")
    if nranks > MAX_NRANKS:
        raise ScheduleError(f"nranks must be at most {MAX_NRANKS:,}, got {nranks:,}")
    return int(nranks)


def build(collective: str, algorithm: str, nranks: int, **params: Any) -> Schedule:
    """Build the schedule of ``algorithm`` for ``collective`` on ``nranks`` ranks.

    Args:
        collective: one of ``allreduce, reduce_scatter, allgather, broadcast, reduce, alltoall``.
        algorithm: a name from :func:`available`.
        nranks: number of ranks ``p >= 1``.
        **params: the algorithm's parameters (e.g. ``segments=8``), and ``root=`` for broadcast
            and reduce.

    Examples:
        >>> import commsim
        >>> s = commsim.build("allreduce", "ring", nranks=4)
        >>> s.nsteps, s.ntransfers
        (6, 24)
    """
    row = info(collective, algorithm)
    p = _check_nranks(nranks)
    root = params.pop("root", 0)
    rooted = spec(collective).rooted
    if not rooted and root != 0:
        raise ScheduleError(f"{collective} has no root (got root={root})")
    if rooted and (
        isinstance(root, bool) or not isinstance(root, numbers.Integral) or not 0 <= root < p
    ):
        raise ScheduleError(f"root must be an integer in [0, {p}), got {root!r}")
    unknown = sorted(set(params) - set(row.params))
    if unknown:
        accepted = ", ".join(row.params) or "none"
        raise ScheduleError(
            f"{collective}/{algorithm} has no parameter {', '.join(unknown)}; accepted: {accepted}"
        )
    for key, values in row.choices.items():
        if key in params and params[key] not in values:
            raise ParameterError(
                f"{collective}/{algorithm}: {key} must be one of {', '.join(map(str, values))}, "
                f"got {params[key]!r}"
            )
    try:
        schedule = row.factory(p, **params)
    except MemoryError:
        raise ResourceError(
            f"{collective}/{algorithm} on {p:,} ranks does not fit in memory"
        ) from None
    if rooted and root:
        from commsim.algorithms._combinators import with_root

        schedule = with_root(schedule, int(root))
    return schedule
