"""Setup for the MPI tests: run as ``mpirun -n N python -m pytest tests/mpi`` and as plain pytest.

Every rank runs the same tests in the same order, so collective calls line up; assertions do not
depend on the world size (plain pytest is world size 1). A watchdog turns a hang into a failure:
if one test runs longer than ``COMMSIM_MPI_TEST_TIMEOUT`` seconds (default 120), the rank dumps
its stack and exits, and ``mpirun`` then ends the others, instead of waiting for the CI timeout.
"""

from __future__ import annotations

import faulthandler
import os
import sys
from collections.abc import Iterator

import pytest

TEST_TIMEOUT = float(os.environ.get("COMMSIM_MPI_TEST_TIMEOUT", "120"))


@pytest.fixture(autouse=True)
def _watchdog() -> Iterator[None]:
    faulthandler.dump_traceback_later(TEST_TIMEOUT, exit=True, file=sys.__stderr__)
    yield
    faulthandler.cancel_dump_traceback_later()


@pytest.fixture(scope="session")
def backend():
    """One :class:`MpiBackend` on every rank (its communicator is a clone of ``COMM_WORLD``)."""
    from commsim.exec.mpi import missing

    why = missing(need_mpirun=False)
    if why:
        pytest.skip(why)
    from commsim.exec.mpi import MpiBackend

    return MpiBackend()


@pytest.fixture(scope="session")
def world(backend) -> int:
    return backend.size
