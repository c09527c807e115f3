"""The algorithm registry: one row per (collective, algorithm), swept by the tests.

A new algorithm is a factory ``fn(nranks, **params) -> Schedule`` decorated with
:func:`register`; it is then built by :func:`build`, listed by ``commsim algorithms``, verified,
cost-checked and executed by every registry-parametrized test. Factories build rooted collectives
for root 0; :func:`build` relabels ranks for any other root.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import numbers
from collections.abc import Callable
from typing import Any

from commsim._collectives import COLLECTIVES, spec
from commsim._ir import Schedule
from commsim.errors import ScheduleError, UnknownNameError

__all__ = ["REGISTRY", "AlgorithmInfo", "available", "build", "info", "register"]

Factory = Callable[..., Schedule]


@dataclasses.dataclass(frozen=True)
class AlgorithmInfo:
    """A registry row.

    Attributes:
        collective: the collective it computes.
        algorithm: registry name.
        factory: ``factory(nranks, **params)``, root 0 for rooted collectives.
        cost: the Hockney cost in plain text, for tables (the docstring has the exact form).
        constraints: when it applies and what it does off its best case, for tables.
        params: parameter names and defaults (besides ``nranks`` and ``root``).
        reference: where the algorithm and its cost come from.
    """

    collective: str
    algorithm: str
    factory: Factory
    cost: str
    constraints: str
    params: dict[str, Any]
    reference: str

    @property
    def doc(self) -> str:
        return inspect.getdoc(self.factory) or ""


REGISTRY: dict[tuple[str, str], AlgorithmInfo] = {}


def register(
    collective: str, name: str, *, cost: str, constraints: str = "any p", reference: str = ""
) -> Callable[[Factory], Factory]:
    """Decorator adding ``fn`` to the registry under ``(collective, name)``."""
    if collective not in COLLECTIVES:
        raise ValueError(f"unknown collective {collective!r}")

    def deco(fn: Factory) -> Factory:
        sig = inspect.signature(fn)
        params = {
            k: v.default
            for k, v in sig.parameters.items()
            if k != "nranks" and v.default is not inspect.Parameter.empty
        }
        key = (collective, name)
        old = REGISTRY.get(key)
        if old is not None and (old.factory.__qualname__, old.factory.__code__.co_filename) != (
            fn.__qualname__,
            fn.__code__.co_filename,
        ):  # the same module imported twice (doctest collection) re-registers harmlessly
            raise ValueError(f"{collective}/{name} registered twice")
        REGISTRY[key] = AlgorithmInfo(collective, name, fn, cost, constraints, params, reference)
        return fn

    return deco


def _closest(word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=3, cutoff=0.5)
    return f"did you mean {', '.join(close)}? " if close else ""


def _check_collective(collective: str) -> None:
    if collective not in COLLECTIVES:
        raise UnknownNameError(
            f"unknown collective {collective!r}; {_closest(collective, list(COLLECTIVES))}"
            f"known: {', '.join(COLLECTIVES)}"
        )


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
    schedule = row.factory(p, **params)
    if rooted and root:
        from commsim.algorithms._combinators import with_root

        schedule = with_root(schedule, int(root))
    return schedule
