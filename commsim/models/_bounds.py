r"""Lower bounds on any algorithm's α-β-γ time (Chan, Heimlich, Purkayastha & van de Geijn,
"Collective communication: theory, practice, and experience", CCPE 19(13), 2007, Table 1).

With :math:`p` ranks, message size :math:`n` (the collective's ``nbytes`` convention) and
:math:`\lceil \lg p \rceil` the fewest steps in which information can reach every rank, the bound
is :math:`\lceil\lg p\rceil\alpha + f_\beta(p)\,n\beta + f_\gamma(p)\,n\gamma`, with the factors
on each collective's :class:`~commsim.CollectiveSpec` (``bound_beta``, ``bound_gamma``):

=============== ======================================================================
broadcast       :math:`\lceil\lg p\rceil\alpha + n\beta`
reduce          :math:`\lceil\lg p\rceil\alpha + n\beta + \frac{p-1}{p}n\gamma`
allgather       :math:`\lceil\lg p\rceil\alpha + \frac{p-1}{p}n\beta`
reduce_scatter  :math:`\lceil\lg p\rceil\alpha + \frac{p-1}{p}n\beta + \frac{p-1}{p}n\gamma`
allreduce       :math:`\lceil\lg p\rceil\alpha + 2\frac{p-1}{p}n\beta + \frac{p-1}{p}n\gamma`
alltoall        :math:`\lceil\lg p\rceil\alpha + \frac{p-1}{p}n\beta` (each rank must send its
                :math:`p-1` foreign blocks)
=============== ======================================================================

**Helper ranks** (IR rule 7: ``h`` of the ``p`` ranks hold no data, ``w = p - h`` workers) change
the argument: data must reach ``w`` workers (:math:`\lceil\lg w\rceil` latencies); helpers may
reduce, so the :math:`(w-1)n` element reductions spread over all ``p`` ranks
(:math:`f_\gamma(w)\,\frac{w}{p}`); and a worker need only receive each element once, already
reduced by a helper (in-network reduction does exactly that), so the β factor is
:math:`\min(f_\beta(w), 1)` for :math:`w \ge 2` and 0 for one worker.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from commsim._collectives import spec

__all__ = ["bound_of", "lower_bound", "model_bound"]

#: What a model's bound is called when it cannot account for helper ranks (it is then 0).
NO_HELPER_BOUND = "none (0): this model's bound does not take helper ranks"


def _rounds(p: int, ports: int) -> int:
    """``⌈log_{k+1} p⌉`` exactly (integers): rounds for data from one rank to reach all ``p``."""
    rounds, reached = 0, 1
    while reached < p:
        reached *= ports + 1
        rounds += 1
    return rounds


def lower_bound(
    collective: str,
    p: int,
    n: Any,
    alpha: float,
    beta: float,
    gamma: float,
    *,
    ports: int = 1,
    links: int = 1,
    helpers: int = 0,
) -> Any:
    r"""The Chan et al. 2007 lower bound for ``collective`` on ``p`` ranks and ``n`` bytes.

    ``n`` may be an array of sizes (the result is then an array). With ``ports = k`` that share
    a rank's link, data reaches at most ``k + 1`` times as many ranks per latency, so the latency
    term is :math:`\lceil\log_{k+1} p\rceil\alpha`; the β and γ terms are unchanged. With
    ``links = L`` independent links per rank, each with its own β (the injection bound: every
    byte a rank must send or receive goes through one of its ``L`` links), the β term is divided
    by ``L`` and the latency term is :math:`\lceil\log_{L+1} p\rceil\alpha` (Bruck et al.
    1997's k-port model); the γ term is divided by ``L`` too, since a model with ``L`` ports
    reduces what arrives on each port concurrently (a GPU's reduce-copy kernels on separate
    channels). ``helpers`` of the ``p`` ranks hold no data (IR rule 7; the module docstring
    gives the bound then). Raises
    :class:`commsim.CommsimError` for an unknown collective, ``p < 1``, a negative size or
    parameter, or helpers outside ``[0, p)``.

    Examples:
        >>> lower_bound("allreduce", 4, 1000.0, 1.0, 0.001, 0.0)
        3.5
        >>> lower_bound("allreduce", 4, 1000.0, 1.0, 0.001, 0.0, helpers=2)  # lg 2 + 1000 β
        2.0
    """
    from commsim.errors import CommsimError

    sp = spec(collective)
    if isinstance(p, bool) or not isinstance(p, (int, np.integer)) or p < 1:
        raise CommsimError(f"the rank count must be an integer >= 1, got {p!r}")
    for name, v in (("alpha", alpha), ("beta", beta), ("gamma", gamma)):
        if not (isinstance(v, (int, float, np.floating)) and math.isfinite(v) and v >= 0):
            raise CommsimError(f"{name} must be a finite number >= 0, got {v!r}")
    size = np.asarray(n, dtype=np.float64)
    if not (np.isfinite(size).all() and (size >= 0).all()):
        raise CommsimError("message sizes must be finite and >= 0 bytes")
    h = int(helpers)
    if not 0 <= h < p:
        raise CommsimError(f"helpers must be in [0, {p - 1}] for {p} ranks, got {helpers!r}")
    w = p - h
    if w == 1:
        out = np.zeros_like(size)
    else:
        f_beta, f_gamma = sp.bound_beta(w), sp.bound_gamma(w)
        if h:  # helper ranks (see the module docstring)
            f_beta, f_gamma = min(f_beta, 1.0), f_gamma * w / p
        lat = _rounds(w, max(ports, links)) * alpha
        out = lat + size * (f_beta * beta + f_gamma * gamma) / links
    return float(out) if out.ndim == 0 else out


def bound_of(
    model: Any, collective: str, nranks: int, nbytes: Any, helpers: int = 0
) -> tuple[Any, str]:
    """A model's lower bound and the name of the bound that binds, for tables.

    A model whose bound depends on the call (the topology model: injection, cut or bisection,
    :meth:`commsim.models.Topology.bound`) names it per call through a ``bound`` method; any
    other :class:`~commsim.models.Model` has one ``bound_name``. ``helpers``: the schedule's
    helper ranks (IR rule 7), passed on only when there are some.

    Examples:
        >>> from commsim.models import Hockney
        >>> bound_of(Hockney(1.0, 0.001, 0.0), "allreduce", 4, 1000.0)
        (3.5, 'Chan et al. 2007 lower bound')
    """
    if helpers and not _takes_helpers(model.lower_bound):
        return 0.0 * np.asarray(nbytes, dtype=np.float64), NO_HELPER_BOUND
    extra = {"helpers": helpers} if helpers else {}
    per_call = getattr(model, "bound", None)
    if callable(per_call):
        return per_call(collective, nranks, nbytes, **extra)
    return model.lower_bound(collective, nranks, nbytes, **extra), model.bound_name


def model_bound(model: Any, collective: str, nranks: int, nbytes: Any, helpers: int = 0) -> Any:
    """``model.lower_bound`` for a schedule with ``helpers`` helper ranks (IR rule 7): passed on
    when there are some; 0 (a true, empty bound) from a model whose ``lower_bound`` does not take
    them, rather than a bound that assumes every rank holds data."""
    return (
        bound_of(model, collective, nranks, nbytes, helpers)[0]
        if helpers
        else (model.lower_bound(collective, nranks, nbytes))
    )


def _takes_helpers(method: Any) -> bool:
    import inspect

    try:
        return "helpers" in inspect.signature(method).parameters
    except (TypeError, ValueError):  # a builtin without a signature
        return False
