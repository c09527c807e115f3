"""Wire formats (issue #22, item 2): the model's bytes and conversion cost, the verifier's error
bound on every reducing registry row, and one-line refusals."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import commsim
from commsim._wire import CHUNK, REDUCING, WIRES, check_wire, wire
from commsim._wire_run import verify as verify_wire
from commsim.algorithms import REGISTRY
from commsim.errors import ParameterError, ScheduleError, UnknownNameError
from commsim.models import Hockney, LogGP, compressed

WIRE_NAMES = tuple(WIRES)
ROWS = [row for key, row in sorted(REGISTRY.items()) if row.collective in REDUCING]
WIRE_P = (1, 2, 3, 5, 8, 13)


# -- the formats -----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", WIRE_NAMES)
def test_one_conversion_is_within_its_documented_error(name):
    w = wire(name)
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((3, 3 * CHUNK + 17)) * 10.0 ** rng.integers(-3, 3, (3, 1))).astype(
        np.float32
    )
    parts = w.encode(x)
    assert parts[0].dtype.name == w.dtype
    wire_bytes = sum(p.nbytes for p in parts)
    assert wire_bytes <= np.ceil(x.size * w.bytes_per_element) + 3 * 4  # last chunks' scales
    err = np.abs(w.transmit(x) - x)
    chunk_max = np.abs(np.pad(x, ((0, 0), (0, 4 * CHUNK - x.shape[1])))).reshape(3, 4, CHUNK)
    chunk_max = np.repeat(chunk_max.max(axis=2), CHUNK, axis=1)[:, : x.shape[1]]
    assert (err <= w.hop_error(np.abs(x), chunk_max) * (1 + 1e-6)).all()
    assert err.max() > 0  # it really converts


def test_unknown_wire_and_a_collective_that_cannot_carry_one():
    with pytest.raises(UnknownNameError, match="unknown wire format 'fp8'; use fp16, bf16 or int8"):
        wire("fp8")
    for collective in ("allgather", "broadcast", "alltoall"):
        with pytest.raises(ParameterError, match="only moves data"):
            check_wire(wire("fp16"), collective)
    with pytest.raises(ParameterError, match="not int32"):
        check_wire(wire("int8"), "allreduce", "int32")
    with pytest.raises(ParameterError, match="only moves data"):
        commsim.verify(commsim.build("allgather", "ring", nranks=4), wire="fp16")


# -- the model ------------------------------------------------------------------------------------
@pytest.mark.parametrize("p", [2, 3, 4, 7, 16, 33])
def test_fp16_ring_allreduce_halves_the_bandwidth_term_exactly(p):
    s = commsim.build("allreduce", "ring", nranks=p)
    n = np.array([64.0 * p, 4096.0 * p, 1e6 * p])
    alpha, beta = 1e-6, 1e-9
    got = compressed(Hockney(alpha, beta, 0.0), "fp16").predict(s, n).time
    closed = 2 * (p - 1) * alpha + 2 * (p - 1) / p * (n / 2) * beta
    np.testing.assert_allclose(got, closed, rtol=1e-12, atol=0)
    plain = Hockney(alpha, beta, 0.0).predict(s, n).time - 2 * (p - 1) * alpha
    np.testing.assert_allclose(got - 2 * (p - 1) * alpha, plain / 2, rtol=1e-12)


@pytest.mark.parametrize("name", WIRE_NAMES)
def test_conversion_joins_gamma(name):
    p, n = 8, 8e6
    alpha, beta, gamma = 2e-6, 1 / 25e9, 1 / 100e9
    w = wire(name)
    s = commsim.build("allreduce", "ring", nranks=p)
    pred = compressed(Hockney(alpha, beta, gamma), name).predict(s, n)
    conv = w.traffic / 3 * gamma
    want = 2 * (p - 1) * alpha + 2 * (p - 1) / p * n * w.ratio(4) * beta
    want += (p - 1) / p * n * (gamma + conv)
    assert pred.time == pytest.approx(want, rel=1e-12)
    assert pred.nbytes == n and f"wire {name}" in pred.model
    assert pred.algbw == pytest.approx(n / pred.time)


def test_compressed_is_any_model_and_none_is_the_model_itself():
    m = LogGP()
    assert compressed(m, None) is m
    s = commsim.build("reduce_scatter", "ring", nranks=4)
    assert compressed(m, "fp16").predict(s, 1e6).time < m.predict(s, 1e6).time
    assert np.ndim(compressed(m, "fp16").predict(s, 1e6).time) == 0
    bound = compressed(Hockney(), "int8").lower_bound("allreduce", 8, 1e6)
    assert 0 < bound < Hockney().lower_bound("allreduce", 8, 1e6)


# -- the verifier ---------------------------------------------------------------------------------
@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r.collective}/{r.algorithm}")
def test_every_reducing_row_meets_the_bound_of_every_wire(row):
    for p in WIRE_P:
        try:
            s = commsim.build(row.collective, row.algorithm, nranks=p)
        except (ParameterError, ScheduleError):
            continue  # the row does not take this p
        for name in WIRE_NAMES:
            got = commsim.verify(s, wire=name, seed=p)
            assert got.max_ratio <= 1.0 and got.wire == name


@pytest.mark.parametrize("name", WIRE_NAMES)
def test_the_bound_check_can_fail(name):
    """A format that claims to be exact is caught by its own check."""
    s = commsim.build("allreduce", "ring", nranks=8)
    liar = dataclasses.replace(wire(name), unit_roundoff=0.0, tiny=0.0)
    with pytest.raises(ScheduleError, match=f"over wire {name}: rank .* past its bound"):
        verify_wire(s, liar)


# -- the executors ----------------------------------------------------------------------------------
def _inputs(s, count: int = 2400, seed: int = 0):
    from commsim.exec import layout

    lay = layout(s, count)
    return np.random.default_rng(seed).standard_normal(lay.input_shape()).astype(np.float32)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r.collective}/{r.algorithm}")
def test_numpy_backend_sends_the_wire_dtype_within_the_bound(row):
    from commsim.exec import execute

    for p in (2, 3, 5, 8):
        try:
            s = commsim.build(row.collective, row.algorithm, nranks=p)
            x = _inputs(s, 240 * s.nbytes_units)
        except (ParameterError, ScheduleError):
            continue
        exact = execute(s, x)
        for name in WIRE_NAMES:
            got = execute(s, x, wire=name)  # checked within the bound inside
            if p > 1:
                assert not np.array_equal(got, exact), "the wire must really convert"


@pytest.mark.parametrize("name", WIRE_NAMES)
@pytest.mark.parametrize(
    ("collective", "algorithm"),
    [("allreduce", "ring"), ("allreduce", "rabenseifner"), ("allreduce", "direct"),
     ("reduce_scatter", "ring"), ("reduce", "binomial")],
)  # fmt: skip
def test_jax_backend_sends_the_wire_dtype_within_the_bound(name, collective, algorithm):
    import jax

    from commsim.exec import execute

    p = min(len(jax.devices()), 6)
    s = commsim.build(collective, algorithm, nranks=p)
    x = _inputs(s)
    got = execute(s, x, "jax", wire=name)
    ref = execute(s, x, "numpy", wire=name)
    if name != "int8":  # same conversions, same order of sums: the same bits
        np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6)


def test_the_executors_refuse_a_wire_they_cannot_carry():
    from commsim.exec import execute

    s = commsim.build("allgather", "ring", nranks=4)
    with pytest.raises(ParameterError, match="allgather only moves data"):
        execute(s, _inputs(s), wire="fp16")
    s = commsim.build("allreduce", "ring", nranks=4)
    with pytest.raises(ParameterError, match="not int32"):
        execute(s, np.ones((4, 400), np.int32), wire="int8")
    with pytest.raises(UnknownNameError, match="unknown wire format"):
        execute(s, _inputs(s), wire="fp4")


def test_multi_channel_schedules_carry_a_wire():
    import jax

    from commsim.algorithms import channels
    from commsim.exec import execute

    p = min(len(jax.devices()), 4)
    s = channels(commsim.build("allreduce", "ring", nranks=p), 2)
    assert s.nchannels == 2
    x = _inputs(s)
    for name in WIRE_NAMES:
        assert commsim.verify(s, wire=name).max_ratio <= 1
        execute(s, x, "numpy", wire=name)
        execute(s, x, "jax", wire=name)
    two = Hockney(links=2)
    assert compressed(two, "fp16").predict(s, 1e6).time < two.predict(s, 1e6).time
