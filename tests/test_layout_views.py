"""User data in and out of per-rank buffers through strided views (``Layout._rows``) equals the
element-index definition (each rank's region ``[start_r, start_r + length)`` gathered and
scattered one index per element), and ``check_outputs`` names the first wrong element in
row-major order while comparing a block at a time."""

from __future__ import annotations

import numpy as np
import pytest

import commsim
from commsim.errors import CommsimError
from commsim.exec import _execute, check_outputs, layout, random_inputs


def _by_index(lay, region, buffers):
    starts, length = region
    idx = starts[:, None] + np.arange(length)
    return np.take_along_axis(buffers, idx, axis=1), idx


@pytest.mark.parametrize("collective", commsim.COLLECTIVES)
@pytest.mark.parametrize("p", [1, 2, 3, 8])
def test_views_equal_the_index_definition(collective, p):
    algorithm = "binomial" if collective in ("broadcast", "reduce") else "direct"
    s = commsim.build(collective, algorithm, nranks=p)
    lay = layout(s, s.nbytes_units * 3)
    rng = np.random.default_rng(p)
    x = rng.integers(-100, 100, size=lay.input_shape()).astype(np.int64)

    packed = lay.pack(x)
    want = np.zeros((p, lay.nelems), np.int64)
    region_in = lay.spec.input_region(p, lay.count)
    _, idx = _by_index(lay, region_in, want)
    np.put_along_axis(want, idx, x, axis=1)
    np.testing.assert_array_equal(packed, want)
    np.testing.assert_array_equal(lay.take_input(packed), x)

    full = rng.integers(-100, 100, size=(p, lay.nelems))
    region_out = lay.spec.output_region(p, lay.count)
    out, idx = _by_index(lay, region_out, full)
    got = lay.unpack(full)
    np.testing.assert_array_equal(got, out)
    got[...] = 7  # a copy, not a view of the buffers
    assert not (full == 7).all()
    placed = np.zeros_like(full)
    np.put_along_axis(placed, idx, out, axis=1)
    np.testing.assert_array_equal(lay.place_output(out), placed)


def test_a_buffer_that_is_not_contiguous_takes_the_index_path():
    s = commsim.build("allgather", "ring", nranks=4)
    lay = layout(s, 8)
    full = np.arange(4 * lay.nelems * 2).reshape(4, 2 * lay.nelems)[:, ::2]
    assert not full.flags.c_contiguous
    want, _ = _by_index(lay, lay.spec.output_region(4, lay.count), full)
    np.testing.assert_array_equal(lay.unpack(full), want)


@pytest.mark.parametrize("block", [1, 5, 1 << 18])
def test_the_first_wrong_element_is_named_whatever_the_block(block, monkeypatch):
    monkeypatch.setattr(_execute, "_BLOCK", block)
    s = commsim.build("allreduce", "ring", nranks=3)
    lay = layout(s, 30)
    x = random_inputs(lay, np.float32)
    out = np.broadcast_to(x.sum(axis=0), x.shape).copy()
    check_outputs(s, lay, x, out)  # right: passes
    out[0, 3] *= 1 + 1e-6  # within float32 reassociation: passes
    out[2, 1] = np.nan
    out[1, 29] = 1e9
    with pytest.raises(CommsimError, match="rank 1 element 29 "):
        check_outputs(s, lay, x, out)
    out[2, 1] = out[2, 0] + 1  # also wrong, but after (0, 17) in row-major order
    out[0, 17] = -5
    with pytest.raises(CommsimError, match="rank 0 element 17 "):
        check_outputs(s, lay, x, out)


def test_integers_compare_exactly_and_nan_equals_nan():
    s = commsim.build("allreduce", "ring", nranks=2)
    lay = layout(s, 8)
    x = random_inputs(lay, np.int32)
    out = np.broadcast_to(x.sum(axis=0), x.shape).copy()
    out[1, 7] += 1
    with pytest.raises(CommsimError, match="rank 1 element 7 "):
        check_outputs(s, lay, x, out)
    got = np.array([[np.nan, 1.0]])
    assert _execute._first_bad(got, got.copy(), 2, None) is None
