"""The flow simulation's sizes run as chains that recall the previous size's max-min rates
(:func:`commsim.models._flow._recall`): the same bits as each size alone."""

from __future__ import annotations

import numpy as np

import commsim
from commsim.models import Topology
from commsim.models._flow import _recall
from commsim.topology import fat_tree


def test_recall_copies_rates_only_for_the_same_flows_in_the_same_order():
    ptr = np.array([0, 2, 5])
    items = np.array([3, 1, 0, 1, 2])
    rates = np.array([10.0, 20.0, 1.0, 2.0, 3.0])
    rate = np.zeros(4)
    assert _recall(np.array([0, 1, 2]), 3, rate, 1, ptr, items, rates)
    assert rate.tolist() == [1.0, 2.0, 3.0, 0.0]
    assert not _recall(np.array([1, 3]), 2, rate, 0, ptr, items, rates)  # another order
    assert not _recall(np.array([3, 1]), 2, rate, 2, ptr, items, rates)  # no such computation
    assert not _recall(np.array([3]), 1, rate, 0, ptr, items, rates)  # fewer flows


def test_neighbouring_sizes_on_a_shared_fabric_give_each_size_alone():
    """An oversubscribed tree (max-min rates below the link rates), sizes close enough to share
    their event structure, so that most rates are recalled."""
    s = commsim.build("allreduce", "ring", nranks=16)
    model = Topology(fat_tree(16, hosts_per_leaf=4, oversubscription=2), contention="flow")
    sizes = 2.0 ** np.arange(16, 26)
    together = model.predict(s, sizes)
    for k, n in enumerate(sizes):
        alone = model.predict(s, np.array([n]))
        assert together.time[k] == alone.time[0]
        assert np.array_equal(together.rank_time[:, k], alone.rank_time[:, 0])
        assert np.array_equal(together.step_time[:, k], alone.step_time[:, 0])
