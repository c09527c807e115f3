"""``examples/data_parallel_sgd.py --backend mpi``: at the MPI world size (``mpirun -n 2`` and
``-n 4`` in CI, 1 under plain pytest), training with the commsim allreduce follows the same loss
trajectory as training with ``MPI_Allreduce`` (mpi4jax) and as single-process full-batch SGD."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.mpi

EXAMPLE = Path(__file__).parents[2] / "examples" / "data_parallel_sgd.py"


@pytest.fixture(scope="module")
def sgd(backend):  # `backend` skips where MPI is missing
    spec = importlib.util.spec_from_file_location("data_parallel_sgd_mpi", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("bucket", [None, "16KiB"])
def test_trajectory_equals_mpi_allreduce_and_single_process(sgd, bucket):
    argv = ["--backend", "mpi", "--steps", "50", "--epochs", "1", "--batch", "240"]
    args = sgd.parse(argv + (["--bucket-bytes", bucket] if bucket else []))
    ours = sgd.losses(sgd.train(args, sgd.mpi_run(args, native=False), quiet=True))
    native = sgd.losses(sgd.train(args, sgd.mpi_run(args, native=True), quiet=True))
    single = sgd.losses(sgd.train(args, sgd.single_run(args), quiet=True))
    assert ours[-1] < 0.5 * ours[0]
    np.testing.assert_allclose(ours, native, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ours, single, rtol=1e-4, atol=1e-5)
