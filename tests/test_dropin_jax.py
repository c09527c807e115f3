"""The JAX drop-in collective against JAX's own collectives, inside a user's ``shard_map``.

Every test runs the drop-in where a user would: in a ``jax.jit`` of a ``jax.shard_map`` over a
mesh of 8 CPU devices whose axis is called ``"data"`` (not the backend's own axis name), on
pytrees with scalars, sizes that do not divide by p, several shapes and dtypes. Each device's
result comes back (``out_specs=P("data")``), so every device is checked, not one.
"""

from __future__ import annotations

import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import commsim
from commsim.errors import CommsimError, ParameterError
from commsim.exec.jax import collective, compiler_options

P8 = 8
AXIS = "data"

pytestmark = pytest.mark.skipif(len(jax.devices()) < P8, reason="needs 8 JAX devices")


@pytest.fixture(scope="module")
def mesh():
    return jax.make_mesh((P8,), (AXIS,))


def per_device(mesh, rng, shapes: dict, dtype=None) -> dict:
    """Random inputs ``{name: [8, *shape]}`` (row d is device d's), sharded over the mesh.
    ``shapes`` maps a name to a shape, or to ``(shape, dtype)``."""
    out = {}
    for name, spec in shapes.items():
        shape, dt = spec if isinstance(spec, tuple) and isinstance(spec[1], str) else (spec, dtype)
        dt = np.dtype(dt)
        full = (P8, *shape)
        host = (
            rng.integers(-1000, 1000, full).astype(dt)
            if dt.kind in "iu"
            else rng.standard_normal(full).astype(dt)
        )
        out[name] = jax.device_put(host, NamedSharding(mesh, P(AXIS)))
    return out


def on_mesh(mesh, fn):
    """``fn`` of one device's pytree, jitted in a shard_map; results stacked per device."""

    def body(tree):
        local = jax.tree.map(lambda x: x[0], tree)
        return jax.tree.map(lambda y: y[None], fn(local))

    return jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P(AXIS), out_specs=P(AXIS)))


def assert_same(got, want):
    assert jax.tree.structure(got) == jax.tree.structure(want)
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype
        if w.dtype.kind in "iu":
            np.testing.assert_array_equal(g, w)
        else:  # the schedule adds in another order than psum
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5 * P8)


# the user's pytrees: a float and an integer group, scalars, sizes not divisible by 8
WHOLE = {"b": ((), "float32"), "w": ((5, 3), "float32"), "n": ((13,), "int32"), "i": ((), "int32")}
# reduce_scatter / alltoall cut each leaf into 8 blocks along axis 0
BLOCKED = {"a": ((8,), "float32"), "b": ((16, 3), "float32"), "c": ((24, 1, 5), "int32")}
GATHER = {"s": ((), "float32"), "v": ((5,), "int32"), "m": ((3, 2), "float32")}

NATIVE = {
    "allreduce": lambda x: lax.psum(x, AXIS),
    "reduce_scatter": lambda x: lax.psum_scatter(x, AXIS, scatter_dimension=0, tiled=True),
    "alltoall": lambda x: lax.all_to_all(x, AXIS, 0, 0, tiled=True),
}

CASES = [
    ("allreduce", "ring", WHOLE),
    ("allreduce", "rabenseifner", WHOLE),
    ("allreduce", "recursive_doubling", WHOLE),
    ("allreduce", "swing_bandwidth", WHOLE),
    ("allreduce", "double_binary_tree", WHOLE),
    ("allreduce", "direct", WHOLE),
    ("reduce_scatter", "ring", BLOCKED),
    ("reduce_scatter", "recursive_halving", BLOCKED),
    ("reduce_scatter", "pairwise", BLOCKED),
    ("reduce_scatter", "direct", BLOCKED),
    ("alltoall", "bruck", BLOCKED),
    ("alltoall", "pairwise", BLOCKED),
    ("alltoall", "direct", BLOCKED),
]


