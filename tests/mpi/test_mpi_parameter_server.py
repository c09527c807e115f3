"""Parameter servers under MPI: dedicated server ranks (helpers, IR rule 7) on both MPI executors.

Run as ``mpirun -n 2 python -m pytest tests/mpi -q`` (and ``-n 4``); plain pytest is world size
1, where the dedicated placement has no room for a server and only the replays run. The
colocated row runs with every registry row in ``test_mpi_exec.py``.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import commsim
from commsim.exec import execute, layout, random_inputs

pytestmark = pytest.mark.mpi

_spec = importlib.util.spec_from_file_location(
    "test_mpi_exec", Path(__file__).with_name("test_mpi_exec.py")
)
assert _spec is not None and _spec.loader is not None
mpi_exec = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mpi_exec)


def _dedicated(p: int, k: int) -> commsim.Schedule:
    return commsim.build(
        "allreduce", "parameter_server", nranks=p, servers=k, placement="dedicated"
    )


@pytest.mark.parametrize("p", range(2, 10))
def test_replay_of_dedicated_servers_is_deadlock_free_and_exact(p):
    for k in range(1, p):
        mpi_exec.replay_matches_interpreter(_dedicated(p, k))


@pytest.fixture(scope="module")
def host(backend):
    from commsim.exec.mpi import HostMpiBackend

    return HostMpiBackend(backend.comm)


@pytest.mark.parametrize("executor", ["mpi", "mpi4py"])
def test_dedicated_servers_match_the_reference(backend, host, world, executor):
    if world < 2:
        pytest.skip("dedicated servers need a worker and a server (mpirun -n 2 or more)")
    be = backend if executor == "mpi" else host
    for k in range(1, world):
        s = _dedicated(world, k)
        lay = layout(s, 3 * s.nbytes_units)
        x = random_inputs(lay, np.float32, seed=world + k)
        out = execute(s, x, be)  # the workers checked against the reference
        w = world - k
        np.testing.assert_array_equal(out[:w], np.broadcast_to(x[:w].sum(0), out[:w].shape))
