r"""Measured link profiles in the topology model: a message's rate capped at the rate measured
for its size on each link class it crosses.

A profile (:class:`commsim.clusters.LinkProfile`, a cluster file's ``[profiles.CLASS]``) says
what rate a message of :math:`b` bytes reaches on one link of its class, as a bandwidth test
measures it. The topology model caps each message at

.. math::
    r_{\max}(b) = \min_{c \,\in\, \text{classes on its route}} \text{profile}_c(b)

(classes without a profile cap nothing): a private link of that rate appended to its route
(:func:`commsim.models._library.with_channel_cap`, the form every contention mode reads, as for
the library's per-channel cap; with both, the smaller cap). Contention then shares the links
as before, so a profile can only slow a message: a prediction stays above the bounds, which
keep the line rates. Where a cap is the smallest share on its route, the message's time is
charged to the profiled class ("limited by", the time parts; :func:`capped_classes`); a link's
busy time stays its bytes at its own rate (a capped message leaves the rest of the link to
others). The link latencies are added per message as without a profile (a
profile measured with messages back to back, ``osu_bw``, leaves the latency out of its rate).

A message's size changes with the prediction's size, so a model with profiles in a static
contention mode times each size on its own (:class:`PerSizeRuns`): one run per size, the work
of one run times the number of sizes; ``flow`` simulates each size on its own anyway and caps
each size's messages in its loop.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from commsim.errors import ParameterError

__all__ = ["PerSizeRuns", "as_link_profiles", "capped_classes", "message_caps"]


def as_link_profiles(value: Mapping[str, Any] | None, kinds: Sequence[str]) -> dict[str, Any]:
    """``link_profiles`` checked: link class name (one of ``kinds``) → an object with
    ``rate(nbytes) -> bytes/s`` (:class:`commsim.clusters.LinkProfile`); ``{}`` for ``None``."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ParameterError(
            f"link_profiles is a mapping of link class to a profile, got {value!r}"
        )
    for name, prof in value.items():
        if name not in kinds:
            raise ParameterError(
                f"link_profiles: the network has no link class {name!r} "
                f"(classes: {', '.join(kinds)})"
            )
        if not callable(getattr(prof, "rate", None)):
            raise ParameterError(
                f"link_profiles[{name!r}] must have rate(nbytes) (a commsim.clusters."
                f"LinkProfile), got {prof!r}"
            )
    return dict(value)


def message_caps(
    profiles: Mapping[str, Any],
    kinds: Sequence[str],
    channel_bandwidth: float | None,
    link_kind: np.ndarray,
    indptr: np.ndarray,
    links: np.ndarray,
    nbytes: np.ndarray | None,
) -> tuple[float | np.ndarray | None, np.ndarray | None]:
    """Each route's rate cap (CSR ``indptr``/``links``, messages of ``nbytes`` bytes): the
    smallest profiled rate of the classes it crosses, and the per-channel cap (``inf`` where
    nothing caps a route); and per route the class (an index into ``kinds``) whose profile
    sets the cap, ``-1`` where the channel cap or nothing does. Without profiles:
    ``(channel_bandwidth, None)``.

    Examples:
        >>> class Flat:
        ...     def rate(self, n):
        ...         return np.full(np.shape(n), 5.0)
        >>> caps, kind = message_caps(
        ...     {"nic": Flat()},
        ...     ("nvlink", "nic"),
        ...     8.0,
        ...     np.array([0, 1]),
        ...     np.array([0, 1, 3]),
        ...     np.array([0, 0, 1]),
        ...     np.ones(2),
        ... )
        >>> caps.tolist(), kind.tolist()
        ([8.0, 5.0], [-1, 1])
    """
    if not profiles or nbytes is None:
        return channel_bandwidth, None
    n = len(indptr) - 1
    caps = np.full(n, np.inf if channel_bandwidth is None else float(channel_bandwidth))
    kind = np.full(n, -1, dtype=np.int64)
    owner = np.repeat(np.arange(n), np.diff(indptr))
    for name, prof in profiles.items():
        k = kinds.index(name)
        crosses = np.zeros(n, dtype=bool)
        crosses[owner[link_kind[links] == k]] = True
        if crosses.any():
            rate = np.asarray(prof.rate(np.asarray(nbytes, dtype=np.float64)[crosses]))
            lower = rate < caps[crosses]
            idx = np.flatnonzero(crosses)[lower]
            caps[idx], kind[idx] = rate[lower], k
    return caps, kind


def capped_classes(
    cls: np.ndarray,
    cap_kind: np.ndarray | None,
    capped: tuple[np.ndarray, np.ndarray, np.ndarray],
    nlinks: int,
    group: np.ndarray | None,
) -> np.ndarray:
    """The link class each message's time is charged to ("limited by"), with its rate cap:
    the profiled class whose cap is the smallest share on its route
    (:func:`~commsim.models._contention.bottleneck_link` over the ``capped`` routes, whose
    private links past ``nlinks`` are the caps), else ``cls`` (its links' own bottleneck)."""
    if cap_kind is None or not (cap_kind >= 0).any():
        return cls
    from commsim.models._contention import bottleneck_link

    b = bottleneck_link(*capped, group=group)
    return np.where((b >= nlinks) & (cap_kind >= 0), cap_kind, cls)


class PerSizeRuns:
    """Runs of one size each, read as one run over all of them (what a model with profiles
    returns to :meth:`commsim.models.Topology.predict`): clocks and step times side by side,
    link usage of each size stitched, the critical path of the last size."""

    def __init__(self, runs: Sequence[Any]) -> None:
        self.runs = list(runs)
        self.rank_clock = np.concatenate([r.rank_clock for r in self.runs], axis=1)
        self.step_time = np.concatenate([r.step_time for r in self.runs], axis=1)
        self.notes = tuple(dict.fromkeys(n for r in self.runs for n in r.notes))

    def usage(self, total: np.ndarray) -> Any:
        """:class:`~commsim.models.NetworkUsage` of every size (each run's own, side by side)."""
        parts = [r.usage(total[k : k + 1]) for k, r in enumerate(self.runs)]
        first = parts[0]
        return type(first)(
            first.kinds,
            first.link_kind,
            np.concatenate([u.link_bytes for u in parts], axis=1),
            np.concatenate([u.link_busy for u in parts], axis=1),
            np.asarray(total),
            np.concatenate([u.time_parts for u in parts], axis=1),
            parts[-1].critical_path,
        )
