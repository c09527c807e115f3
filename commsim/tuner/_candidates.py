r"""The candidates a tuner compares: each algorithm with each parameter value worth trying.

A registry parameter is **fixed** (its default, or a value the user gives; a tuple is one value,
``dims=(4, 4)``), **listed** (the user gives a list: every value is a candidate), or **grown**: a
parameter of :data:`GROWN` that the user did not set is tried at 1, 2, 4, … (``segments``,
the pipeline depth of ``chain``, ``double_binary_tree`` and ``nccl_tree``; ``pipeline``, the
chunks of the hierarchical rows' phases, :func:`commsim.algorithms.pipeline`). A pipeline of
:math:`k` segments on a vector of :math:`n` bytes costs about :math:`(d + k)(\alpha + n\beta/k)`
for a depth :math:`d`, so its best :math:`k \approx \sqrt{d\,n\beta/\alpha}` grows with
:math:`n`: one count cannot serve every size (NCCL pipelines chunks of a fixed size instead).

Growth is capped before anything is predicted, at the last value that is neither

* **too fine for every size**: its smallest data slot would hold fewer than ``min_slot_bytes``
  bytes even at the largest size (a segment smaller than that is all latency, and real
  implementations do not cut finer), nor
* **too costly to evaluate**: its ``nsteps · max(nranks, 64)`` exceeds ``max_work`` (a model's
  time is about linear in the steps times the ranks, with a per-step overhead worth some 64
  ranks; growth doubles the steps, so all values together cost below twice the last one), nor
* **refused by the row**: a value its factory rejects (``pipeline`` above
  :data:`commsim.algorithms._pipeline.MAX_CHUNKS`) ends the family.

The sweep then stops a family early, at the first value that improves no size over the one
before (a pipeline's time is unimodal in its depth at each size, and the best depth grows
with the size, so a value that helps nowhere is followed by none that helps).

A grown value above the first is also only *eligible* at sizes where its smallest slot holds at
least ``min_slot_bytes`` (:attr:`Candidate.min_bytes`), so small sizes never get thousands of
sub-kilobyte segments; the first value (one segment) is eligible at every size. Where a row has
two growable parameters (``nccl_tree``: ``segments``, then ``pipeline``), only the first grows
(and nothing grows when the user sets it); the others stay at their first value (their default:
left out of the candidate's parameters) unless listed.

A parameter with **declared choices** (a registry row's :attr:`~commsim.algorithms.AlgorithmInfo.choices`,
such as Rabenseifner's ``order = "far_first" | "near_first"``) that the user did not set is
tried at each of its values, as if listed: the choice is the algorithm's, and which value wins
depends on the network (under Hockney the orders tie, and the first, the default, is kept).

Other parameters (``ranks_per_node``, ``dims``, ``inter``) describe the machine or a structural
choice, so they stay fixed unless listed.

A schedule with **helper ranks** (IR rule 7: ranks that hold no data, such as the
``parameter_server`` row's ``placement="dedicated"``) is never a candidate: it reduces the data
of fewer ranks than the collective the tuner is asked for.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from commsim._ir import Schedule
from commsim.algorithms import build, info
from commsim.errors import ParameterError, ScheduleError

__all__ = [
    "GROWN",
    "MAX_WORK",
    "MIN_SLOT_BYTES",
    "Candidate",
    "check_params",
    "families",
    "work",
]

#: parameters the tuner grows by doubling from their first value when the user does not set them
GROWN: Mapping[str, int] = {"segments": 1, "pipeline": 1}
#: the most work (``nsteps · max(nranks, 64)``) a grown candidate may take to evaluate
MAX_WORK = 1 << 22
#: the fewest bytes a grown candidate's smallest data slot may hold at a size it is used for
MIN_SLOT_BYTES = 1024
_STEP_OVERHEAD_RANKS = 64  # a step's fixed cost in a model, in ranks' worth of array work
_MAX_GROWTH = 40  # doublings: a bound that only a schedule of constant size could reach


@dataclasses.dataclass(frozen=True, eq=False)
class Candidate:
    """One algorithm with one full set of parameters, built; eligible at ``nbytes >= min_bytes``."""

    algorithm: str
    params: Mapping[str, Any]
    schedule: Schedule
    min_bytes: float = 0.0


def work(schedule: Schedule) -> int:
    """What evaluating ``schedule`` costs, in the progress bar's units (steps × ranks, a step
    counted as at least 64 ranks)."""
    return schedule.nsteps * max(schedule.nranks, _STEP_OVERHEAD_RANKS)


def check_params(
    collective: str, algorithms: Sequence[str], params: Mapping[str, Mapping[str, Any]] | None
) -> dict[str, dict[str, Any]]:
    """``params`` per algorithm, checked: every name a chosen algorithm, every key one of its
    parameters, every list non-empty (one-line :class:`ParameterError` otherwise)."""
    params = dict(params or {})
    out: dict[str, dict[str, Any]] = {a: {} for a in algorithms}
    for name, given in params.items():
        if name not in out:
            raise ParameterError(
                f"params: {name!r} is not one of the algorithms tuned ({', '.join(algorithms)})"
            )
        if not isinstance(given, Mapping):
            raise ParameterError(
                f"params[{name!r}] must map parameter names to values, got {given!r}"
            )
        accepted = info(collective, name).params
        for key, value in given.items():
            if key not in accepted:
                raise ParameterError(
                    f"params[{name!r}]: {collective}/{name} has no parameter {key!r}; "
                    f"accepted: {', '.join(accepted) or 'none'}"
                )
            if isinstance(value, list) and not value:
                raise ParameterError(f"params[{name!r}][{key!r}]: the list of values is empty")
        out[name] = dict(given)
    return out


def families(
    collective: str,
    nranks: int,
    algorithm: str,
    given: Mapping[str, Any],
    largest: float,
    *,
    ranks_per_node: int | None = None,
    max_work: int = MAX_WORK,
    min_slot_bytes: float = MIN_SLOT_BYTES,
    switch_rows: bool = False,
) -> list[list[Candidate]]:
    """The candidates of ``algorithm`` (the module docstring says which), in families: one per
    combination of listed values, its members the grown parameter's values in increasing order
    (a family of one when nothing grows). ``given`` holds the user's values (a list: candidates;
    anything else, a tuple included: fixed), ``largest`` is the largest size tuned for, and
    ``ranks_per_node`` the network's (used where not given).

    A row with helper ranks has no candidates (its ``nranks`` ranks would not all hold data),
    except, with ``switch_rows``, an in-network row (helpers at reducing switches,
    :attr:`~commsim.algorithms.AlgorithmInfo.helpers_for`): it is built on ``nranks`` GPUs
    and their switches' helpers (:meth:`~commsim.algorithms.AlgorithmInfo.nranks_for`), for a
    model that places helpers on reducing switches."""
    row = info(collective, algorithm)
    on_switches = switch_rows and row.helpers_for is not None
    if on_switches:
        nranks = row.nranks_for(nranks)
    defaults = row.params
    fixed = {k: v for k, v in defaults.items() if k not in GROWN}
    if ranks_per_node is not None and "ranks_per_node" in defaults:
        fixed["ranks_per_node"] = ranks_per_node
    growable = [k for k in defaults if k in GROWN]  # the first grows, unless the user set it
    grown = growable[:1] if growable and growable[0] not in given else []
    fixed.update({k: GROWN[k] for k in growable[1:] if k not in given and GROWN[k] != defaults[k]})
    listed = {k: list(v) for k, v in row.choices.items() if k not in given}
    listed.update({k: v for k, v in given.items() if isinstance(v, list)})
    fixed.update({k: v for k, v in given.items() if k not in listed})
    out = []
    for values in itertools.product(*listed.values()):
        base = {**fixed, **dict(zip(listed, values, strict=True))}
        if not grown:
            schedule = build(collective, algorithm, nranks, **base)
            if on_switches or not schedule.helpers:  # helpers hold no data (docstring)
                out.append([Candidate(algorithm, base, schedule)])
            continue
        family = _grow(
            collective, nranks, algorithm, base, grown[0], largest, max_work, min_slot_bytes,
            on_switches,
        )  # fmt: skip
        if family:  # empty: helper ranks (a switch's), not this collective on p ranks
            out.append(family)
    if not out and row.helpers_for is not None:
        raise ScheduleError(
            f"{algorithm}'s helper ranks sit at a reducing switch, and this model has none to "
            "place them on (a cluster whose NVSwitch reduces: nvls = true, as dgx-h100; whose "
            "InfiniBand leaves do: sharp = true)"
        )
    return out


def _grow(
    collective: str,
    nranks: int,
    algorithm: str,
    base: Mapping[str, Any],
    key: str,
    largest: float,
    max_work: int,
    min_slot_bytes: float,
    on_switches: bool = False,
) -> list[Candidate]:
    """``base`` with ``key`` doubled from its first value until a cap (the module docstring);
    none for a row with helper ranks unless they sit ``on_switches`` (:func:`families`)."""
    out: list[Candidate] = []
    for value in (GROWN[key] << i for i in range(_MAX_GROWTH)):
        params = {**base, key: value}
        try:
            schedule = build(collective, algorithm, nranks, **params)
        except ParameterError:
            if not out:  # the first value is the user's problem; a later one is past the row's cap
                raise
            break
        if schedule.helpers and not on_switches:  # helpers hold no data (:func:`families`)
            return []
        if not out:
            out.append(Candidate(algorithm, params, schedule))
            continue
        need = min_slot_bytes / _smallest_slot_share(schedule)
        if need > largest or work(schedule) > max_work:
            break
        out.append(Candidate(algorithm, params, schedule, need))
    return out


def _smallest_slot_share(schedule: Schedule) -> float:
    """The fraction of ``nbytes`` that the smallest data slot holds."""
    data = schedule.slot_units[: schedule.ndata]
    return float(data.min()) / schedule.nbytes_units
