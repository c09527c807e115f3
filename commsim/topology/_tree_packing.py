r"""Spanning out-trees packed into a graph's direct links: every root broadcasts at one rate.

An allgather is ``p`` broadcasts at once, one from each host; a broadcast from host ``r`` can run
over several spanning out-trees rooted at ``r`` at once, each carrying its share of ``r``'s
data. :func:`pack_trees` chooses the trees and their integer **weights** (how many of a root's
``W`` shares each carries) so that the load on every directed link, the sum over the trees that
use it of their weights, fits its capacity as well as possible: the broadcast rate of each root
is then

.. math::
    R = \frac{W}{\max_e L_e / c_e}, \qquad L_e = \sum_{t \ni e} w_t,

in bytes per second of a root's data (:math:`c_e` the link's bandwidth; an allgather of ``n``
bytes then takes :math:`n / (pR)`), the quantity Blink and ForestColl maximise.

**Algorithm** (Blink's LP over trees, seeded by multiplicative weights):

1. *Seed*: :data:`SEED_ROUNDS` rounds in which each root in turn adds a spanning out-tree under
   the link lengths :math:`\exp(\eta L_e / c_e) / c_e` (the fractional-packing method of Garg &
   Könemann: congested links grow long), then one pass that takes each tree out and chooses it
   again. The tree oracle is Prim's rule on the directed lengths (the cheapest link from the
   tree to a host outside it), a fast stand-in for Edmonds' minimum arborescence.
2. *Refine*: the linear program over the trees found, maximise :math:`R` with each root's trees
   adding up to :math:`R` and each link's load within its capacity (HiGHS,
   :func:`scipy.optimize.linprog`); priced by its duals, each root's cheapest tree joins while
   it would raise :math:`R` (column generation, at most :data:`REFINE_ROUNDS` times).
3. *Round*: each root's LP rates scaled to ``W`` integer shares (largest remainders) for every
   ``W`` up to ``shares``; the fastest ``W`` is kept, and so are
   :func:`commsim.topology.pack_rings`' rings as chains (a ring allgather is ``p`` chains) where
   they are as fast (up to 16 hosts).

The result is valid by construction (every tree spans the hosts from its root over direct
links), and its rate is measured, not assumed: :attr:`TreePacking.rate`.

**Optimality gap.** No packing beats the cut bound :attr:`TreePacking.bound`: for every set
``S`` of hosts the roots outside ``S`` send :math:`R` each into ``S``, so
:math:`R \le B_\text{in}(S) / |V \setminus S|` (ForestColl's bound, which its out-trees reach);
for one root, :math:`R \le \min_v \lambda(r, v)`, the smallest max-flow from the root (Edmonds'
branching theorem: the bound is reached). The bound is exact over every ``S`` up to
:data:`EXACT_CUT_HOSTS` hosts, and over single hosts and their complements above (then an upper
bound that may be loose). With an exact oracle the LP would reach the bound; Prim's rule is not
exact and the rounding to ``W`` shares loses up to about ``1/W`` per root, so there is no
worst-case guarantee: the gap :attr:`TreePacking.gap` is reported with every packing, and
measured 0 on a DGX-1 and its GPU subsets 0-3, {0,1,2,4} and 0-4 and on a 4x4x4 torus, 1.25 % on
an 8x8 torus (``tests/test_tree_packing.py``, ``docs/benchmarks.md``).

Size: the seed is :math:`8h` Prim trees of :math:`O(h^2)` array work each and the LP has one row
per link and per root: 5.4 s wall (1.0 s CPU) for the 4x4x4 torus on a loaded, shared 2-core
machine (``docs/benchmarks.md``). Packing is refused above :data:`MAX_TREE_HOSTS` hosts with a one-line
error. Links through switches are not used (a tree
here is made of direct host-to-host links, as :func:`commsim.topology.pack_rings`' rings are).

References:
    Wang et al., "Blink: Fast and Generic Collectives for Distributed ML", MLSys 2020 (spanning
    trees packed into a DGX-1's links, by multiplicative weights); Zhao et al., "ForestColl:
    Efficient Collective Communications on Heterogeneous Network Fabrics", 2024 (out-trees at
    the cut bound); Garg & Könemann, "Faster and simpler algorithms for multicommodity flow and
    other fractional packing problems", SIAM J. Comput. 37(2), 2007; Edmonds, "Edmonds
    polytopes and weakly hamiltonian graphs" / "Edge-disjoint branchings", 1973.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from commsim.errors import ParameterError
from commsim.topology._ring_packing import MAX_PACKING_HOSTS, pack_rings

__all__ = ["EXACT_CUT_HOSTS", "MAX_TREE_HOSTS", "Tree", "TreePacking", "pack_trees"]

#: Most hosts :func:`pack_trees` packs (a round costs one Dijkstra per root).
MAX_TREE_HOSTS = 128
#: Up to this many hosts the cut bound is taken over every subset of hosts (2^h of them).
EXACT_CUT_HOSTS = 12
#: Rounds of multiplicative weights that seed the trees (each root gets one tree a round).
SEED_ROUNDS = 4
#: Most rounds of column generation after the seed.
REFINE_ROUNDS = 40
#: Most shares a root's data is cut into unless given (the trees' integer weights add to it).
MAX_SHARES = 24


class Tree(NamedTuple):
    """A spanning out-tree: ``parent[v]`` is host ``v``'s parent (``-1`` at the root), and
    ``weight`` the shares of the root's data it carries."""

    root: int
    parent: tuple[int, ...]
    weight: int


