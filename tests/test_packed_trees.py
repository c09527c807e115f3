"""The packed_trees rows (issue #25): the trees of :func:`commsim.topology.pack_trees` as
schedules that verify on rings, tori, complete and random graphs, and, on a DGX-1, run at least
as fast as packed_rings."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

import commsim
from commsim.algorithms.packed_rings import format_rings
from commsim.algorithms.packed_trees import format_trees, parse_trees
from commsim.clusters import cluster
from commsim.errors import ParameterError
from commsim.models import Hockney
from commsim.topology import pack_rings, pack_trees, torus
from commsim.tuner import cluster_model

EVERY_ROOT = ("allgather", "reduce_scatter", "allreduce")
ROOTED = ("broadcast", "reduce")


def _graphs():
    out = [(f"ring{p}", torus([p]), p) for p in (2, 3, 5, 8)]
    out += [("torus3x4", torus([3, 4]), 12), ("torus4x4", torus([4, 4]), 16)]
    out += [(f"complete{p}", nx.complete_graph(p), p) for p in (3, 6)]
    for seed in (0, 1):
        g = nx.connected_watts_strogatz_graph(9, 4, 0.5, seed=seed)
        nx.set_edge_attributes(g, 2e9, "bandwidth")
        out.append((f"random{seed}", g, 9))
    return out


GRAPHS = _graphs()


@pytest.mark.parametrize(("name", "graph", "p"), GRAPHS, ids=[g[0] for g in GRAPHS])
def test_packed_trees_verify_on_generated_graphs(name, graph, p):
    text = format_trees(pack_trees(graph, range(p)).trees)
    for collective in EVERY_ROOT:
        for segments in (1, 3):
            s = commsim.build(collective, "packed_trees", nranks=p, trees=text, segments=segments)
            commsim.verify(s)
    for root in {0, p // 2, p - 1}:
        text = format_trees(pack_trees(graph, range(p), root=root).trees)
        for collective in ROOTED:
            s = commsim.build(collective, "packed_trees", nranks=p, trees=text, segments=2,
                              root=root)  # fmt: skip
            commsim.verify(s)


def test_the_4x4x4_torus_trees_verify():
    text = format_trees(pack_trees(torus([4, 4, 4]), range(64)).trees)
    for collective in ("allgather", "allreduce"):
        commsim.verify(commsim.build(collective, "packed_trees", nranks=64, trees=text))


def test_one_rank_and_auto_at_large_p():
    for collective in (*EVERY_ROOT, *ROOTED):
        assert commsim.build(collective, "packed_trees", nranks=1).nsteps == 0
    s = commsim.build("allgather", "packed_trees", nranks=1000, segments=2)
    assert (s.nchannels, s.nsteps, s.ntransfers) == (1000, 1000, 1000 * 999 * 2)


@pytest.mark.parametrize("collective", EVERY_ROOT)
def test_auto_is_the_ring_at_one_segment(collective):
    """``trees="auto"``, one chunk: the ring's messages, each block on a channel of its own."""
    a = commsim.build(collective, "packed_trees", nranks=7)
    b = commsim.build(collective, "ring", nranks=7)
    m = Hockney(2e-6, 1e-9, 1e-10)
    assert m.predict(a, 1e6).time == pytest.approx(m.predict(b, 1e6).time, rel=1e-12)
    assert a.nchannels == 7


@pytest.mark.parametrize(
    ("spec", "mode"),
    [("dgx1-v100:all:nvlink", "bottleneck"), ("dgx1-v100:0-3:nvlink", "bottleneck"),
     ("dgx1-v100:0-3:nvlink", "flow")],
)  # fmt: skip
def test_dgx1_trees_match_packed_rings(spec, mode):
    c = cluster(spec)
    model = cluster_model(c, contention=mode)
    rings = format_rings(pack_rings(c.graph, range(c.ngpus)))
    trees = format_trees(pack_trees(c.graph, range(c.ngpus)).trees)
    t_rings = model.predict(commsim.build("allgather", "packed_rings", nranks=c.ngpus,
                                          rings=rings), 2**30).time  # fmt: skip
    t_trees = model.predict(commsim.build("allgather", "packed_trees", nranks=c.ngpus,
                                          trees=trees), 2**30).time  # fmt: skip
    assert t_trees <= t_rings * (1 + 1e-9)


def test_a_subset_without_a_ring_gets_an_nvlink_schedule():
    """GPUs {0,1,2,4}: no ring of NVLinks, so no packed_rings; trees reach 75 % of the cut bound
    under the flow model (``docs/benchmarks.md``: branching ranks send in turn)."""
    c = cluster("dgx1-v100:0,1,2,4:nvlink")
    pk = pack_trees(c.graph, range(4))
    s = commsim.build("allgather", "packed_trees", nranks=4, trees=format_trees(pk.trees),
                      segments=2)  # fmt: skip
    t = cluster_model(c, contention="flow").predict(s, 2**30).time
    assert 2**30 / t >= 0.7 * pk.bound * 4


@pytest.mark.parametrize(
    ("trees", "match"),
    [
        ("r.0.0", "a parent for each of the 4 ranks"),
        ("r.0.r.0", "one root"),
        ("r.2.1.0", "cycle"),
        ("x.y", "trees like"),
        ("r.0.0.0", "no tree rooted at rank 1"),
        ("2:r.0.0.0,1.r.1.1,1.2.r.2,1.3.3.r", "same number of shares"),
        ("pack", "--cluster or --topology"),
    ],
)
def test_bad_trees_are_one_line(trees, match):
    with pytest.raises(ParameterError, match=match) as e:
        commsim.build("allgather", "packed_trees", nranks=4, trees=trees)
    assert "\n" not in str(e.value)


def test_rooted_rows_take_trees_of_one_root():
    with pytest.raises(ParameterError, match="one root"):
        commsim.build("broadcast", "packed_trees", nranks=3, trees="r.0.0,1.r.1")
    # trees of root 2, asked at root 2: the ranks as given
    s = commsim.build("broadcast", "packed_trees", nranks=3, trees="2.2.r", root=2)
    commsim.verify(s)
    assert sorted(zip(*(s.step(0).src.tolist(), s.step(0).dst.tolist()))) == [(2, 0), (2, 1)]


def test_format_and_parse_agree():
    trees = ((0, (-1, 0, 0, 1), 2), (1, (1, -1, 1, 2), 1))
    assert parse_trees(format_trees(trees), 4) == trees
    assert np.array_equal(parse_trees("auto", 4), ())