@pytest.mark.parametrize(("coll", "algo", "shapes"), CASES, ids=[f"{c}-{a}" for c, a, _ in CASES])
def test_equals_jax_collective(mesh, coll, algo, shapes):
    f = collective(commsim.build(coll, algo, nranks=P8), AXIS)
    x = per_device(mesh, np.random.default_rng(0), shapes)
    want = on_mesh(mesh, lambda t: jax.tree.map(NATIVE[coll], t))(x)
    assert_same(on_mesh(mesh, f)(x), want)
    assert f.traces == 2  # one schedule call per dtype


@pytest.mark.parametrize("tiled", [False, True])
@pytest.mark.parametrize("algo", ["ring", "bruck", "recursive_doubling", "direct"])
def test_allgather_equals_all_gather(mesh, algo, tiled):
    shapes = {k: v for k, v in GATHER.items() if v[0] or not tiled}  # tiled: no scalars
    f = collective(commsim.build("allgather", algo, nranks=P8), AXIS, tiled=tiled)
    x = per_device(mesh, np.random.default_rng(1), shapes)
    native = on_mesh(
        mesh, lambda t: jax.tree.map(lambda v: lax.all_gather(v, AXIS, tiled=tiled), t)
    )
    assert_same(on_mesh(mesh, f)(x), native(x))


@pytest.mark.parametrize(
    ("algo", "root"), [("binomial", 3), ("chain", 0), ("scatter_allgather", 5)]
)
def test_broadcast_gives_everyone_the_roots_value(mesh, algo, root):
    f = collective(commsim.build("broadcast", algo, nranks=P8, root=root), AXIS)
    x = per_device(mesh, np.random.default_rng(2), WHOLE)
    want = jax.tree.map(lambda v: np.broadcast_to(np.asarray(v)[root], v.shape), x)
    assert_same(on_mesh(mesh, f)(x), want)


@pytest.mark.parametrize("algo", ["binomial", "rabenseifner"])
def test_reduce_gives_the_root_the_sum(mesh, algo):
    f = collective(commsim.build("reduce", algo, nranks=P8, root=2), AXIS)
    x = per_device(mesh, np.random.default_rng(3), WHOLE)
    got = on_mesh(mesh, f)(x)
    want = on_mesh(mesh, lambda t: jax.tree.map(NATIVE["allreduce"], t))(x)
    root = lambda tree: jax.tree.map(lambda v: np.asarray(v)[2], tree)
    assert_same(root(got), root(want))


def test_mean_averages_and_keeps_the_dtype(mesh):
    f = collective(commsim.build("allreduce", "ring", nranks=P8), AXIS, mean=True)
    shapes = {"w": ((7, 3), "float32"), "h": ((5,), "bfloat16"), "s": ((), "float32")}
    x = per_device(mesh, np.random.default_rng(4), shapes)
    got = on_mesh(mesh, f)(x)
    want = on_mesh(mesh, lambda t: jax.tree.map(lambda v: lax.pmean(v, AXIS), t))(x)
    assert got["h"].dtype == jnp.bfloat16
    np.testing.assert_allclose(np.float32(got["h"]), np.float32(want["h"]), rtol=0.05, atol=0.05)
    assert_same({k: got[k] for k in "ws"}, {k: want[k] for k in "ws"})


def test_a_single_array_and_a_second_call_does_not_retrace(mesh):
    f = collective(commsim.build("allreduce", "ring", nranks=P8), AXIS)
    step = on_mesh(mesh, f)
    x = per_device(mesh, np.random.default_rng(5), {"": ((1001,), "float32")})[""]
    want = on_mesh(mesh, lambda v: lax.psum(v, AXIS))(x)
    assert_same(step(x), want)
    assert f.traces == 1
    assert_same(step(x + 1), on_mesh(mesh, lambda v: lax.psum(v, AXIS))(x + 1))
    assert f.traces == 1  # jit's cache: no second trace, no second plan


