"""The mpi4jax drop-in collective against mpi4jax's own collectives, at p = the MPI world size.

Run as ``mpirun -n 2 python -m pytest tests/mpi/test_mpi_dropin.py`` (and ``-n 4``); plain
``pytest`` runs it at world size 1. Every rank draws its own data (seeded by its rank), calls
the drop-in and mpi4jax's collective inside ``jax.jit`` on the same pytree (scalars, sizes that
do not divide by p, two dtypes) and compares its own results. Assertions do not depend on the
world size; every error is raised on every rank alike, before any message is sent.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import commsim
from commsim.errors import CommsimError, ParameterError

pytestmark = pytest.mark.mpi


class Mpi(NamedTuple):
    MPI: Any
    mpi4jax: Any
    p: int
    rank: int


@pytest.fixture(scope="module")
def mpi(world) -> Mpi:
    """mpi4py's ``MPI``, ``mpi4jax``, the world size and this rank; skipped (by the ``world``
    fixture) without MPI."""
    import mpi4jax
    from mpi4py import MPI

    return Mpi(MPI, mpi4jax, world, MPI.COMM_WORLD.Get_rank())


def tree(rank: int, p: int, shapes: dict, seed: int = 0) -> dict:
    """This rank's inputs; ``shapes`` maps names to ``(shape, dtype)``, ``"p"`` in a shape
    standing for the world size."""
    rng = np.random.default_rng([seed, rank])
    out = {}
    for name, (shape, dt) in shapes.items():
        shape = tuple(p * k[0] if isinstance(k, tuple) else k for k in shape)
        dt = np.dtype(dt)
        if dt.kind in "iu":
            out[name] = jnp.asarray(rng.integers(-1000, 1000, shape).astype(dt))
        else:
            out[name] = jnp.asarray(rng.standard_normal(shape).astype(dt))
    return out


def assert_same(got, want, p):
    assert jax.tree.structure(got) == jax.tree.structure(want)
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype
        if w.dtype.kind in "iu":
            np.testing.assert_array_equal(g, w)
        else:  # the schedule adds in another order than MPI_Allreduce
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5 * p)


WHOLE = {"b": ((), "float32"), "w": ((5, 3), "float32"), "n": ((13,), "int32"), "i": ((), "int32")}
BLOCKED = {"a": (((1,),), "float32"), "b": (((2,), 3), "float32"), "c": (((3,), 1, 5), "int32")}


@pytest.mark.parametrize(
    "algo", ["ring", "rabenseifner", "recursive_doubling", "swing_bandwidth", "direct"]
)
def test_allreduce_equals_mpi4jax(mpi, algo):
    MPI, mpi4jax, p, rank = mpi
    g = commsim.exec.mpi.collective(commsim.build("allreduce", algo, nranks=p), MPI.COMM_WORLD)
    x = tree(rank, p, WHOLE)
    want = jax.jit(
        lambda t: jax.tree.map(lambda v: mpi4jax.allreduce(v, op=MPI.SUM, comm=MPI.COMM_WORLD), t)
    )(x)
    assert_same(jax.jit(g)(x), want, p)
    assert g.traces == 2  # one schedule call per dtype


def test_on_a_sub_communicator(mpi):
    """The even and the odd ranks each reduce among themselves, as mpi4jax on the same comm."""
    MPI, mpi4jax, p, rank = mpi
    sub = MPI.COMM_WORLD.Split(rank % 2, rank)
    g = commsim.exec.mpi.collective(commsim.build("allreduce", "ring", nranks=sub.size), sub)
    x = tree(rank, p, WHOLE, seed=1)
    want = jax.jit(lambda t: jax.tree.map(lambda v: mpi4jax.allreduce(v, op=MPI.SUM, comm=sub), t))(
        x
    )
    assert_same(jax.jit(g)(x), want, p)
    g.free()
    sub.Free()


def test_mean_and_no_retrace(mpi):
    MPI, mpi4jax, p, rank = mpi
    g = commsim.exec.mpi.collective(
        commsim.build("allreduce", "ring", nranks=p), MPI.COMM_WORLD, mean=True
    )
    step = jax.jit(g)
    x = tree(rank, p, {"w": ((7, 3), "float32"), "s": ((), "float32")})
    native = jax.jit(lambda t: jax.tree.map(lambda v: mpi4jax.allreduce(v, op=MPI.SUM) / p, t))
    assert_same(step(x), native(x), p)
    assert g.traces == 1  # one schedule call: both leaves are float32
    y = jax.tree.map(lambda v: v * 2, x)
    assert_same(step(y), native(y), p)
    assert g.traces == 1  # the second call with the same shapes did not trace


@pytest.mark.parametrize("algo", ["ring", "recursive_halving"])
def test_reduce_scatter_is_this_ranks_block_of_the_sum(mpi, algo):
    MPI, mpi4jax, p, rank = mpi
    g = commsim.exec.mpi.collective(commsim.build("reduce_scatter", algo, nranks=p))
    x = tree(rank, p, BLOCKED)

    def block(v):
        s = mpi4jax.allreduce(v, op=MPI.SUM)
        k = v.shape[0] // p
        return s[rank * k : (rank + 1) * k]

    assert_same(jax.jit(g)(x), jax.jit(lambda t: jax.tree.map(block, t))(x), p)


@pytest.mark.parametrize("algo", ["ring", "bruck"])
def test_allgather_equals_mpi4jax(mpi, algo):
    mpi4jax, p, rank = mpi.mpi4jax, mpi.p, mpi.rank
    g = commsim.exec.mpi.collective(commsim.build("allgather", algo, nranks=p))
    x = tree(rank, p, {"s": ((), "float32"), "v": ((5,), "int32"), "m": ((3, 2), "float32")})
    want = jax.jit(lambda t: jax.tree.map(lambda v: mpi4jax.allgather(v), t))(x)
    assert_same(jax.jit(g)(x), want, p)


@pytest.mark.parametrize("algo", ["pairwise", "bruck"])
def test_alltoall_equals_mpi4jax(mpi, algo):
    mpi4jax, p, rank = mpi.mpi4jax, mpi.p, mpi.rank
    g = commsim.exec.mpi.collective(commsim.build("alltoall", algo, nranks=p))
    x = tree(rank, p, BLOCKED)

    def native(v):  # mpi4jax.alltoall sends row q of [p, ...] to rank q
        return mpi4jax.alltoall(v.reshape(p, -1, *v.shape[1:])).reshape(v.shape)

    assert_same(jax.jit(g)(x), jax.jit(lambda t: jax.tree.map(native, t))(x), p)


def test_broadcast_equals_mpi4jax(mpi):
    mpi4jax, p, rank = mpi.mpi4jax, mpi.p, mpi.rank
    root = p - 1
    g = commsim.exec.mpi.collective(commsim.build("broadcast", "binomial", nranks=p, root=root))
    x = tree(rank, p, WHOLE)
    want = jax.jit(lambda t: jax.tree.map(lambda v: mpi4jax.bcast(v, root=root), t))(x)
    assert_same(jax.jit(g)(x), want, p)


BUCKET_TREE = {  # float32 bytes in pytree order: 400, 400, 4000, 40, 40; then an int32 group
    "a": ((100,), "float32"),
    "b": ((10, 10), "float32"),
    "c": ((1000,), "float32"),
    "d": ((10,), "float32"),
    "e": ((2, 5), "float32"),
    "f": ((3,), "int32"),
}


@pytest.mark.parametrize(("limit", "calls"), [(1000, 4), (500, 5), (10, 6)])
def test_buckets_equal_one_call_and_count_calls(mpi, limit, calls):
    p, rank = mpi.p, mpi.rank
    s = commsim.build("allreduce", "rabenseifner", nranks=p)
    x = tree(rank, p, BUCKET_TREE)
    whole = jax.jit(commsim.exec.mpi.collective(s))(x)
    g = commsim.exec.mpi.collective(s, bucket_bytes=limit)
    assert_same(jax.jit(g)(x), whole, p)
    assert g.traces == calls


class FakeTuner:
    def __init__(self, nranks):
        self.collective, self.nranks, self.asked = "allreduce", nranks, []

    def schedule(self, nbytes):
        self.asked.append(nbytes)
        algo = "ring" if nbytes < 1024 else "rabenseifner"
        return commsim.build("allreduce", algo, nranks=self.nranks)


def test_auto_asks_the_tuner_per_bucket(mpi):
    MPI, mpi4jax, p, rank = mpi
    table = FakeTuner(p)
    g = commsim.exec.mpi.collective("auto", tuner=table, collective="allreduce", bucket_bytes=1000)
    x = tree(rank, p, BUCKET_TREE)
    want = jax.jit(lambda t: jax.tree.map(lambda v: mpi4jax.allreduce(v, op=MPI.SUM), t))(x)
    assert_same(jax.jit(g)(x), want, p)
    assert sorted(table.asked) == sorted([800, 4000, 80, 12])


def test_comm_of_another_size_is_refused(mpi):
    MPI, p = mpi.MPI, mpi.p
    s = commsim.build("allreduce", "ring", nranks=p + 1)
    with pytest.raises(ParameterError, match=f"p={p + 1} ranks but the communicator has {p};"):
        commsim.exec.mpi.collective(s, MPI.COMM_WORLD)
    with pytest.raises(ParameterError, match="communicator has"):
        commsim.exec.mpi.collective("auto", tuner=FakeTuner(p + 1))


@pytest.mark.parametrize(
    ("coll", "shapes", "match"),
    [
        ("reduce_scatter", {"s": ((), "float32")}, r"leading dimension.*leaf \['s'\]"),
        ("allreduce", {"h": ((4,), "bfloat16")}, r"runs .*got bfloat16"),
    ],
)
def test_bad_leaves_fail_at_trace_time(mpi, coll, shapes, match):
    p, rank = mpi.p, mpi.rank
    g = commsim.exec.mpi.collective(commsim.build(coll, "ring", nranks=p))
    with pytest.raises(CommsimError, match=match) as e:
        jax.jit(g)(tree(rank, p, shapes))
    assert "\n" not in str(e.value)


def test_mean_of_integers_is_refused(mpi):
    p, rank = mpi.p, mpi.rank
    g = commsim.exec.mpi.collective(commsim.build("allreduce", "ring", nranks=p), mean=True)
    with pytest.raises(ParameterError, match=r"mean=True.*int32"):
        jax.jit(g)(tree(rank, p, {"n": ((3,), "int32")}))
