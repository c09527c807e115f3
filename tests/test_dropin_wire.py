"""The drop-ins with ``compression=`` (issue #22): messages in a wire format inside the user's
own ``shard_map`` (JAX) or program (MPI, world size 1 here; ``tests/mpi/test_mpi_wire.py`` under
``mpirun``), and int8's error-feedback residual."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import commsim
from commsim._wire import wire
from commsim.errors import ParameterError
from commsim.exec.jax import collective

P8 = 8
AXIS = "data"

pytestmark = pytest.mark.skipif(len(jax.devices()) < P8, reason="needs 8 JAX devices")


@pytest.fixture(scope="module")
def mesh():
    return jax.make_mesh((P8,), (AXIS,))


def _sharded(mesh, host):
    return jax.device_put(host, NamedSharding(mesh, P(AXIS)))


@pytest.mark.parametrize("name", ["fp16", "bf16", "int8"])
def test_jax_drop_in_sends_the_wire_dtype_within_the_bound(mesh, name):
    ring = commsim.build("allreduce", "ring", nranks=P8)
    f = collective(ring, AXIS, compression=name, error_feedback=False)
    host = np.random.default_rng(0).standard_normal((P8, 1000)).astype(np.float32)
    step = jax.jit(
        jax.shard_map(lambda x: f({"g": x[0]})["g"][None], mesh=mesh, in_specs=P(AXIS),
                      out_specs=P(AXIS))
    )  # fmt: skip
    got = np.asarray(step(_sharded(mesh, host)))
    exact = host.sum(axis=0)
    # the executors' bound (one value per element): 2(p-1) conversions of partial sums
    from commsim.exec import check_outputs, layout

    lay = layout(ring, 1000)
    check_outputs(ring, lay, host, got, name)
    assert not np.array_equal(got, np.broadcast_to(exact, got.shape))


def test_int8_error_feedback_is_threaded_under_jit(mesh):
    ring = commsim.build("allreduce", "ring", nranks=P8)
    f = collective(ring, AXIS, compression="int8")
    assert f.error_feedback  # the default with int8
    host = np.random.default_rng(1).standard_normal((P8, 700)).astype(np.float32)

    def body(x, r):
        out, new = f.feedback({"g": x[0]}, {"g": r[0]})
        return out["g"][None], new["g"][None]

    step = jax.jit(
        jax.shard_map(body, mesh=mesh, in_specs=(P(AXIS), P(AXIS)), out_specs=(P(AXIS), P(AXIS)))
    )
    zeros = np.zeros_like(host)
    out, residual = (np.asarray(a) for a in step(_sharded(mesh, host), _sharded(mesh, zeros)))
    sent = wire("int8").transmit(host)  # each device's own contribution, quantised per chunk
    np.testing.assert_allclose(residual, host - sent, atol=1e-6)
    scale = np.abs(host).sum(axis=0).max()
    assert np.abs(out - host.sum(axis=0)).max() < 2 * (P8 - 1) * scale / 254  # the hops' bound
    assert 0 < np.abs(residual).max() <= np.abs(host).max() / 254 * 1.001
    # the next call adds the residual back: it sends Q(x + e) and keeps (x + e) - Q(x + e)
    _, residual2 = (np.asarray(a) for a in step(_sharded(mesh, host), _sharded(mesh, residual)))
    wanted = host + residual
    np.testing.assert_allclose(residual2, wanted - wire("int8").transmit(wanted), atol=1e-6)
    assert not np.array_equal(residual2, residual)


def test_error_feedback_under_jit_without_the_residual_is_refused(mesh):
    f = collective(commsim.build("allreduce", "ring", nranks=P8), AXIS, compression="int8")
    step = jax.jit(
        jax.shard_map(lambda x: f(x[0])[None], mesh=mesh, in_specs=P(AXIS), out_specs=P(AXIS))
    )
    with pytest.raises(ParameterError, match=r"thread it, out, residual = f.feedback"):
        step(_sharded(mesh, np.ones((P8, 8), np.float32)))


def test_compression_bad_input_is_one_line(mesh):
    ring = commsim.build("allgather", "ring", nranks=P8)
    with pytest.raises(ParameterError, match="allgather only moves data"):
        collective(ring, AXIS, compression="fp16")
    with pytest.raises(ParameterError, match="needs compression="):
        collective(commsim.build("allreduce", "ring", nranks=P8), AXIS, error_feedback=True)
    f = collective(commsim.build("allreduce", "ring", nranks=P8), AXIS, compression="fp16")
    step = jax.jit(
        jax.shard_map(lambda x: f({"i": x[0]})["i"][None], mesh=mesh, in_specs=P(AXIS),
                      out_specs=P(AXIS))
    )  # fmt: skip
    with pytest.raises(ParameterError, match=r"leaf \['i'\]: .*not int32"):
        step(_sharded(mesh, np.ones((P8, 4), np.int32)))