def test_plans_are_cached_across_programs(mesh):
    s = commsim.build("allreduce", "ring", nranks=P8)
    f = collective(s, AXIS)
    x = per_device(mesh, np.random.default_rng(6), {"a": ((40,), "float32")})
    on_mesh(mesh, f)(x)
    on_mesh(mesh, lambda t: f(t))(x)  # another program: traced again, planned once
    assert f.traces == 2
    assert len(f._cache._entries[s]) == 2  # one packing, one plan


@pytest.mark.parametrize(("algo", "rounds"), [("ring", 2 * (P8 - 1)), ("direct", 2 * (P8 - 1))])
def test_single_leaf_allreduce_adds_no_copies(mesh, algo, rounds):
    """The hot path: one float32 array whose size the schedule's units divide is the buffer
    itself (a reshape): no concatenate, no pad, and once the caller donates its input and
    compiles with the backend's options, not one copy in the compiled program, as in the
    backend's own program (``direct`` has steps of several ``ppermute`` rounds). The caller
    returns the result in the shape it came in (a reshape of it, such as ``[None]``, would fuse
    into the last write, which then cannot run in place: a copy; ``docs/sharp-bits.md``)."""
    f = collective(commsim.build("allreduce", algo, nranks=P8), AXIS)
    host = np.random.default_rng(7).standard_normal(P8 << 12).astype(np.float32)
    x = jax.device_put(host, NamedSharding(mesh, P(AXIS)))
    body = jax.shard_map(f, mesh=mesh, in_specs=P(AXIS), out_specs=P(AXIS))
    lowered = jax.jit(body, donate_argnums=0).lower(x)
    assert "concatenate" not in lowered.as_text() and "stablehlo.pad" not in lowered.as_text()
    hlo = lowered.compile(compiler_options=compiler_options("cpu")).as_text()
    ops = re.findall(r"= \S+ ([\w-]+)\(", hlo)
    assert ops.count("collective-permute") == rounds and "copy" not in ops


@pytest.mark.parametrize("algo", ["ring", "rabenseifner", "direct"])
def test_without_donation_one_copy_and_no_buffer_sized_temporary(mesh, algo):
    """Not donated, the input is copied once into the output buffer (``psum`` too writes a new
    array) and the schedule runs in place there: the program returns the ``[nelems]`` buffer
    it was given, unreshaped, so XLA needs no temporary buffer and no second copy
    (``docs/benchmarks.md``, "Static windows"; a ring's temporaries are one payload)."""
    f = collective(commsim.build("allreduce", algo, nranks=P8), AXIS)
    n = 1 << 12
    x = jax.device_put(np.ones(P8 * n, np.float32), NamedSharding(mesh, P(AXIS)))
    body = jax.shard_map(f, mesh=mesh, in_specs=P(AXIS), out_specs=P(AXIS))
    compiled = jax.jit(body).lower(x).compile(compiler_options=compiler_options("cpu"))
    ops = re.findall(r"= \S+ ([\w-]+)\(", compiled.as_text())
    assert ops.count("copy") <= 1
    if algo == "ring":
        assert compiled.memory_analysis().temp_size_in_bytes < n * 4
    np.testing.assert_array_equal(np.asarray(compiled(x)), np.full(P8 * n, P8, np.float32))


# -- bucketing ----------------------------------------------------------------------------------


BUCKET_TREE = {  # float32 bytes, in pytree (sorted-key) order: 400, 400, 4000, 40, 40, then int32
    "a": ((100,), "float32"),
    "b": ((10, 10), "float32"),
    "c": ((1000,), "float32"),
    "d": ((10,), "float32"),
    "e": ((2, 5), "float32"),
    "f": ((3,), "int32"),
}


