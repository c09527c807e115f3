"""Shared pytest setup.

The environment defaults below must be in place before anything imports ``jax`` or ``numba``
(both read them once, at import time), so they sit at the very top of this module, which pytest
imports before any test module. ``scripts/test.sh`` exports the same values; an explicit setting in
the caller's environment always wins.

The ``toy_row`` fixture registers a toy algorithm for the duration of one test, to show that a
registry row alone gets an algorithm verified, cost-checked and executed (``tests/test_registry.py``).
"""

import os

# 8 fake CPU devices for the JAX-mesh executor (appended to any XLA_FLAGS the caller set, unless
# they already choose a count); CPU even on a machine with a GPU, so results do not depend on it.
_xla_flags = os.environ.get("XLA_FLAGS", "")
if "xla_force_host_platform_device_count" not in _xla_flags:
    os.environ["XLA_FLAGS"] = f"{_xla_flags} --xla_force_host_platform_device_count=8".strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")
# Numba-CUDA kernels run under the CUDA simulator unless the caller sets NUMBA_ENABLE_CUDASIM=0.
os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
# mpi4jax warns on import when JAX is newer than the newest version it was tested with.
os.environ.setdefault("MPI4JAX_NO_WARN_JAX_VERSION", "1")

from collections.abc import Iterator  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from commsim import Schedule, Step  # noqa: E402
from commsim.algorithms import AlgorithmInfo, info, lazy, register, unregister  # noqa: E402


@pytest.fixture(scope="session")
def rng() -> np.random.Generator:
    """A numpy Generator seeded with 0, shared by the whole session.

    Shared state means a test's draws depend on which tests ran before it; tests that need
    reproducible data on their own should call ``np.random.default_rng(seed)`` themselves.
    """
    return np.random.default_rng(0)


def toy_exchange_allreduce(nranks: int) -> Schedule:
    r"""Direct-exchange allreduce: in one step every rank adds its whole vector into every other.

    One slot. Single-port: each rank sends its ``n`` bytes ``p - 1`` times and receives (and
    reduces) ``p - 1`` vectors, one round at a time, all ranks in lockstep, so for every ``p``

    .. math:: T = (p-1)\,(\alpha + n\beta + n\gamma)

    Examples:
        >>> s = toy_exchange_allreduce(4)
        >>> s.nsteps, s.ntransfers  # one step of p(p-1) reducing transfers
        (1, 12)
    """
    p = nranks
    src = np.repeat(np.arange(p), p - 1)
    dst = (src + np.tile(np.arange(1, p), p)) % p
    return lazy(
        "allreduce",
        p,
        1 if p > 1 else 0,
        lambda _: Step.make(src, dst, 0, 0, reduce=True),
        slot_units=1,
        algorithm="toy_exchange",
        ntransfers_hint=p * (p - 1),
        max_step_transfers_hint=p * (p - 1),
    )


def _toy_exchange_cost(
    nranks: int, nbytes: float | np.ndarray, alpha: float, beta: float, gamma: float
) -> float | np.ndarray:
    """:func:`toy_exchange_allreduce`'s ``.. math::``: ``(p-1)(α + nβ + nγ)``."""
    return (nranks - 1) * (alpha + nbytes * beta + nbytes * gamma)


@pytest.fixture
def toy_row() -> Iterator[AlgorithmInfo]:
    """``allreduce/toy_exchange`` in the registry for the duration of a test, then removed."""
    register(
        "allreduce",
        "toy_exchange",
        cost_fn=_toy_exchange_cost,
        reference="a test's toy (tests/conftest.py)",
    )(toy_exchange_allreduce)
    try:
        yield info("allreduce", "toy_exchange")
    finally:
        unregister("allreduce", "toy_exchange")


@pytest.fixture(scope="session")
def toy_allreduce():
    """A builder of a hand-made 2-rank allreduce that is not in the registry (reduce-scatter then
    allgather, ``"toy"``), or of its first step alone (``complete=False``: ``"half_toy"``, wrong)."""
    import commsim

    def build(*, complete: bool = True) -> commsim.Schedule:
        step = commsim.Step.make
        rs = step(src=[0, 1], dst=[1, 0], src_slot=[1, 0], dst_slot=[1, 0], count=[1, 1], reduce=1)
        ag = step(src=[0, 1], dst=[1, 0], src_slot=[0, 1], dst_slot=[0, 1], count=[1, 1], reduce=0)
        return commsim.Schedule.from_steps(
            [rs, ag] if complete else [rs],
            collective="allreduce",
            nranks=2,
            nslots=2,
            algorithm="toy" if complete else "half_toy",
        )

    return build
