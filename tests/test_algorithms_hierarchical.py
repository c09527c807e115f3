"""Hierarchical and NCCL-style algorithms: verified at every p the issue names and on the preset
shapes (uneven last servers included), costs against independently derived sums of phases,
and their errors."""

from __future__ import annotations

import numpy as np
import pytest

import commsim
from commsim.errors import ParameterError, UnknownNameError
from commsim.models import Hockney

NEW = [
    ("allreduce", "hierarchical"),
    ("reduce_scatter", "hierarchical"),
    ("allgather", "hierarchical"),
    ("alltoall", "hierarchical"),
    ("allreduce", "nccl_tree"),
    ("allreduce", "snake_ring"),
]
P = [*range(1, 65), 100, 1000]


@pytest.mark.parametrize(("collective", "algorithm"), NEW)
@pytest.mark.parametrize("rpn", [1, 2, 4, 8, 72])
def test_verifies_at_every_p(collective, algorithm, rpn):
    for p in P:
        s = commsim.build(collective, algorithm, nranks=p, ranks_per_node=rpn)
        commsim.verify(s)


@pytest.mark.parametrize(("collective", "algorithm"), NEW)
@pytest.mark.parametrize(
    ("p", "rpn"),
    [(16, 8), (24, 8), (1000, 8), (1004, 8), (144, 72), (150, 72), (16, 4), (100, 4)],
    ids=["dgx2", "dgx3", "dgx125", "dgx-uneven", "nvl72x2", "nvl72-uneven", "tpu4", "tpu25"],
)
def test_verifies_on_preset_shapes(collective, algorithm, p, rpn):
    commsim.verify(commsim.build(collective, algorithm, nranks=p, ranks_per_node=rpn))


def _ring_rs(p, n, a, b, g):
    return (p - 1) * a + (p - 1) / p * n * (b + g)


def _ring_ag(p, n, a, b, g):
    return (p - 1) * a + (p - 1) / p * n * b


@pytest.mark.parametrize(("p", "g"), [(16, 4), (24, 8), (64, 8), (12, 3)])
def test_hierarchical_costs_are_the_sums_of_their_phases(p, g):
    """Whole groups: ring phases inside (g ranks, n bytes), ring across (N = p/g ranks, n/g
    bytes); written here from the ring formulas, not from the row."""
    n_groups, n = p // g, 1e6
    for a, b, gm in [(1e-6, 1e-9, 2e-10), (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)]:
        model = Hockney(a, b, gm)
        inner_rs, inner_ag = _ring_rs(g, n, a, b, gm), _ring_ag(g, n, a, b, gm)
        outer = _ring_rs(n_groups, n / g, a, b, gm) + _ring_ag(n_groups, n / g, a, b, gm)
        for collective, want in [
            ("allreduce", inner_rs + outer + inner_ag),
            ("reduce_scatter", inner_rs + _ring_rs(n_groups, n / g, a, b, gm)),
            ("allgather", _ring_ag(n_groups, n / g, a, b, gm) + inner_ag),
        ]:
            s = commsim.build(collective, "hierarchical", nranks=p, ranks_per_node=g)
            assert model.predict(s, n).time == pytest.approx(want, rel=1e-12)


def test_three_levels_by_nesting_inter():
    """Groups of 4 inside, then groups of 2 servers, then a ring: the outer phase is itself a
    hierarchical allreduce built from the registry."""
    s = commsim.build("allreduce", "hierarchical", nranks=32, ranks_per_node=4, inter="ring")
    commsim.verify(s)
    three = commsim.build(
        "allreduce", "hierarchical", nranks=32, ranks_per_node=4, inter="rabenseifner"
    )
    commsim.verify(three)


def test_uneven_groups_cost_more_than_whole_ones():
    """A short last group's members own several blocks and take part in several outer copies
    at once, sharing their port: 13 ranks in groups of 4 are slower than 12."""
    m = Hockney(1e-6, 1e-9, 0.0)
    t12 = m.predict(
        commsim.build("allreduce", "hierarchical", nranks=12, ranks_per_node=4), 1e6
    ).time
    t13 = m.predict(
        commsim.build("allreduce", "hierarchical", nranks=13, ranks_per_node=4), 1e6
    ).time
    assert t13 > t12


def test_nccl_tree_on_one_server_is_two_pipelined_chains():
    p, k, n = 8, 8, 1e6  # segments=4: the double binary tree's 2k = 8 slots
    a, b, g = 1e-6, 1e-9, 2e-10
    s = commsim.build("allreduce", "nccl_tree", nranks=p, ranks_per_node=8, segments=4)
    want = (k + p - 2) * (a + n / k * (b + g)) + (k + p - 2) * (a + n / k * b)
    assert Hockney(a, b, g).predict(s, n).time == pytest.approx(want, rel=1e-12)


def test_snake_ring_crosses_servers_on_one_local_index():
    s = commsim.build("allreduce", "snake_ring", nranks=32, ranks_per_node=8)
    st = s.step(0)
    across = (st.src // 8) != (st.dst // 8)
    assert (st.src[across] % 8 == st.dst[across] % 8).all()  # same GPU index = same rail


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_bad_ranks_per_node(bad):
    with pytest.raises(ParameterError, match="ranks_per_node must be an integer >= 1"):
        commsim.build("allreduce", "hierarchical", nranks=8, ranks_per_node=bad)


def test_unknown_inter_algorithm_names_the_closest():
    with pytest.raises(UnknownNameError, match="rabenseifner"):
        commsim.build("allreduce", "hierarchical", nranks=8, inter="rabenseifer")


def test_hierarchical_executes_on_numpy_with_uneven_groups():
    from commsim.exec import execute, layout, random_inputs

    for collective in ("allreduce", "reduce_scatter", "allgather"):
        s = commsim.build(collective, "hierarchical", nranks=11, ranks_per_node=4)
        lay = layout(s, 2 * s.nbytes_units)
        out = execute(s, random_inputs(lay, "int32", seed=3), backend="numpy")
        assert np.asarray(out).dtype == np.int32


@pytest.mark.parametrize(("p", "g"), [(16, 4), (24, 8), (64, 8)])
def test_hierarchical_alltoall_sends_fewer_larger_messages(p, g):
    """Each rank sends g - 1 messages of n/g inside and N - 1 of n/N across (N = p/g), instead of
    p - 1 of n/p: fewer latencies, every byte moved twice."""
    n_groups, n = p // g, 1e6
    s = commsim.build("alltoall", "hierarchical", nranks=p, ranks_per_node=g)
    sent = np.zeros(p, dtype=int)
    for st in s.steps():
        remote = st.src != st.dst
        pairs = set(zip(st.src[remote].tolist(), st.dst[remote].tolist(), strict=True))
        for a, _ in pairs:
            sent[a] += 1
    assert (sent == g - 1 + n_groups - 1).all()
    a, b = 1e-6, 1e-9
    want = (g - 1) * (a + n / g * b) + (n_groups - 1) * (a + n / n_groups * b)
    assert Hockney(a, b, 0.0).predict(s, n).time == pytest.approx(want, rel=1e-12)
