r"""How the messages in flight together share links: per-message latency and inverse rate.

The messages of one round (a matching of a step's messages: under the single-port rule, those a
rank has in flight at once) are routed on the network; each message gets the latency of its path
and a rate (bytes/s) by one of three static rules:

* ``"none"``: the bottleneck bandwidth of its path, as if it were alone:
  :math:`r_m = \min_{l \in m} B_l`.
* ``"bottleneck"``: each link is shared equally by the :math:`n_l` messages that cross it, and a
  message runs at its smallest share: :math:`r_m = \min_{l \in m} B_l / n_l`. Pessimistic where
  a message held back elsewhere leaves part of its share unused.
* ``"maxmin"``: max-min fair rates by progressive filling (Bertsekas & Gallager, *Data Networks*,
  1992, §6.5.2): all rates grow together; when a link fills, the messages crossing it are frozen
  at their current rate; repeat until every message is frozen. No link is over capacity, and no
  message can go faster without slowing one that is slower.

The rates depend only on which pairs talk, not on sizes or clocks, so they are computed once per
distinct round and cached by the model (a ring's ``2(p-1)`` rounds are one computation).
"""

from __future__ import annotations

import numpy as np

__all__ = ["CONTENTION", "bottleneck_link", "path_latency", "rates"]

CONTENTION = ("none", "bottleneck", "maxmin", "flow")


def path_latency(indptr: np.ndarray, links: np.ndarray, latency: np.ndarray) -> np.ndarray:
    """Sum of link latencies along each route (CSR ``indptr``/``links``)."""
    csum = np.concatenate([[0.0], np.cumsum(latency[links])])
    return csum[indptr[1:]] - csum[indptr[:-1]]


def _segment_min(values: np.ndarray, indptr: np.ndarray) -> np.ndarray:
    """Minimum of each CSR segment (every segment non-empty)."""
    return np.minimum.reduceat(values, indptr[:-1]) if len(values) else np.zeros(len(indptr) - 1)


def rates(mode: str, indptr: np.ndarray, links: np.ndarray, bandwidth: np.ndarray) -> np.ndarray:
    """Bytes/s of each message routed on ``links`` (CSR by message) under contention ``mode``.

    Examples:
        >>> import numpy as np
        >>> bw = np.array([10.0, 10.0, 4.0])
        >>> indptr, links = np.array([0, 2, 3]), np.array([0, 2, 2])  # both cross link 2
        >>> (
        ...     rates("none", indptr, links, bw).tolist(),
        ...     rates("bottleneck", indptr, links, bw).tolist(),
        ... )
        ([4.0, 4.0], [2.0, 2.0])
    """
    if mode == "none":
        return _segment_min(bandwidth[links], indptr)
    if mode == "bottleneck":
        count = np.bincount(links, minlength=len(bandwidth))
        return _segment_min(bandwidth[links] / count[links], indptr)
    if mode == "maxmin":
        return _maxmin(indptr, links, bandwidth)
    raise ValueError(mode)  # the model checked the name


def _maxmin(indptr: np.ndarray, links: np.ndarray, bandwidth: np.ndarray) -> np.ndarray:
    """Progressive filling; each pass freezes the messages of at least one filled link."""
    m = len(indptr) - 1
    owner = np.repeat(np.arange(m), np.diff(indptr))
    rate = np.zeros(m)
    frozen = np.zeros(m, dtype=bool)
    cap = bandwidth.astype(np.float64).copy()
    nlinks = len(bandwidth)
    while not frozen.all():
        live = ~frozen[owner]
        count = np.bincount(links[live], minlength=nlinks)
        used = count > 0
        share = np.full(nlinks, np.inf)
        share[used] = cap[used] / count[used]
        delta = share.min()
        if not np.isfinite(delta):  # only infinitely fast links left
            rate[~frozen] = np.inf
            break
        rate[~frozen] += delta
        cap[used] -= delta * count[used]
        full = used & (cap <= 1e-12 * bandwidth)
        full |= used & (share <= delta * (1 + 1e-12))
        frozen[owner[live & full[links]]] = True
    return rate


def bottleneck_link(
    indptr: np.ndarray,
    links: np.ndarray,
    bandwidth: np.ndarray,
    *,
    group: np.ndarray | None = None,
) -> np.ndarray:
    """Per message, the link its transfer time is charged to: the link with the smallest equal
    share ``B_l / n_l`` along its route, ``n_l`` the messages that cross link ``l`` at the same
    time (those of one round: all messages given, or those with the same ``group`` id); the
    first such link on the route at a tie.

    This is the one definition of "limited by" for every contention mode (docs/sharp-bits.md,
    "limited by"; with ``contention="none"`` each message is a group of its own): the link a message's time is most sensitive to is the one whose fair share
    is smallest. Under ``bottleneck`` that share *is* the message's rate; under ``maxmin`` and
    ``flow`` the rate can be higher (other messages leave spare capacity) but the smallest
    share still marks the link that binds first when every message pushes at once."""
    m = len(indptr) - 1
    if m == 0:
        return np.zeros(0, dtype=np.int64)
    owner = np.repeat(np.arange(m), np.diff(indptr))
    if group is None:
        count = np.bincount(links, minlength=len(bandwidth))[links]
    else:  # messages crossing the same link in the same group
        g = group.astype(np.int64)
        g = g - g.min()
        key = g[owner] * len(bandwidth) + links
        if (int(g.max()) + 1) * len(bandwidth) <= _BINCOUNT_MAX:  # counted in place: no sort
            count = np.bincount(key)[key]
        else:
            _, inverse, counts = np.unique(key, return_inverse=True, return_counts=True)
            count = counts[inverse]
    share = bandwidth[links] / count
    low = share == np.repeat(_segment_min(share, indptr), np.diff(indptr))
    idx = np.flatnonzero(low)
    first = np.flatnonzero(np.diff(owner[idx], prepend=-1))  # owner[idx] ascends: no sort
    return links[idx[first]]


_BINCOUNT_MAX = 2**25  # (group, link) keys counted with one bincount up to this many (256 MiB)