@pytest.mark.parametrize(("limit", "calls"), [(None, 2), (1000, 4), (500, 5), (10, 6), ("1KiB", 4)])
def test_buckets_equal_one_call_and_count_calls(mesh, limit, calls):
    # by hand: float32 [a b | c | d e] at 1000 B, [a | b | c | d e] at 500, every leaf at 10;
    # the int32 leaf is its own group
    s = commsim.build("allreduce", "rabenseifner", nranks=P8)
    x = per_device(mesh, np.random.default_rng(8), BUCKET_TREE)
    whole = on_mesh(mesh, collective(s, AXIS))(x)
    f = collective(s, AXIS, bucket_bytes=limit)
    assert_same(on_mesh(mesh, f)(x), whole)
    assert f.traces == calls


class FakeTuner:
    """The tuner interface the drop-in codes against: ring below 1 KiB, else Rabenseifner."""

    def __init__(self, collective="allreduce", nranks=P8):
        self.collective, self.nranks, self.asked = collective, nranks, []

    def schedule(self, nbytes):
        self.asked.append(nbytes)
        algo = "ring" if nbytes < 1024 else "rabenseifner"
        return commsim.build(self.collective, algo, nranks=self.nranks)


def test_auto_asks_the_tuner_per_bucket_size(mesh):
    table = FakeTuner()
    f = collective("auto", AXIS, tuner=table, collective="allreduce", bucket_bytes=1000)
    x = per_device(mesh, np.random.default_rng(9), BUCKET_TREE)
    want = on_mesh(mesh, lambda t: jax.tree.map(NATIVE["allreduce"], t))(x)
    assert_same(on_mesh(mesh, f)(x), want)
    assert sorted(table.asked) == sorted([800, 4000, 80, 12])
    assert f.traces == 4


def test_auto_for_other_collectives_uses_their_size_convention(mesh):
    table = FakeTuner("allgather")
    f = collective("auto", AXIS, tuner=table, tiled=True)
    x = per_device(mesh, np.random.default_rng(10), {"v": ((5,), "float32")})
    assert_same(
        on_mesh(mesh, f)(x),
        on_mesh(mesh, lambda t: jax.tree.map(lambda v: lax.all_gather(v, AXIS, tiled=True), t))(x),
    )
    assert table.asked == [8 * 5 * 4]  # allgather's nbytes is the gathered output


# -- errors: one line, at trace time ------------------------------------------------------------


def trace_error(mesh, f, shapes) -> str:
    x = per_device(mesh, np.random.default_rng(11), shapes)
    with pytest.raises(CommsimError) as e:
        on_mesh(mesh, f)(x)
    msg = str(e.value)
    assert "\n" not in msg
    return msg


def test_reduce_scatter_leading_dim_must_divide(mesh):
    f = collective(commsim.build("reduce_scatter", "ring", nranks=P8), AXIS)
    msg = trace_error(mesh, f, {"a": ((8,), "float32"), "bad": ((5, 3), "float32")})
    assert "must divide by 8" in msg and "['bad']" in msg and "(5, 3)" in msg


def test_tiled_allgather_of_a_scalar_is_refused(mesh):
    f = collective(commsim.build("allgather", "ring", nranks=P8), AXIS, tiled=True)
    assert "scalar" in trace_error(mesh, f, {"s": ((), "float32")})


def test_unsupported_dtype(mesh):
    f = collective(commsim.build("allreduce", "ring", nranks=P8), AXIS)
    x = per_device(mesh, np.random.default_rng(12), {"a": ((4,), "int32")})
    bad = jax.tree.map(lambda v: v > 0, x)  # bool
    with pytest.raises(CommsimError, match=r"runs .*got bool"):
        on_mesh(mesh, f)(bad)


def test_mean_of_integers_is_refused(mesh):
    f = collective(commsim.build("allreduce", "ring", nranks=P8), AXIS, mean=True)
    assert "mean=True" in trace_error(mesh, f, {"n": ((3,), "int32")})


def test_axis_size_must_be_p(mesh):
    f = collective(commsim.build("allreduce", "ring", nranks=4), AXIS)
    msg = trace_error(mesh, f, {"a": ((4,), "float32")})
    assert "p=4" in msg and "'data' of 8" in msg


