r"""Building blocks of hierarchical schedules: groups of consecutive ranks, a ring inside every
group over *virtual blocks*, and a sub-schedule embedded on many rank sets at once.

Ranks are cut into groups of ``g`` consecutive ranks (a server's GPUs under linear placement);
the last group may be smaller (``q < g``). Inside a group of ``q`` members, member ``m`` owns the
virtual block :math:`V_m = \{ j < B : j \bmod q = m \}` of ``B`` blocks, so an uneven group
still covers every block: a member of a small group owns several. A ring reduce-scatter over
virtual blocks leaves :math:`V_m` reduced over the group on member ``m``; a ring allgather spreads
each :math:`V_m` to the whole group (Patarasuk & Yuan 2009, ring per group).

:func:`embed` places one step of a sub-schedule on ``C`` copies at once: copy ``c``'s sub-rank
``i`` is parent rank ``rank_map[c, i]`` and its slot ``s`` is parent slot ``s + offset[c]``
(contiguous) or ``s * stride + offset[c]`` (strided: ranges are split into single slots). Every
function is array code over all groups and copies; Python loops run over group sizes (at most
two) and steps only.
"""

from __future__ import annotations

import numpy as np

from commsim._ir import Step
from commsim.errors import ParameterError

__all__ = ["Blocks", "check_ranks_per_node", "embed", "group_classes", "intra_ring_step"]


def check_ranks_per_node(g: object) -> int:
    """``ranks_per_node`` (a server's ranks, consecutive), checked: an integer >= 1.

    Examples:
        >>> check_ranks_per_node(8)
        8
    """
    if isinstance(g, bool) or not isinstance(g, int | np.integer) or g < 1:
        raise ParameterError(f"ranks_per_node must be an integer >= 1, got {g!r}")
    return int(g)


def group_classes(nranks: int, g: int) -> list[tuple[int, np.ndarray]]:
    """``[(q, bases)]``: the groups of size ``q`` and their first ranks (at most two sizes)."""
    bases = np.arange(0, nranks, g, dtype=np.int64)
    sizes = np.minimum(g, nranks - bases)
    return [(int(q), bases[sizes == q]) for q in np.unique(sizes)[::-1]]


class Blocks:
    """``B`` blocks, block ``j`` being slot ranges ``(start, count)`` (CSR by block)."""

    def __init__(self, indptr: np.ndarray, start: np.ndarray, count: np.ndarray) -> None:
        self.indptr, self.start, self.count = indptr, start, count
        self.n = len(indptr) - 1

    @classmethod
    def contiguous(cls, nblocks: int, size: int) -> Blocks:
        """Block ``j`` is slots ``[j size, (j + 1) size)``."""
        return cls(
            np.arange(nblocks + 1, dtype=np.int64),
            np.arange(nblocks, dtype=np.int64) * size,
            np.full(nblocks, size, dtype=np.int64),
        )

    @classmethod
    def columns(cls, nranks: int, g: int) -> Blocks:
        """Column ``j < g`` is the single slots ``k g + j < nranks`` (one per group ``k``)."""
        cols = [np.arange(j, nranks, g, dtype=np.int64) for j in range(min(g, nranks))]
        lengths = np.array([len(c) for c in cols], dtype=np.int64)
        indptr = np.concatenate([[0], np.cumsum(lengths)])
        start = np.concatenate(cols) if cols else np.zeros(0, np.int64)
        return cls(indptr, start, np.ones(len(start), dtype=np.int64))


def intra_ring_step(s: int, nranks: int, g: int, blocks: Blocks, *, reduce: bool) -> Step:
    """Step ``s`` of a ring in every group over virtual blocks: reduce-scatter (``reduce``: member
    ``m`` sends :math:`V_{(m - s - 1) \bmod q}`) or allgather (sends :math:`V_{(m - s) \bmod q}`),
    to member ``m + 1``. Groups of ``q`` members take ``q - 1`` steps; later steps are empty."""
    parts = []
    for q, bases in group_classes(nranks, g):
        if s >= q - 1:
            continue
        m = np.arange(q, dtype=np.int64)
        x = (m - s - (1 if reduce else 0)) % q
        t = -(-blocks.n // q)
        j = x[:, None] + q * np.arange(t, dtype=np.int64)[None, :]
        mm = np.broadcast_to(m[:, None], j.shape)
        ok = j < blocks.n
        mf, jf = mm[ok], j[ok]
        lengths = blocks.indptr[jf + 1] - blocks.indptr[jf]
        me = np.repeat(mf, lengths)
        first = np.repeat(
            blocks.indptr[jf] - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths
        )
        r = first + np.arange(len(me), dtype=np.int64)
        slot, count = blocks.start[r], blocks.count[r]
        src = (bases[:, None] + me[None, :]).ravel()
        dst = (bases[:, None] + ((me + 1) % q)[None, :]).ravel()
        k = len(bases)
        parts.append(
            Step.make(src, dst, np.tile(slot, k), np.tile(slot, k), np.tile(count, k), reduce)
        )
    return Step.cat(parts) if parts else Step.empty()


def embed(
    step: Step,
    rank_map: np.ndarray,
    offset: np.ndarray,
    *,
    stride: int | None = None,
) -> Step:
    """``step`` of a sub-schedule placed on every row of ``rank_map`` (``[copies, sub_ranks]``),
    slots shifted by ``offset[c]`` (or mapped ``s -> s * stride + offset[c]``)."""
    if len(step.src) == 0 or len(rank_map) == 0:
        return Step.empty()
    src, dst, a, b, count, red, ch = step
    if stride is not None and (count != 1).any():  # a range becomes single slots
        idx = np.repeat(np.arange(len(src)), count)
        within = np.arange(len(idx)) - np.repeat(np.cumsum(count) - count, count)
        src, dst, red, ch = src[idx], dst[idx], red[idx], ch[idx]
        a, b = a[idx] + within, b[idx] + within
        count = np.ones(len(idx), dtype=np.int64)
    copies = len(rank_map)
    off = offset[:, None]
    if stride is not None:
        pa, pb = a[None, :] * stride + off, b[None, :] * stride + off
    else:
        pa, pb = a[None, :] + off, b[None, :] + off
    return Step.make(
        rank_map[:, src].ravel(),
        rank_map[:, dst].ravel(),
        pa.ravel(),
        pb.ravel(),
        np.tile(count, copies),
        np.tile(red, copies),
        np.tile(ch, copies) if ch.any() else None,
    )
