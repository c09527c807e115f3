"""Every CollectiveSpec agrees with itself: user data packed into buffers, computed by the direct
reference and unpacked, satisfies the spec's slot-level post-condition — for every collective,
without naming any (a new spec row is checked by adding it)."""

from __future__ import annotations

import numpy as np
import pytest

import commsim
from commsim.exec import Layout


def _unit_layout(sp: commsim.CollectiveSpec, p: int, m: int) -> Layout:
    """A layout with one element per slot: slots and elements coincide."""
    ndata = sp.block_multiple * p * m if sp.block_multiple else 3 * m
    return Layout(p, sp, 1, np.arange(ndata + 1), ndata, sp.nbytes_units(ndata))


@pytest.mark.parametrize("collective", commsim.COLLECTIVES)
@pytest.mark.parametrize(("p", "m"), [(1, 1), (2, 1), (3, 2), (5, 1), (8, 3)])
def test_pack_reference_unpack_meets_the_post_condition(collective, p, m):
    sp = commsim.spec(collective)
    root = p - 1 if sp.rooted else 0
    lay = _unit_layout(sp, p, m)
    rng = np.random.default_rng(p * 10 + m)
    inputs = rng.integers(0, 2**63, size=lay.input_shape(), dtype=np.uint64)

    packed = lay.pack(inputs)
    pre = sp.initial(p, lay.data_elems, root)
    holds_input = lay.pack(np.ones_like(inputs)).astype(bool)
    assert not (pre & ~holds_input).any(), "the pre-condition names slots pack leaves empty"

    want, mask = sp.expected(np.where(pre, packed, 0), root)
    got = lay.place_output(sp.reference(inputs, root))
    np.testing.assert_array_equal(got[mask], np.asarray(want)[mask])
    rows = np.flatnonzero(mask.any(axis=1))
    np.testing.assert_array_equal(rows, sp.checked_ranks(p, root))
    np.testing.assert_array_equal(lay.unpack(got)[rows], sp.reference(inputs, root)[rows])


@pytest.mark.parametrize("collective", commsim.COLLECTIVES)
def test_count_from_input_inverts_the_input_region(collective):
    sp = commsim.spec(collective)
    for p, count in ((1, 6), (3, 12), (4, 8)):
        length = sp.input_region(p, count)[1]
        assert sp.count_from_input(p, length) == count


def test_unknown_collective_suggests_names():
    with pytest.raises(commsim.UnknownNameError, match="did you mean allreduce"):
        commsim.spec("allreduse")