def test_outside_shard_map_is_refused():
    f = collective(commsim.build("allreduce", "ring", nranks=P8), "batch")
    with pytest.raises(ParameterError, match="inside a shard_map over mesh axis 'batch'"):
        jax.jit(f)(jnp.ones(3))


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda s: collective(s, AXIS, collective="allgather"), "asked for a allgather"),
        (lambda s: collective(s, AXIS, tuner=FakeTuner()), "not both"),
        (lambda s: collective("auto", AXIS), "needs tuner"),
        (lambda s: collective("ring", AXIS), "Schedule or 'auto'"),
        (lambda s: collective("auto", AXIS, tuner=FakeTuner(), collective="alltoall"), "tuner"),
        (lambda s: collective(s, AXIS, bucket_bytes=0), "positive"),
        (
            lambda s: collective(commsim.build("allgather", "ring", nranks=8), AXIS, mean=True),
            "does not reduce",
        ),
    ],
)
def test_bad_arguments(make, match):
    with pytest.raises(ParameterError, match=match):
        make(commsim.build("allreduce", "ring", nranks=P8))


def test_tuner_for_other_ranks_is_refused(mesh):
    f = collective("auto", AXIS, tuner=FakeTuner(nranks=4))
    assert "p=4" in trace_error(mesh, f, {"a": ((4,), "float32")})


def test_a_tuner_that_gives_another_collective_is_refused(mesh):
    table = FakeTuner()
    table.schedule = lambda nbytes: commsim.build("allgather", "ring", nranks=P8)
    f = collective("auto", AXIS, tuner=table)
    msg = trace_error(mesh, f, {"a": ((4,), "float32")})
    assert "not a allreduce on 8 ranks (got Schedule allgather on 8)" in msg


def test_empty_leaves_pass_through(mesh):
    f = collective(commsim.build("allreduce", "ring", nranks=P8), AXIS)
    x = per_device(mesh, np.random.default_rng(13), {"z": ((0, 3), "float32")})
    out = on_mesh(mesh, f)(x)
    assert out["z"].shape == (P8, 0, 3) and f.traces == 0
    assert math.prod(out["z"].shape) == 0


def test_benchmark_rotated_chunks_ring_is_the_ring_and_nothing_else(mesh):
    """``benchmarks/bench_dropin.py --lowerings``'s hand-written ring (chunk arrays rotated by
    the device's index, ``docs/benchmarks.md``, "Chunk arrays") equals ``psum``, and its compiled
    program holds only the ring: ``2(p-1)`` ``ppermute`` s, no ``dynamic-update-slice`` before the
    ``p`` that place the chunks at the end, no copy of the buffer."""
    import pathlib
    import runpy

    path = pathlib.Path(__file__).parent.parent / "benchmarks" / "bench_dropin.py"
    bench = runpy.run_path(str(path))
    n = 1 << 12
    host = np.random.default_rng(0).integers(-100, 100, P8 * n).astype(np.float32)
    x = jax.device_put(host, NamedSharding(mesh, P(AXIS)))
    body = jax.shard_map(
        bench["rotated_chunks_ring"](P8, AXIS),
        mesh=mesh,
        in_specs=P(AXIS),
        out_specs=P(AXIS),
        check_vma=False,
    )
    compiled = jax.jit(body).lower(x).compile(compiler_options=compiler_options("cpu"))
    ops = re.findall(r"= \S+ ([\w-]+)\(", compiled.as_text())
    assert ops.count("collective-permute") == 2 * (P8 - 1)
    assert ops.count("dynamic-update-slice") == P8
    assert "copy" not in ops
    before = ops[: ops.index("dynamic-update-slice")]  # the reduce-scatter writes no window
    assert before.count("collective-permute") >= P8 - 1
    want = np.tile(host.reshape(P8, n).sum(0), P8)
    np.testing.assert_array_equal(np.asarray(compiled(x)), want)