class TreePacking(NamedTuple):
    """Trees over hosts ``0..h-1`` with the rate each root reaches and the bound on it.

    Attributes:
        trees: the trees, grouped by root (ascending), each root's weights summing to
            ``rounds``.
        rate: each root's broadcast rate in bytes/s (module docstring).
        bound: the cut bound on that rate (module docstring); ``rate <= bound``.
    """

    trees: tuple[Tree, ...]
    rate: float
    bound: float

    @property
    def gap(self) -> float:
        """``1 - rate / bound``: how far below the cut bound the packing is."""
        return 1.0 - self.rate / self.bound if self.bound > 0 else 0.0


def _capacities(graph: Any, hosts: list[Any]) -> np.ndarray:
    """``[h, h]`` bandwidth of the direct link ``hosts[i] → hosts[j]`` (each direction of an
    undirected edge carries its ``bandwidth``), 0 where there is none."""
    index = {h: i for i, h in enumerate(hosts)}
    cap = np.zeros((len(hosts), len(hosts)))
    for u, v, d in graph.edges(hosts, data=True):
        if u in index and v in index and u != v:
            bw = float(d.get("bandwidth", 1.0))
            cap[index[u], index[v]] += bw
            if not graph.is_directed():
                cap[index[v], index[u]] += bw
    return cap


def _spanning_tree(lengths: np.ndarray, root: int) -> np.ndarray | None:
    """Parents of a cheap spanning out-tree from ``root`` (Prim's rule on directed lengths:
    repeatedly the shortest link from the tree to a host not in it), ``-1`` at the root, or
    ``None`` when some host cannot be reached."""
    h = len(lengths)
    cost = np.where(lengths > 0, lengths, np.inf)
    parent = np.full(h, -1, dtype=np.int64)
    best = cost[root].copy()
    via = np.full(h, root, dtype=np.int64)
    inside = np.zeros(h, dtype=bool)
    inside[root] = True
    best[root] = np.inf
    for _ in range(h - 1):
        v = int(np.argmin(best))
        if not np.isfinite(best[v]):
            return None
        parent[v], inside[v] = via[v], True
        closer = ~inside & (cost[v] < best)
        best[closer], via[closer] = cost[v][closer], v
        best[v] = np.inf
    return parent


def _cut_bound(cap: np.ndarray, roots: list[int]) -> float:
    """The module docstring's cut bound on each root's rate, for these roots."""
    import networkx as nx

    h = len(cap)
    if len(roots) == 1:
        g = nx.DiGraph()
        src, dst = np.nonzero(cap)
        g.add_weighted_edges_from(zip(src.tolist(), dst.tolist(), cap[src, dst].tolist()),
                                  weight="capacity")  # fmt: skip
        r = roots[0]
        return min(nx.maximum_flow_value(g, r, v) for v in range(h) if v != r)
    if h <= EXACT_CUT_HOSTS:
        masks = np.array(list(itertools.product([False, True], repeat=h)), dtype=bool)[1:-1]
        into = np.einsum("si,ij,sj->s", ~masks, cap, masks)  # bandwidth into S
        outside = (~masks).sum(axis=1)
        return float((into / outside).min())
    single = cap.sum(axis=0) / (h - 1)  # S = one host: every other root's data enters it
    rest = cap.sum(axis=1)  # S = all but one host: that root's data leaves it
    return float(min(single.min(), rest.min()))


