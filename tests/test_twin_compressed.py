"""The twin's compressions: the orbit fold, the batched sweep and matrix powers of repeated
rounds give the full replay's numbers.

Every registry row on Hockney and four allreduce rows on a cluster: the folded replay equals
the full one (``compress=False``) and the compiled model to 1e-9, its gradient equals the full
replay's, and ``sweep`` (parameter sets as the inner axis) equals one call per set. A program
without symmetry (a straggler, a skewed start) is replayed on every port. Runs of identical
rounds of a folded program, swept as max-plus matrix powers, equal the replay to 1e-9.
"""

from __future__ import annotations

import numpy as np
import pytest

import commsim
from commsim._cluster_model import cluster_model
from commsim.algorithms import REGISTRY, channels
from commsim.clusters import cluster
from commsim.errors import ParameterError, ScheduleError
from commsim.models import Hockney, Twin
from commsim.models._twin_orbits import fold, period
from commsim.models._twin_runs import runs

SIZES = np.array([1e3, 1e6, 1e9])
H = Hockney(alpha=2e-6, beta=1 / 25e9, gamma=1 / 100e9)


def _both(model, schedule) -> tuple[Twin, Twin]:
    return Twin.of(model, schedule), Twin.of(model, schedule, compress=False)


@pytest.mark.parametrize("key", sorted(REGISTRY), ids=lambda k: f"{k[0]}-{k[1]}")
def test_folded_replay_equals_the_full_one_on_every_row(key):
    collective, algorithm = key
    try:
        s = commsim.build(collective, algorithm, nranks=6)
    except (ParameterError, ScheduleError):
        s = commsim.build(collective, algorithm, nranks=8)
    folded, full = _both(H, s)
    assert full.replayed is full.program
    np.testing.assert_allclose(
        folded.times(folded.params(), SIZES), full.times(full.params(), SIZES), rtol=1e-9
    )


@pytest.mark.parametrize(
    "algorithm", ["ring", "hierarchical", "rabenseifner", "recursive_doubling"]
)
def test_folded_cluster_rows_equal_the_full_replay_with_their_gradient(algorithm):
    model = cluster_model(cluster("dgx-h100:4"), contention="bottleneck")
    s = commsim.build("allreduce", algorithm, nranks=32)
    folded, full = _both(model, s)
    assert folded.replayed.nports < full.program.nports  # identical servers: a symmetry
    np.testing.assert_allclose(
        folded.times(folded.params(), SIZES), model.predict(s, SIZES).time, rtol=1e-9
    )
    for n in SIZES:
        g, h = folded.grad(folded.params(), n), full.grad(full.params(), n)
        for k in g:
            np.testing.assert_allclose(g[k], h[k], rtol=1e-9, atol=1e-300)


def test_a_ring_on_identical_servers_folds_to_one_server():
    model = cluster_model(cluster("dgx-h100:4"), contention="bottleneck")
    twin = Twin.of(model, commsim.build("allreduce", "ring", nranks=32))
    assert period(twin.program) == 8  # the GPUs of a server
    assert twin.replayed.nports == 8
    assert period(Twin.of(H, commsim.build("allreduce", "ring", nranks=8)).program) == 1


def test_two_channels_fold_and_equal_the_compiled_model():
    s = channels(commsim.build("allreduce", "rabenseifner", nranks=8), 2)
    model = Hockney(alpha=2e-6, beta=1 / 25e9, gamma=1 / 100e9, links=2)
    folded, full = _both(model, s)
    expect = model.predict(s, SIZES).time
    np.testing.assert_allclose(folded.times(folded.params(), SIZES), expect, rtol=1e-9)
    np.testing.assert_allclose(full.times(full.params(), SIZES), expect, rtol=1e-9)


@pytest.mark.parametrize(
    "stragglers", [{"slow_ranks": {3: 2.0}}, {"start_skew": [0.0] * 31 + [5e-6]}]
)
def test_a_program_without_symmetry_is_replayed_on_every_port(stragglers):
    model = cluster_model(cluster("dgx-h100:4"), contention="bottleneck", **stragglers)
    s = commsim.build("allreduce", "ring", nranks=32)
    twin = Twin.of(model, s)
    assert fold(twin.program) is None and twin.replayed is twin.program  # the fallback
    np.testing.assert_allclose(twin.times(twin.params(), SIZES), model.predict(s, SIZES).time, 1e-9)


@pytest.mark.parametrize("kind", ["hockney", "topology"])
def test_sweep_equals_one_call_per_parameter_set(kind):
    s = commsim.build("allreduce", "hierarchical", nranks=32, ranks_per_node=8)
    model = H if kind == "hockney" else cluster_model(cluster("dgx-h100:4"))
    twin = Twin.of(model, s)
    rng = np.random.default_rng(1)
    base, n = twin.params(), 9
    batch = {k: np.asarray(v) * rng.uniform(0.5, 2.0, (n, *np.shape(v))) for k, v in base.items()}
    many = twin.sweep(batch, 3e6)
    one = [float(twin.time({k: v[i] for k, v in batch.items()}, 3e6)) for i in range(n)]
    np.testing.assert_allclose(many, one, rtol=1e-12)


def test_runs_of_identical_rounds_are_matrix_powers_in_a_sweep():
    model = cluster_model(cluster("dgx-h100:16"), contention="bottleneck")
    s = commsim.build("allreduce", "ring", nranks=128)
    twin, full = _both(model, s)
    assert twin._runs == ((0, 127), (127, 127))  # reduce-scatter, then allgather
    assert full._runs is None and runs(twin.program) is None  # 128 ports: no matrix powers
    rng = np.random.default_rng(2)
    base, n = twin.params(), 5
    batch = {k: np.asarray(v) * rng.uniform(0.5, 2.0, (n, *np.shape(v))) for k, v in base.items()}
    for size in SIZES:
        np.testing.assert_allclose(twin.sweep(batch, size), full.sweep(batch, size), rtol=1e-9)
    one = {k: np.asarray(v)[None] for k, v in base.items()}
    np.testing.assert_allclose(twin.sweep(one, 1e9), model.predict(s, 1e9).time, rtol=1e-9)


@pytest.mark.parametrize("collective", ["allreduce", "allgather", "reduce_scatter"])
def test_hockney_ring_sweeps_by_matrix_powers(collective):
    s = commsim.build(collective, "ring", nranks=8)
    twin, full = _both(H, s)
    assert twin.replayed.nports == 1 and twin._runs is not None
    batch = {k: np.linspace(0.5, 2.0, 4) * v for k, v in twin.params().items()}
    for size in SIZES:
        np.testing.assert_allclose(twin.sweep(batch, size), full.sweep(batch, size), rtol=1e-9)
