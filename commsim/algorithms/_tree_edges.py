r"""Weighted spanning trees as text and as pipelined edges: the plumbing of the packed-tree rows.

A tree over ranks ``0..p-1`` is its parent array (``-1`` at its root) and an integer **weight**
(how many of its root's ``W`` shares it carries). As text (the ``trees`` parameter of the
:mod:`packed_trees <commsim.algorithms.packed_trees>` rows) a tree is ``weight:`` (optional,
default 1) then the parents joined by ``.``, ``r`` at the root; trees are joined by ``,``:
``"2:r.0.0.1,1:1.r.1.2"`` is a tree rooted at 0 (weight 2; 1 and 2 children of 0, 3 of 1) and
one rooted at 1.

:func:`tree_edges` lays the trees out on slots and steps. Root ``r``'s data is ``c·W`` slots
(``c = segments``): chunk ``j`` of tree ``t`` is the ``w_t`` slots at ``j·W + o_t`` of the
block, ``o_t`` the weights of ``r``'s trees before ``t``. Pipelined down a tree (a broadcast),
the edge ``u → v`` carries chunk ``j`` in step ``depth(u) + j``; up the reversed tree (a
reduction), ``v → u`` carries it in step ``height(v) + j`` (a rank forwards a chunk one step
after the last of its children sent it). Depths and heights come from pointer jumping and one
pass per level, arrays over all trees at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from commsim._ir import Step
from commsim.errors import ParameterError

__all__ = ["Edges", "format_trees", "parse_trees", "ring_channels", "tree_edges"]

#: A tree as the rows take it: ``(root, parents, weight)``.
TreeSpec = tuple[int, tuple[int, ...], int]


def _parse_one(text: str, p: int) -> tuple[tuple[int, ...], int]:
    weight, _, body = text.rpartition(":")
    parents = tuple(-1 if e == "r" else int(e) for e in body.split("."))
    w = int(weight) if weight else 1
    if len(parents) != p:
        raise ParameterError(
            f"trees: a tree names a parent for each of the {p} ranks, got {text!r}"
        )
    return parents, w


def parse_trees(trees: str | Sequence[Any], nranks: int) -> tuple[TreeSpec, ...]:
    """``"auto"`` (``()``: the rows' chains), the text of the module docstring, or a sequence of
    ``(root, parents, weight)`` (:class:`commsim.topology.Tree`); each checked to be a spanning
    tree of ``0..p-1`` with a weight ``>= 1``.

    Examples:
        >>> parse_trees("2:r.0.0.1,1.r.1.2", 4)
        ((0, (-1, 0, 0, 1), 2), (1, (1, -1, 1, 2), 1))
    """
    p = nranks
    if isinstance(trees, str):
        text = trees.strip().lower()
        if text == "auto":
            return ()
        if text == "pack":
            raise ParameterError(
                "trees=pack packs trees into a network's links: give --cluster or --topology "
                "(or the trees, from commsim.topology.pack_trees)"
            )
        try:
            raw = [_parse_one(t.strip(), p) for t in text.split(",")]
        except ParameterError:
            raise
        except ValueError:
            raise ParameterError(
                f"trees must be 'auto' or trees like '2:r.0.0.1,1.r.1.2', got {trees!r:.80}"
            ) from None
    else:
        raw = [(tuple(int(x) for x in t[1]), int(t[2])) for t in trees]
    if not raw:
        raise ParameterError("trees: at least one tree")
    out = []
    for parents, w in raw:
        par = np.asarray(parents, dtype=np.int64)
        roots = np.flatnonzero(par < 0)
        if len(par) != p or len(roots) != 1 or par.max(initial=0) >= p or w < 1:
            raise ParameterError(
                f"trees: each tree has one root, a parent in 0..{p - 1} for every other rank "
                f"and a weight >= 1, got {format_trees([(0, parents, w)])!r:.80}"
            )
        out.append((int(roots[0]), tuple(par.tolist()), w))
    depths(np.array([t[1] for t in out], dtype=np.int64))  # refuses a cycle
    return tuple(out)


def format_trees(trees: Sequence[Any]) -> str:
    """The ``trees`` text of ``(root, parents, weight)`` triples (:func:`parse_trees` reads it
    back; the root is where the parent is ``-1``)."""
    return ",".join(
        ("" if w == 1 else f"{w}:") + ".".join("r" if q < 0 else str(q) for q in par)
        for _, par, w in trees
    )


def depths(parents: np.ndarray) -> np.ndarray:
    """``[trees, p]`` depth of every rank (root 0) by pointer jumping; a parent array that is
    not a tree (a cycle) is refused."""
    t, p = parents.shape
    rows = np.arange(t)[:, None]
    root = np.argmin(parents, axis=1)[:, None]
    anc = np.where(parents < 0, root, parents)
    dist = (parents >= 0).astype(np.int64)
    for _ in range(max(1, int(p - 1).bit_length())):
        dist = dist + np.where(anc == root, 0, dist[rows, anc])
        anc = anc[rows, anc]
    if (anc != root).any():
        raise ParameterError("trees: a parent array has a cycle (each tree must reach its root)")
    return dist


def heights(parents: np.ndarray, depth: np.ndarray) -> np.ndarray:
    """``[trees, p]`` height of every rank's subtree (leaves 0): one pass per level, deepest
    first."""
    height = np.zeros_like(depth)
    t, v = np.nonzero(parents >= 0)
    order = np.argsort(-depth[t, v], kind="stable")
    t, v = t[order], v[order]
    level = depth[t, v]
    cuts = np.flatnonzero(np.diff(level)) + 1
    for a, b in zip(np.r_[0, cuts], np.r_[cuts, len(t)], strict=True):
        np.maximum.at(height, (t[a:b], parents[t[a:b], v[a:b]]), height[t[a:b], v[a:b]] + 1)
    return height


class Edges(NamedTuple):
    """Every tree edge of a phase, sorted by the step its first chunk moves in."""

    src: np.ndarray
    dst: np.ndarray
    slot: np.ndarray  # first slot of chunk 0
    count: np.ndarray  # slots per chunk: the tree's weight
    channel: np.ndarray  # the tree's (:func:`ring_channels`)
    offset: np.ndarray  # step of chunk 0
    stride: int  # slots from one chunk to the next: W
    segments: int
    reduce: bool

    @property
    def nsteps(self) -> int:
        return int(self.offset[-1]) + self.segments if len(self.offset) else 0

    def step(self, s: int) -> Step:
        """Step ``s``: the edges whose chunk ``s - offset`` exists."""
        lo = np.searchsorted(self.offset, s - self.segments + 1, side="left")
        hi = np.searchsorted(self.offset, s, side="right")
        j = s - self.offset[lo:hi]
        slot = self.slot[lo:hi] + j * self.stride
        n = hi - lo
        return Step(self.src[lo:hi], self.dst[lo:hi], slot, slot, self.count[lo:hi],
                    np.full(n, self.reduce), self.channel[lo:hi])  # fmt: skip

    def per_step(self) -> np.ndarray:
        """Transfers in each step (window sums of edges per offset)."""
        first = np.bincount(self.offset, minlength=self.nsteps + 1).cumsum()
        shifted = np.r_[np.zeros(self.segments, dtype=np.int64), first][: len(first)]
        return (first - shifted)[: self.nsteps]


def tree_edges(
    trees: Sequence[TreeSpec], segments: int, base: np.ndarray, stride: int, up: bool
) -> Edges:
    """The pipelined edges of ``trees`` (module docstring): down from each root, or up towards it
    (``up``, reducing). ``base[r]``: root ``r``'s first slot; ``stride``: its ``W``."""
    parents = np.array([t[1] for t in trees], dtype=np.int64)
    roots = np.array([t[0] for t in trees], dtype=np.int64)
    weight = np.array([t[2] for t in trees], dtype=np.int64)
    depth = depths(parents)
    before = np.zeros(len(trees), dtype=np.int64)  # weights of the same root's earlier trees
    for r in np.unique(roots):
        mine = np.flatnonzero(roots == r)
        before[mine] = np.cumsum(weight[mine]) - weight[mine]
    t, v = np.nonzero(parents >= 0)
    u = parents[t, v]
    offset = heights(parents, depth)[t, v] if up else depth[t, u]
    src, dst = (v, u) if up else (u, v)
    order = np.argsort(offset, kind="stable")
    channel = ring_channels(parents, roots, depth)[t]
    return Edges(src[order], dst[order], (base[roots] + before)[t][order], weight[t][order],
                 channel[order], offset[order], stride, segments, up)  # fmt: skip


def ring_channels(parents: np.ndarray, roots: np.ndarray, depth: np.ndarray) -> np.ndarray:
    """Each tree's channel: chains (no rank with two children) that close into the same ring
    share one, the ``k``-th chain of each root on the ring's ``k``-th channel (a ring allgather
    is ``p`` chains, one per root, and runs on one channel: a rank forwards every block on the
    port it received it on); every other tree has a channel of its own.

    Examples:
        >>> par = np.array([[-1, 0, 1], [2, -1, 1], [2, 0, -1], [-1, 0, 0]])  # 3 chains, a star
        >>> ring_channels(par, np.array([0, 1, 2, 0]), depths(par)).tolist()
        [0, 0, 0, 1]
    """
    n, p = parents.shape
    kids = np.zeros((n, p), dtype=np.int64)
    t, v = np.nonzero(parents >= 0)
    np.add.at(kids, (t, parents[t, v]), 1)
    chain = (kids <= 1).all(axis=1)
    last = np.argmax(depth, axis=1)
    succ = np.full((n, p), -1, dtype=np.int64)  # successor on the closed ring
    succ[t, parents[t, v]] = v
    succ[np.arange(n), last] = roots
    out = np.full(n, -1, dtype=np.int64)
    seen: dict[tuple[tuple[int, ...], int], int] = {}
    count: dict[tuple[tuple[int, ...], int], int] = {}
    for i in range(n):  # build-time pass over the trees, O(trees · p)
        if not chain[i] or p < 2:
            continue
        ring = tuple(succ[i].tolist())
        k = count.get((ring, int(roots[i])), 0)
        count[(ring, int(roots[i]))] = k + 1
        out[i] = seen.setdefault((ring, k), len(seen))
    alone = out < 0
    out[alone] = len(seen) + np.arange(int(alone.sum()))
    return out