def _check(hosts: list[Any], shares: int, root: int | None) -> None:
    h = len(hosts)
    if h > MAX_TREE_HOSTS:
        raise ParameterError(
            f"tree packing takes at most {MAX_TREE_HOSTS} hosts, got {h}: give the trees "
            "(trees=...) or use fewer hosts"
        )
    if isinstance(shares, bool) or not isinstance(shares, (int, np.integer)) or shares < 1:
        raise ParameterError(f"tree packing: shares must be an integer >= 1, got {shares!r}")
    if root is not None and not 0 <= root < h:
        raise ParameterError(f"tree packing: root {root} is not one of the {h} hosts")


def _seed(cap: np.ndarray, roots: list[int]) -> list[tuple[int, tuple[int, ...]]] | None:
    """The multiplicative-weights trees (module docstring): :data:`SEED_ROUNDS` rounds, then
    one pass that takes each tree out and chooses it again; ``None`` if the links do not span
    the hosts."""
    h, m = len(cap), len(roots)
    link = cap > 0
    rel = np.where(link, cap[link].min() / np.where(link, cap, 1.0), 0.0)  # smallest 1
    load = np.zeros_like(cap)
    eta = 4.0 * link.sum() / (SEED_ROUNDS * m * (h - 1))  # about 4 / a link's final load
    chosen: list[tuple[int, np.ndarray]] = []
    seen: dict[tuple[int, tuple[int, ...]], None] = {}
    for k in range(2 * SEED_ROUNDS * m):
        r = roots[k % m]
        if k >= SEED_ROUNDS * m:  # the second pass: the oldest tree out, chosen again
            _, old = chosen.pop(0)
            c = np.flatnonzero(old >= 0)
            load[old[c], c] -= 1.0
        lengths = np.where(link, rel * np.exp(np.minimum(eta * load * rel, 600.0)), 0.0)
        parent = _spanning_tree(lengths, r)
        if parent is None:
            return None
        c = np.flatnonzero(parent >= 0)
        load[parent[c], c] += 1.0
        chosen.append((r, parent))
        seen[(r, tuple(parent.tolist()))] = None
    return list(seen)


def _incidence(cap: np.ndarray, columns: list[tuple[int, tuple[int, ...]]]) -> Any:
    """Sparse ``[links, trees]``: 1 where tree ``t`` uses directed link ``e`` (the links in
    ``np.nonzero(cap)`` order)."""
    from scipy.sparse import csr_matrix

    h = len(cap)
    index = np.full(h * h, -1, dtype=np.int64)
    flat = np.flatnonzero(cap.ravel() > 0)
    index[flat] = np.arange(len(flat))
    par = np.array([p for _, p in columns], dtype=np.int64).reshape(len(columns), h)
    t, v = np.nonzero(par >= 0)
    return csr_matrix((np.ones(len(t)), (index[par[t, v] * h + v], t)),
                      shape=(len(flat), len(columns)))  # fmt: skip


def _refine(cap: np.ndarray, roots: list[int], columns: list) -> tuple[list, np.ndarray]:
    """Column generation: the LP over the trees found (maximise :math:`R`, every root's trees
    adding to :math:`R`, every link's load within its capacity), then, priced by the LP's
    duals, each root's cheapest tree (Prim) joins while it would raise :math:`R`, at most
    :data:`REFINE_ROUNDS` times. Returns the trees and their LP rates (units of the smallest
    capacity)."""
    from scipy.optimize import linprog
    from scipy.sparse import csr_matrix, vstack

    link = cap > 0
    c = cap[link] / cap[link].min()
    where = {r: i for i, r in enumerate(roots)}
    for _ in range(REFINE_ROUNDS):
        n = len(columns)
        owner = np.array([where[r] for r, _ in columns])
        rows = csr_matrix((-np.ones(n), (owner, np.arange(n))), shape=(len(roots), n + 1))
        rows = rows + csr_matrix((np.ones(len(roots)), (np.arange(len(roots)),
                                  np.full(len(roots), n))), shape=(len(roots), n + 1))  # fmt: skip
        a = vstack([csr_matrix(_incidence(cap, columns), shape=(len(c), n + 1)), rows])
        res = linprog(np.r_[np.zeros(n), -1.0], A_ub=a, b_ub=np.r_[c, np.zeros(len(roots))],
                      bounds=(0, None), method="highs")  # fmt: skip
        price = np.zeros_like(cap)
        price[link] = -res.ineqlin.marginals[: len(c)] + 1e-9
        gain = -res.ineqlin.marginals[len(c) :]
        known = set(columns)
        new = []
        for i, r in enumerate(roots):
            parent = _spanning_tree(price, r)
            v = np.flatnonzero(parent >= 0)
            key = (r, tuple(parent.tolist()))
            if price[parent[v], v].sum() < gain[i] * (1 - 1e-7) and key not in known:
                new.append(key)
        if not new:
            break
        columns = columns + new
    return columns, np.asarray(res.x[: len(columns)])


