"""The double binary tree on two channels (``double_binary_tree_channels``): verified at
p = 1..64, each tree on its own channel, and its Hockney time on two independent links against
its ``.. math::`` (equal at p = 2 and p = 2^H, never above the right side, never slower than the
one-port tree); the one-port row is untouched; and, registered for one test, the registry
sweep's own checks pass on its row (verification at the sweep's p, cost on one link where the
row says exact, the lower bound, every single-process backend).

It is not a permanent registry row yet: registry-wide tests written for single-channel rows
(``tests/test_channels.py``, ``test_two_level.py``, ``test_topology_model.py``,
``test_topology_contention.py``) compare the topology model, whose channels are in flight
together, with single-link Hockney."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import commsim
from commsim.algorithms import info, register, unregister
from commsim.algorithms.trees import (
    _dbt_channels_cost,
    _dbt_channels_exact,
    _dbt_cost,
    double_binary_tree_channels,
)
from commsim.models import Hockney

_spec = importlib.util.spec_from_file_location(
    "registry_sweep", Path(__file__).parent / "test_registry.py"
)
_sweep = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_sweep)

A, B, G = 1e-6, 1e-9, 3e-10


@pytest.mark.parametrize("k", [1, 2, 4])
def test_verified_at_every_p_up_to_64_and_the_closed_form_holds(k):
    two = Hockney(alpha=A, beta=B, gamma=G, links=2)
    one = Hockney(alpha=A, beta=B, gamma=G)
    for p in range(1, 65):
        s = double_binary_tree_channels(p, segments=k)
        commsim.verify(s)
        n = np.array([2.0 * k * p * 1000, 2.0**20])
        t = two.predict(s, n).time
        form = _dbt_cost(p, n, A, B, G, segments=k)
        ref = one.predict(commsim.build("allreduce", "double_binary_tree", nranks=p, segments=k), n)
        if p == 2 or p & (p - 1) == 0:
            np.testing.assert_allclose(t, form, rtol=1e-12, err_msg=f"p={p} k={k}")
        assert (t <= form * (1 + 1e-12)).all(), (p, k)
        assert (t <= ref.time * (1 + 1e-12)).all(), (p, k)


@pytest.mark.parametrize("p", [2, 3, 8, 13])
def test_each_tree_is_a_channel(p):
    s = double_binary_tree_channels(p, segments=2)
    assert s.nchannels == 2 and s.params == {"segments": 2}
    one_port = commsim.build("allreduce", "double_binary_tree", nranks=p, segments=2)
    assert s.ntransfers == one_port.ntransfers
    for st in s.steps():  # channel c moves the c-th share of every slot
        assert (st.src_slot % 2 == st.channel).all()


def test_two_channels_beat_one_port_where_the_colours_made_a_tree_wait():
    """p = 3 with one segment: the trees' colours leave a rank idle on one port."""
    two = Hockney(alpha=A, beta=B, gamma=G, links=2)
    one = Hockney(alpha=A, beta=B, gamma=G)
    s = double_binary_tree_channels(3, segments=1)
    ref = commsim.build("allreduce", "double_binary_tree", nranks=3, segments=1)
    assert two.predict(s, "1MiB").time < 0.75 * one.predict(ref, "1MiB").time


def test_the_one_port_row_is_unchanged():
    s = commsim.build("allreduce", "double_binary_tree", nranks=8)
    assert s.nchannels == 1 and s.params == {"segments": 4}
    assert "double_binary_tree_channels" not in commsim.available("allreduce")


def test_its_row_passes_the_registry_sweep():
    register(
        "allreduce",
        "double_binary_tree_channels",
        cost_fn=_dbt_channels_cost,
        exact=_dbt_channels_exact,
        constraints="one tree per channel; exact for p = 2, 2^m on one link or two",
        reference="Sanders, Speck & Träff 2009; NCCL double binary tree, a tree per channel",
    )(double_binary_tree_channels)
    try:
        _sweep.check_row(info("allreduce", "double_binary_tree_channels"))
    finally:
        unregister("allreduce", "double_binary_tree_channels")
