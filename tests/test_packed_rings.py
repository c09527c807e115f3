"""Packed rings (issue #25): the rings a mesh of direct links carries at once, and the schedules
that run them. On a DGX-1 (msccl-tools' link matrix, 25 GB/s per NVLink) six rings use every
NVLink in both directions: allgather at 6 · 25 GB/s · 8/7 = 171.4 GB/s algbw; on GPUs {0,1,2,3}
four rings give 4 · 25 · 4/3 = 133.3 GB/s."""

from __future__ import annotations

import numpy as np
import pytest

import commsim
from commsim.algorithms.packed_rings import format_rings, parse_rings
from commsim.clusters import cluster
from commsim.errors import ParameterError
from commsim.models import Hockney
from commsim.topology import hybrid_cube_mesh, pack_rings, torus
from commsim.topology._ring_packing import link_units
from commsim.tuner import cluster_model


def _usage(rings, p):
    used = np.zeros((p, p), dtype=np.int64)
    for ring in rings:
        np.add.at(used, (np.array(ring), np.roll(np.array(ring), -1)), 1)
    return used


@pytest.mark.parametrize(("gpus", "want"), [(range(8), 6), ([0, 1, 2, 3], 4), ([0, 1, 4, 5], 2)])
def test_rings_fit_the_links_and_fill_them(gpus, want):
    g = hybrid_cube_mesh(list(gpus), pcie=False)
    hosts = list(range(len(list(gpus))))
    rings = pack_rings(g, hosts)
    units = link_units(g, hosts)
    used = _usage(rings, len(hosts))
    assert len(rings) == want
    assert (used <= units).all()  # no directed link over its capacity
    assert all(sorted(r) == hosts for r in rings)  # each a Hamiltonian ring


def test_no_ring_of_direct_links_gives_none():
    assert pack_rings(hybrid_cube_mesh([0, 2, 5, 7]), range(4)) == ()  # a path, no cycle


def test_packing_refuses_large_graphs():
    with pytest.raises(ParameterError, match="at most 16 hosts"):
        pack_rings(torus([17]), range(17))


@pytest.mark.parametrize("collective", ["allgather", "reduce_scatter", "allreduce"])
def test_dgx1_rings_verify_and_follow_the_closed_form_on_k_links(collective):
    rings = format_rings(pack_rings(hybrid_cube_mesh(pcie=False), range(8)))
    s = commsim.build(collective, "packed_rings", nranks=8, rings=rings)
    commsim.verify(s)
    assert s.nchannels == 6
    a, b, g, n = 2e-6, 1 / 25e9, 1 / 100e9, 2**20
    t = Hockney(alpha=a, beta=b, gamma=g, links=6).predict(s, n).time
    f = 7 / 8
    want = {
        "allgather": 7 * a + f * n / 6 * b,
        "reduce_scatter": 7 * a + f * n / 6 * (b + g),
        "allreduce": 14 * a + f * n / 6 * (2 * b + g),
    }[collective]
    assert t == pytest.approx(want, rel=1e-12)
    row = commsim.algorithms.info(collective, "packed_rings")
    assert row.time(8, n, a, b, g, rings=rings, links=6) == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize(("spec", "optimum"), [("dgx1-v100:all:nvlink", 171.4e9),
                                               ("dgx1-v100:0-3:nvlink", 133.3e9)])  # fmt: skip
def test_dgx1_allgather_reaches_the_links(spec, optimum):
    c = cluster(spec)
    rings = format_rings(pack_rings(c.graph, range(c.ngpus)))
    s = commsim.build("allgather", "packed_rings", nranks=c.ngpus, rings=rings)
    for mode in ("bottleneck", "flow"):
        pred = cluster_model(c, contention=mode).predict(s, 2**30)
        assert 2**30 / pred.time >= 0.9 * optimum


def test_parse_rings_reads_its_own_text():
    orders = ((0, 1, 2, 3), (0, 3, 2, 1))
    assert parse_rings(format_rings(orders), 4) == orders