def _rounded(cap: np.ndarray, roots: list[int], columns: list, x: np.ndarray, shares: int):
    """Integer weights: each root's LP rates scaled to ``W`` shares (largest remainders), for
    every ``W <= shares``; the ``W`` whose packing is fastest (the smallest among equals).
    Returns ``(rate in bytes/s, trees)``."""
    link = cap > 0
    inc = _incidence(cap, columns)
    owner = np.array([r for r, _ in columns])
    best: tuple[float, tuple[Tree, ...]] = (0.0, ())
    for w in range(1, shares + 1):
        weight = np.zeros(len(columns), dtype=np.int64)
        for r in roots:
            mine = np.flatnonzero(owner == r)
            want = x[mine] / x[mine].sum() * w
            got = np.floor(want).astype(np.int64)
            extra = np.argsort(-(want - got), kind="stable")[: w - got.sum()]
            got[extra] += 1
            weight[mine] = got
        rate = w / float((inc @ weight / cap[link]).max())
        if rate > best[0] * (1 + 1e-9):
            keep = np.flatnonzero(weight)
            trees = tuple(Tree(columns[i][0], columns[i][1], int(weight[i])) for i in keep)
            best = (rate, tuple(sorted(trees)))
    return best


def pack_trees(
    graph: Any, hosts: Sequence[Any], *, root: int | None = None, shares: int = MAX_SHARES
) -> TreePacking | None:
    """Spanning out-trees over ``hosts`` (positions ``0..h-1``) from every host (an allgather's
    packing) or from ``root`` alone (a broadcast's), with integer weights (module docstring);
    ``None`` when the direct links do not connect the hosts.

    Args:
        graph: a topology graph (edges with ``bandwidth``).
        hosts: the graph nodes, in rank order.
        root: pack for this host alone; every host when ``None``.
        shares: the most shares a root's data is cut into (its trees' weights add up to at
            most this; the fastest count is kept).

    Raises:
        ParameterError: more than :data:`MAX_TREE_HOSTS` hosts, a bad ``shares`` or ``root``.

    Examples:
        >>> from commsim.topology import hybrid_cube_mesh
        >>> pk = pack_trees(hybrid_cube_mesh(pcie=False), range(8))
        >>> round(pk.rate * 8 / 1e9, 1), round(pk.gap, 9)  # allgather algbw: every NVLink busy
        (171.4, 0.0)
    """
    hosts = list(hosts)
    _check(hosts, shares, root)
    if len(hosts) < 2:
        return None
    cap = _capacities(graph, hosts)
    roots = list(range(len(hosts))) if root is None else [int(root)]
    columns = _seed(cap, roots) if (cap > 0).any() else None
    if columns is None:
        return None
    columns, x = _refine(cap, roots, columns)
    rate, trees = _rounded(cap, roots, columns, x, shares)
    chains = _ring_chains(graph, hosts, cap, roots)
    if chains is not None and chains[0] >= rate * (1 - 1e-9):
        rate, trees = chains
    return TreePacking(trees, rate, _cut_bound(cap, roots))


def _ring_chains(graph: Any, hosts: list[Any], cap: np.ndarray, roots: list[int]):
    """The packing of :func:`commsim.topology.pack_rings`' rings as trees (a ring allgather is
    ``p`` chains, one from each root along the ring), weight 1 each, with its rate; ``None``
    above :data:`~commsim.topology._ring_packing.MAX_PACKING_HOSTS` hosts or without a ring.
    Where it is as fast as the LP's packing it is kept: a chain pipelines without idle links."""
    if len(hosts) > MAX_PACKING_HOSTS:
        return None
    try:
        rings = pack_rings(graph, hosts)
    except ParameterError:
        return None
    if not rings:
        return None
    h = len(hosts)
    columns = []
    for ring in rings:
        order = np.asarray(ring, dtype=np.int64)
        for r in roots:
            path = np.roll(order, -int(np.flatnonzero(order == r)[0]))
            parent = np.full(h, -1, dtype=np.int64)
            parent[path[1:]] = path[:-1]
            columns.append((r, tuple(parent.tolist())))
    load = _incidence(cap, columns) @ np.ones(len(columns))
    rate = len(rings) / float((load / cap[cap > 0]).max())
    return rate, tuple(sorted(Tree(r, p, 1) for r, p in columns))
