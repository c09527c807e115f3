"""The MPI backend with a wire format (issue #22): every message really travels as fp16, bf16
or int8 (+ scales), and the result is within the format's error bound. Runs under plain pytest
(world size 1) and under ``mpirun -n 2`` / ``-n 4``."""

from __future__ import annotations

import numpy as np
import pytest

import commsim
from commsim.exec import check_outputs, interpret, layout


@pytest.mark.parametrize("name", ["fp16", "bf16", "int8"])
@pytest.mark.parametrize(
    ("collective", "algorithm"),
    [("allreduce", "ring"), ("allreduce", "rabenseifner"), ("reduce_scatter", "direct")],
)
def test_mpi_backend_sends_the_wire_dtype_within_the_bound(backend, name, collective, algorithm):
    from commsim.exec.mpi import MpiBackend

    p = backend.size
    be = MpiBackend(wire=name)
    s = commsim.build(collective, algorithm, nranks=p)
    lay = layout(s, 1000 * s.nbytes_units)
    x = np.random.default_rng(3).standard_normal(lay.input_shape()).astype(np.float32)
    c = be.compile(s, lay, np.float32)
    got = lay.unpack(c.get(c.run(c.put(lay.pack(x)))))
    check_outputs(s, lay, x, got, name)
    exact = lay.unpack(interpret(s, lay, lay.pack(x)))
    if p > 1:
        assert not np.array_equal(got, exact)  # it really converted


def test_the_mpi4py_executor_refuses_a_wire():
    from commsim.errors import ParameterError
    from commsim.exec.mpi import HostMpiBackend

    with pytest.raises(ParameterError, match="a wire format runs on the mpi, jax and numpy"):
        HostMpiBackend(wire="fp16")


def test_mpi_drop_in_keeps_the_int8_residual_eagerly(backend):
    """Eagerly the residual lives on the drop-in: after a call it is what quantisation dropped
    from this rank's input, and the next call sends it."""
    import jax.numpy as jnp

    from commsim._wire import wire
    from commsim.exec.mpi import collective

    p = backend.size
    g = collective(commsim.build("allreduce", "ring", nranks=p), mean=False, compression="int8")
    assert g.error_feedback and g.residual is None
    x = np.random.default_rng(backend.rank).standard_normal(600).astype(np.float32)
    out = np.asarray(g({"w": jnp.asarray(x)})["w"])
    residual = np.asarray(g.residual["w"])
    np.testing.assert_allclose(residual, x - wire("int8").transmit(x[None])[0], atol=1e-6)
    assert np.abs(residual).max() > 0
    total = np.asarray(backend.comm.allreduce(x.astype(np.float64)))
    assert np.abs(out - total).max() <= p * np.abs(total).max() / 50  # int8, p hops
    g({"w": jnp.asarray(x)})
    assert not np.array_equal(np.asarray(g.residual["w"]), residual)  # carried and renewed
    g.free()
