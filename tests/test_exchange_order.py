"""The exchange order of the recursive algorithms (issue #19, part 8): ``order`` on the rows that
declare it, MPICH's nearest-partner-first order against the farthest-first one.

Both orders verify at every ``p`` and cost the same under Hockney (the row's formula holds for
each); on an oversubscribed tree near-first keeps Rabenseifner's ``n/2`` messages under one leaf;
a bad value is one line (exit 2 on the command line); the tuner tries each declared value.
"""

from __future__ import annotations

import numpy as np
import pytest

import commsim
from commsim.algorithms import REGISTRY, info, register
from commsim.algorithms.recursive import ORDERS
from commsim.clusters import cluster
from commsim.errors import ParameterError
from commsim.models import Hockney, Topology
from commsim.topology import fat_tree
from commsim.tuner import tune

ROWS = [
    ("allreduce", "rabenseifner"),
    ("allreduce", "recursive_doubling"),
    ("reduce", "rabenseifner"),
]
MODELS = [(1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0), (2.7e-6, 3.1e-10, 7.7e-11)]
IDS = ["/".join(key) for key in ROWS]
SIZES = np.array([1.0, 4096.0, 1e6 + 3, 3.3e8])


def test_the_rows_with_an_order_declare_both_values_default_first():
    declared = {key for key, row in REGISTRY.items() if "order" in row.choices}
    assert declared == set(ROWS)
    for key in ROWS:
        row = REGISTRY[key]
        assert set(row.choices["order"]) == set(ORDERS)
        assert row.choices["order"][0] == row.params["order"]  # the default, today's order
    assert info("allreduce", "recursive_doubling").params["order"] == "near_first"
    assert info("allreduce", "rabenseifner").params["order"] == "far_first"


@pytest.mark.parametrize(("collective", "algorithm"), ROWS, ids=IDS)
@pytest.mark.parametrize("order", ORDERS)
def test_both_orders_verify_at_every_p_up_to_64(collective, algorithm, order):
    for p in range(1, 65):
        s = commsim.build(collective, algorithm, nranks=p, order=order)
        assert commsim.verify(s).nranks == p
        assert s.params["order"] == order


@pytest.mark.parametrize(("collective", "algorithm"), ROWS, ids=IDS)
def test_both_orders_cost_the_same_under_hockney(collective, algorithm):
    """The ``.. math::`` holds for both orders: the model gives the row's formula for each."""
    row = info(collective, algorithm)
    for p in [*range(1, 18), 24, 31, 32, 33, 63, 64, 65, 100]:
        far, near = (commsim.build(collective, algorithm, nranks=p, order=o) for o in ORDERS)
        assert (far.nsteps, far.ntransfers) == (near.nsteps, near.ntransfers)
        for alpha, beta, gamma in MODELS:
            model = Hockney(alpha=alpha, beta=beta, gamma=gamma)
            want = row.time(p, SIZES, alpha, beta, gamma)
            for s in (far, near):
                np.testing.assert_allclose(model.predict(s, SIZES).time, want, rtol=1e-9)


def test_near_first_sends_the_big_halves_to_the_neighbour():
    """p = 16: the halving's first step and the doubling's last carry n/2 (8 slots)."""
    for order, partner in [("far_first", 8), ("near_first", 1)]:
        s = commsim.build("allreduce", "rabenseifner", nranks=16, order=order)
        first, last = s.step(0), s.step(s.nsteps - 1)
        for st in (first, last):
            assert np.all(st.count == 8)
            assert np.array_equal(st.dst, st.src ^ partner)
    doubling = commsim.build("allreduce", "recursive_doubling", nranks=16, order="far_first")
    assert [int(doubling.step(k).dst[0]) for k in range(4)] == [8, 4, 2, 1]


@pytest.mark.parametrize("contention", ["flow", "bottleneck"])
def test_near_first_is_several_times_faster_on_a_16_to_1_tree(contention):
    """64 ranks, 16 per leaf, 16:1 uplinks, 64 MiB (the issue's case): far-first sends n/2 across
    the spine twice, near-first only the small messages (66.4 ms against 9.75 ms)."""
    net = fat_tree(64, hosts_per_leaf=16, oversubscription=16)
    model = Topology(net, contention=contention)
    t = {
        o: model.predict(commsim.build("allreduce", "rabenseifner", nranks=64, order=o), 64 << 20)
        for o in ORDERS
    }
    assert t["far_first"].time > 5 * t["near_first"].time
    assert t["far_first"].time == pytest.approx(66.4e-3, rel=0.01)
    assert t["near_first"].time == pytest.approx(9.75e-3, rel=0.01)


@pytest.mark.parametrize("spec", ["dgx-h100:2", "dgx-h200:2", "dgx-b200:4", "gb200-nvl72:1"])
def test_both_orders_run_on_the_preset_shapes(spec):
    c = cluster(spec)
    model = Topology(c.graph, gamma=c.gamma)
    for collective, algorithm in ROWS:
        for order in ORDERS:
            s = commsim.build(collective, algorithm, nranks=c.ngpus, order=order)
            commsim.verify(s)
            assert model.predict(s, 1 << 20).time > 0


@pytest.mark.parametrize(("collective", "algorithm"), ROWS, ids=IDS)
def test_an_unknown_order_is_one_line(collective, algorithm):
    with pytest.raises(ParameterError, match=r"order must be one of (far|near)_first, ") as e:
        commsim.build(collective, algorithm, nranks=8, order="nearest")
    assert "\n" not in str(e.value) and "'nearest'" in str(e.value)
    with pytest.raises(ParameterError, match="order must be one of"):  # the factory itself too
        info(collective, algorithm).factory(8, order="Near_First")


def test_the_command_line_says_it_in_one_line_and_exits_2(capsys):
    from commsim.cli import main

    argv = ["predict", "-c", "allreduce", "-a", "rabenseifner", "-p", "8", "-s", "1MiB"]
    assert main([*argv, "--param", "order=sideways"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "order must be one of far_first, near_first" in err
    assert main([*argv, "--param", "order=near_first"]) == 0


def test_the_tuner_tries_each_declared_value():
    """On the 16:1 tree near-first wins the large sizes; under Hockney the orders tie and the
    default (the first value) is kept."""
    net = fat_tree(64, hosts_per_leaf=16, oversubscription=16)
    table = tune("allreduce", Topology(net), 64, "16MiB..64MiB", algorithms=["rabenseifner"])
    assert table.lookup(64 << 20).params["order"] == "near_first"
    table = tune("allreduce", Hockney(), 64, "16MiB..64MiB", algorithms=["rabenseifner"])
    assert table.lookup(64 << 20).params["order"] == "far_first"
    table = tune(
        "allreduce",
        Topology(net),
        64,
        "64MiB",
        algorithms=["rabenseifner"],
        params={"rabenseifner": {"order": "far_first"}},  # a value the user fixes stays fixed
    )
    assert table.lookup(64 << 20).params["order"] == "far_first"


def test_declared_choices_must_hold_the_default():
    def toy(nranks: int, order: str = "diagonal") -> commsim.Schedule:
        raise AssertionError("never built")

    with pytest.raises(ValueError, match="choices\\['order'\\] must name a parameter"):
        register("allreduce", "toy_order", cost_fn=lambda *a, **k: 0.0, choices={"order": ORDERS})(
            toy
        )
    assert ("allreduce", "toy_order") not in REGISTRY
