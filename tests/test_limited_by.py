"""One definition of "limited by" for every contention mode (issue #26).

A message's transfer time is charged to the link with the smallest fair share ``B_l / n_l`` among
the messages of its round (:func:`commsim.models._contention.bottleneck_link`); the prediction is
limited by the largest part of the last rank's chain. On the two 512-GPU fat trees of
``examples/clusters/`` (1:1 and 4:1 at the leaves), ``bottleneck``, ``maxmin`` and ``flow`` must
name the same class for the hierarchical allreduce at 1 GiB, and that class must be on the
critical path the prediction prints.
"""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

import commsim
from commsim.clusters import load_cluster
from commsim.models._contention import bottleneck_link
from commsim.tuner import cluster_model

CLUSTERS = pathlib.Path(__file__).parent.parent / "examples" / "clusters"


def test_a_link_is_shared_only_within_a_group():
    """Message A crosses link 0 (10 B/s) then link 1 (8 B/s); message B crosses link 0 alone.
    Together, link 0's share is 5 < 8: A is charged to link 0; in different groups (rounds) A
    has link 0 to itself (10 > 8) and link 1 is its smaller share."""
    indptr, links, bw = np.array([0, 2, 3]), np.array([0, 1, 0]), np.array([10.0, 8.0])
    assert bottleneck_link(indptr, links, bw).tolist() == [0, 0]
    assert bottleneck_link(indptr, links, bw, group=np.array([0, 0])).tolist() == [0, 0]
    assert bottleneck_link(indptr, links, bw, group=np.array([0, 1])).tolist() == [1, 0]


@pytest.mark.parametrize("name", ["fat-tree-1to1.toml", "fat-tree-4to1.toml"])
def test_every_contention_mode_names_the_same_limit(name):
    c = load_cluster(CLUSTERS / name)
    schedule = commsim.build(
        "allreduce", "hierarchical", nranks=c.ngpus, ranks_per_node=c.ranks_per_node
    )
    named = {}
    for mode in ("bottleneck", "maxmin", "flow"):
        pred = cluster_model(c, contention=mode).predict(schedule, 2**30)
        usage = pred.network
        limit = usage.limiting[-1]
        route_classes = set("+".join(usage.critical_path.kinds).split("+"))
        assert limit in route_classes, (mode, limit, usage.critical_path.kinds)
        named[mode] = limit
    assert len(set(named.values())) == 1, named
    assert (
        named["flow"] == "leaf-spine"
    )  # the NIC and the leaf uplinks bind together; the spine first
