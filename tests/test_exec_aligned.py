"""Page-aligned host buffers (commsim.exec.aligned_*): where the MPI calibration and the
mpi4py executor put their data."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from commsim.errors import ParameterError
from commsim.exec import aligned_copy, aligned_empty, aligned_zeros
from commsim.exec._aligned import PAGE


@pytest.mark.parametrize("shape", [1, 7, (3, 5), [2, 3, 4], (), np.int64(9), (1000, 3)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, bool, np.complex128, "V3"])
def test_every_nonempty_buffer_starts_on_a_page_and_is_writable(shape, dtype):
    a = aligned_empty(shape, dtype)
    want = np.empty(shape, dtype)
    assert a.shape == want.shape and a.dtype == want.dtype
    assert a.ctypes.data % PAGE == 0 and a.flags.writeable and a.flags.c_contiguous
    z = aligned_zeros(shape, dtype)
    assert z.ctypes.data % PAGE == 0 and not z.reshape(-1).view(np.uint8).any()


def test_a_copy_keeps_values_shape_and_its_memory_alive():
    src = np.arange(24.0).reshape(4, 6)[:, ::2].T  # strided, transposed
    b = aligned_copy(src)
    del src
    gc.collect()
    _ = [np.ones(1000) for _ in range(50)]  # allocate over whatever was freed
    np.testing.assert_array_equal(b, np.arange(24.0).reshape(4, 6)[:, ::2].T)
    assert b.ctypes.data % PAGE == 0 and b.flags.c_contiguous
    assert aligned_empty(100, np.float32, align=64).ctypes.data % 64 == 0


def test_empty_buffers_and_bad_input():
    assert aligned_empty((0, 3), np.float32).shape == (0, 3)
    for shape in (-1, (2, -3)):
        with pytest.raises(ParameterError, match="negative"):
            aligned_empty(shape, np.float32)
    with pytest.raises(ParameterError, match="align"):
        aligned_empty(4, np.float32, align=0)
