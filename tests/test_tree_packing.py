"""Tree packing (issue #25): weighted spanning out-trees that fit the links, at the cut bound.

On a DGX-1 (msccl-tools' link matrix, 25 GB/s per NVLink, NVLink only) every root broadcasts at
6 · 25 GB/s / 7 (allgather 171.4 GB/s algbw), on GPUs {0,1,2,3} at 133.3 GB/s, and on GPU
subsets with no ring of NVLinks ({0,1,2,4}, {0,1,2,3,4}) still at their cut bound; on a 4x4x4
torus at 45 GB/s per link the allgather rate is the injection bound, 6 · 45 · 64/63 = 274.3 GB/s.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from commsim.clusters import cluster
from commsim.errors import ParameterError
from commsim.topology import MAX_TREE_HOSTS, hybrid_cube_mesh, pack_rings, pack_trees, torus
from commsim.topology._tree_packing import _capacities


def _load(packing, h):
    """``[h, h]`` shares over each directed link (sum of the weights of the trees using it)."""
    load = np.zeros((h, h))
    for t in packing.trees:
        par = np.asarray(t.parent)
        v = np.flatnonzero(par >= 0)
        np.add.at(load, (par[v], v), t.weight)
    return load


def _check_valid(graph, h, packing, roots):
    cap = _capacities(graph, list(range(h)))
    shares = {r: sum(t.weight for t in packing.trees if t.root == r) for r in roots}
    assert len(set(shares.values())) == 1  # every root cut into the same W shares
    w = shares[roots[0]]
    for t in packing.trees:
        par = np.asarray(t.parent)
        assert par[t.root] == -1 and (par >= 0).sum() == h - 1
        v = np.flatnonzero(par >= 0)
        assert (cap[par[v], v] > 0).all()  # direct links only
        g = nx.DiGraph(list(zip(par[v].tolist(), v.tolist(), strict=True)))
        g.add_node(t.root)
        assert nx.is_arborescence(g)
    # the rate is what the loads allow, and never above the link capacities or the cut bound
    load = _load(packing, h)
    used = load > 0
    assert (cap[used] > 0).all()
    assert packing.rate == pytest.approx(w / (load[used] / cap[used]).max(), rel=1e-12)
    assert packing.rate <= packing.bound * (1 + 1e-9)


@pytest.mark.parametrize(
    ("gpus", "algbw"),
    [
        (range(8), 171.4e9),
        ([0, 1, 2, 3], 133.3e9),
        ([0, 1, 2, 4], 66.7e9),
        ([0, 1, 2, 3, 4], 62.5e9),
    ],
)
def test_dgx1_packings_fit_the_links_at_the_cut_bound(gpus, algbw):
    gpus = list(gpus)
    g, h = hybrid_cube_mesh(gpus, pcie=False), len(gpus)
    pk = pack_trees(g, range(h))
    _check_valid(g, h, pk, list(range(h)))
    assert pk.gap <= 1e-9  # the cut bound, exactly
    assert pk.rate * h == pytest.approx(algbw, rel=1e-3)


def test_subsets_without_a_ring_still_get_trees():
    g = hybrid_cube_mesh([0, 1, 2, 4], pcie=False)
    assert pack_rings(g, range(4)) == ()
    assert pack_trees(g, range(4)).gap <= 1e-9


def test_the_torus_allgather_packs_at_the_injection_bound():
    g = torus([4, 4, 4], bandwidth="45GB/s")
    pk = pack_trees(g, range(64))
    _check_valid(g, 64, pk, list(range(64)))
    assert pk.bound * 64 == pytest.approx(6 * 45e9 * 64 / 63)
    assert pk.gap <= 0.01


@pytest.mark.parametrize("seed", range(4))
def test_random_connected_graphs(seed):
    g = nx.connected_watts_strogatz_graph(10, 4, 0.5, seed=seed)
    rng = np.random.default_rng(seed)
    for u, v in g.edges:
        g.edges[u, v]["bandwidth"] = float(rng.choice([1e9, 2e9, 4e9]))
    pk = pack_trees(g, range(10))
    _check_valid(g, 10, pk, list(range(10)))
    assert pk.gap <= 0.15  # the documented heuristic: rounding to <= 24 shares, Prim's oracle


@pytest.mark.parametrize("root", [0, 3])
def test_one_root_reaches_its_smallest_cut(root):
    g = hybrid_cube_mesh(pcie=False)
    pk = pack_trees(g, range(8), root=root)
    _check_valid(g, 8, pk, [root])
    assert {t.root for t in pk.trees} == {root}
    assert pk.bound == pytest.approx(6 * 25e9)  # Edmonds: six NVLinks out of the root
    assert pk.gap <= 1e-9


def test_no_direct_links_no_packing():
    assert pack_trees(cluster("dgx-h100:2").graph, range(16)) is None  # switched: no host links
    assert pack_trees(nx.empty_graph(3), range(3)) is None
    assert pack_trees(torus([4]), range(1)) is None


def test_too_large_graphs_are_refused_in_one_line():
    n = MAX_TREE_HOSTS + 1
    with pytest.raises(ParameterError, match=f"at most {MAX_TREE_HOSTS} hosts") as e:
        pack_trees(torus([n]), range(n))
    assert "\n" not in str(e.value)
    with pytest.raises(ParameterError, match="shares"):
        pack_trees(torus([4]), range(4), shares=0)
