"""The drop-in packing's ``align``: slots cut on multiples of ``align`` elements (numpy only).

The MPI drop-in pads every slot to a multiple of 8 bytes (``MpiCollective.align_bytes``):
a 20 MiB ring allreduce on 2 ranks cut at an odd float32 offset was measured 1.6-2x slower than
one cut at an even offset, more than the padding's copy costs (``docs/benchmarks.md``,
"Static windows"). The JAX drop-in keeps the schedule's own units (``align_bytes = 1``).
"""

from __future__ import annotations

import numpy as np
import pytest

import commsim
from commsim.exec._packing import packing
from commsim.exec.jax import JaxCollective
from commsim.exec.mpi import MpiCollective


@pytest.mark.parametrize(
    ("count", "align", "width"),
    [
        (5_115_936, 2, 5_115_936),  # 2 slots of an even count: as it is
        (5_115_938, 2, 5_115_940),  # odd slots: padded by 2
        (5_115_937, 2, 5_115_940),  # padded to the next multiple of 2 slots x 2
        (5_115_937, 1, 5_115_938),  # without align: the schedule's units only
    ],
)
def test_allreduce_slots_are_multiples_of_align(count, align, width):
    s = commsim.build("allreduce", "ring", nranks=2)
    pk = packing(s, [(count,)], align=align)
    assert pk.width == width and pk.used == count
    assert pk.layout.per_unit % align == 0
    assert (np.diff(pk.layout.offsets) % align == 0).all()


@pytest.mark.parametrize("p", [2, 3, 4])
def test_blocked_collectives_align_every_block(p):
    s = commsim.build("reduce_scatter", "ring", nranks=p)
    pk = packing(s, [(p * 7, 3)], align=4)
    assert pk.layout.per_unit % 4 == 0 and pk.width >= 21
    assert pk.width == min(w for w in range(21, 21 + 4 * p + 1) if (p * w) % (4 * p) == 0)


def test_which_drop_in_aligns():
    assert MpiCollective.align_bytes == 8 and JaxCollective.align_bytes == 1
