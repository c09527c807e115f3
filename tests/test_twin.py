"""The JAX twin: the compiled models' numbers as a pure function of their parameters.

Equality with the compiled model is checked over the registry (Hockney, with one and with two
links) and on a cluster under bottleneck contention; gradients against central finite
differences; elasticities against Euler's theorem (they sum to 1).
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

import commsim
from commsim._cluster_model import cluster_model
from commsim.algorithms import REGISTRY, channels
from commsim.clusters import cluster
from commsim.errors import ParameterError, ScheduleError
from commsim.models import Hockney, LogGP, Twin
from commsim.topology import switch

SIZES = np.array([1e3, 1e6, 1e9])
H = Hockney(alpha=2e-6, beta=1 / 25e9, gamma=1 / 100e9)


@pytest.mark.parametrize("key", sorted(REGISTRY), ids=lambda k: f"{k[0]}-{k[1]}")
def test_hockney_twin_equals_the_compiled_model_on_every_row(key):
    collective, algorithm = key
    try:
        s = commsim.build(collective, algorithm, nranks=6)
    except (ParameterError, ScheduleError):
        s = commsim.build(collective, algorithm, nranks=8)
    twin = Twin.of(H, s)
    np.testing.assert_allclose(twin.times(twin.params(), SIZES), H.predict(s, SIZES).time, 1e-9)


def test_twin_of_channels_on_two_links():
    s = channels(commsim.build("allreduce", "rabenseifner", nranks=8), 2)
    model = Hockney(alpha=2e-6, beta=1 / 25e9, gamma=1 / 100e9, links=2)
    twin = Twin.of(model, s)
    np.testing.assert_allclose(twin.times(twin.params(), SIZES), model.predict(s, SIZES).time, 1e-9)


@pytest.mark.parametrize(
    "algorithm", ["ring", "hierarchical", "rabenseifner", "recursive_doubling"]
)
def test_topology_twin_equals_the_compiled_model_on_a_cluster(algorithm):
    model = cluster_model(cluster("dgx-h100:4"), contention="bottleneck")
    s = commsim.build("allreduce", algorithm, nranks=32)
    twin = Twin.of(model, s)
    assert twin.classes == tuple(model.network.kinds)
    np.testing.assert_allclose(twin.times(twin.params(), SIZES), model.predict(s, SIZES).time, 1e-9)


def test_gradient_equals_a_central_difference():
    model = cluster_model(cluster("dgx-h100:2"), contention="bottleneck")
    s = commsim.build("allreduce", "ring", nranks=16)
    twin = Twin.of(model, s)
    p, n, h = twin.params(), 64e6, 1e-4
    grad = twin.grad(p, n)
    for name in ("latency", "inv_bandwidth"):
        for k in range(len(twin.classes)):
            up, down = {**p, name: p[name].copy()}, {**p, name: p[name].copy()}
            up[name][k] *= 1 + h
            down[name][k] *= 1 - h
            fd = (float(twin.time(up, n)) - float(twin.time(down, n))) / (2 * h * float(p[name][k]))
            assert grad[name][k] == pytest.approx(fd, rel=1e-5, abs=1e-12)


def test_hockney_gradient_is_the_closed_form():
    p, n = 8, 1e6
    twin = Twin.of(H, commsim.build("allreduce", "ring", nranks=p))
    g = twin.grad(twin.params(), n)
    assert g["alpha"] == pytest.approx(2 * (p - 1))
    assert g["beta"] == pytest.approx(2 * (p - 1) / p * n)
    assert g["gamma"] == pytest.approx((p - 1) / p * n)


def test_elasticities_sum_to_one():
    model = cluster_model(cluster("dgx-h100:4"), contention="bottleneck")
    twin = Twin.of(model, commsim.build("allreduce", "hierarchical", nranks=32))
    e = twin.elasticities("1KiB..1GiB")
    total = sum(v.reshape(v.shape[0], -1).sum(axis=1) for v in e.values())
    np.testing.assert_allclose(total, 1.0, rtol=1e-9)


def test_vmap_over_parameter_sets_equals_one_call_each():
    twin = Twin.of(Topology := cluster_model(cluster("dgx-h100:2"), contention="none"),
                   commsim.build("allreduce", "ring", nranks=16))  # fmt: skip
    del Topology
    scale = np.linspace(0.5, 2.0, 7)
    with jax.enable_x64(True):
        base = twin.params()
        batch = {**base, "inv_bandwidth": base["inv_bandwidth"][None, :] * scale[:, None]}
        axes = {k: (0 if k == "inv_bandwidth" else None) for k in base}
        many = jax.vmap(twin.time, in_axes=(axes, None))(batch, 1e8)
    one = [
        float(twin.time({**base, "inv_bandwidth": base["inv_bandwidth"] * f}, 1e8)) for f in scale
    ]
    np.testing.assert_allclose(np.asarray(many), one, rtol=1e-12)


def test_launch_and_overlapped_reductions_are_replayed():
    model = cluster_model(cluster("dgx-h100:2"), contention="bottleneck")
    assert model.launch > 0 and model.reduction_overlap  # a GPU preset's library layer
    s = commsim.build("allreduce", "ring", nranks=16)
    twin = Twin.of(model, s)
    np.testing.assert_allclose(twin.times(twin.params(), SIZES), model.predict(s, SIZES).time, 1e-9)
    assert twin.grad(twin.params(), 1e3)["launch"] == pytest.approx(1.0)


def test_the_twin_refuses_what_it_cannot_replay():
    s = commsim.build("allreduce", "ring", nranks=4)
    with pytest.raises(ParameterError, match="maxmin"):
        Twin.of(cluster_model(cluster("dgx-h100:1"), contention="maxmin"), s)
    with pytest.raises(ParameterError, match="single-port"):
        Twin.of(Hockney(ports=2), s)
    with pytest.raises(ParameterError, match="protocol"):
        Twin.of(cluster_model(cluster("dgx-h100:1"), protocol="LL"), s)
    with pytest.raises(ParameterError, match="LogGP"):
        Twin.of(LogGP(), s)
    assert Twin.of(commsim.models.Topology(switch(4)), s).classes


def test_a_class_multiplier_is_that_class_made_faster():
    """Twin with the rail class's inverse bandwidth x0.5 and NVLink latency x2 = the compiled
    model on a graph whose rails are twice as fast and NVLinks twice as slow to start."""
    import networkx as nx

    from commsim.models import Topology

    base = cluster_model(cluster("dgx-h100:2"), contention="bottleneck")
    g = nx.Graph(base.network.graph)
    for u, v, d in g.edges(data=True):
        if d.get("kind") == "rail":
            g.edges[u, v]["bandwidth"] = d["bandwidth"] * 2
        if d.get("kind") == "nvlink":
            g.edges[u, v]["latency"] = d["latency"] * 2
    faster = Topology(
        g, contention="bottleneck", gamma=base.gamma, launch=base.launch,
        reduction_overlap=base.reduction_overlap, link_efficiency=base.link_efficiency,
    )  # fmt: skip
    s = commsim.build("allreduce", "hierarchical", nranks=16, ranks_per_node=8)
    twin = Twin.of(base, s)
    p = twin.params()
    p["inv_bandwidth"][twin.classes.index("rail")] = 0.5
    p["latency"][twin.classes.index("nvlink")] = 2.0
    np.testing.assert_allclose(twin.times(p, SIZES), faster.predict(s, SIZES).time, rtol=1e-9)
