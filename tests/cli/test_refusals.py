"""Every command refuses impossible or absurd work up front: one line, exit 2, within seconds,
at p = 65,536, the refusal costing what its check costs, not what the refused work would.

The machine is made a 16 GiB one (``os.sysconf``), so that the memory refusals do not depend on
where the tests run.
"""

from __future__ import annotations

import os
import time

import pytest

import commsim

P = "65536"
_REAL_SYSCONF = os.sysconf
RAM = 16 * 2**30

CASES = {
    # 8.6e9 transfers: ~1e9 lines to list, far past show's 200,000
    "show lists": ["show", "-c", "allreduce", "-a", "ring", "-p", P],
    "show --json": ["show", "-c", "allreduce", "-a", "ring", "-p", P, "--json"],
    "show draws": ["show", "-c", "allreduce", "-a", "ring", "-p", P, "-o", "{tmp}/d.png"],
    # the XML / GOAL text of 8.6e9 transfers: ~1 TB
    "export msccl": ["export", "-c", "allreduce", "-a", "ring", "-p", P, "--format", "msccl",
                     "-o", "{tmp}/a.xml"],
    "export goal": ["export", "-c", "allreduce", "-a", "ring", "-p", P, "--format", "goal",
                    "--size", "1MiB", "-o", "{tmp}/a.goal"],
    # 65,536 ranks' buffers: 80 GiB at the smallest size the ring runs, before JAX starts
    "run jax": ["run", "-c", "allreduce", "-a", "ring", "-p", P, "--backend", "jax",
                "-s", "256KiB"],
    "run numpy": ["run", "-c", "allreduce", "-a", "ring", "-p", P, "--backend", "numpy",
                  "-s", "1GiB"],
    "run too small": ["run", "-c", "allreduce", "-a", "ring", "-p", P, "-s", "1KiB"],
    # p x p slots of verifier state: 144 GiB
    "verify": ["verify", "-c", "allreduce", "-a", "ring", "-p", P],
    # one step of p^2 = 4.3e9 transfers to hold: 432 GiB
    "predict": ["predict", "-c", "alltoall", "-a", "direct", "-p", P, "-s", "1MiB"],
    "compare": ["compare", "-c", "alltoall", "-a", "direct", "-p", P, "-s", "1MiB"],
    "tune": ["tune", "-c", "alltoall", "-a", "direct", "-p", P, "-s", "1MiB"],
    # a graph of 4.3e9 hosts
    "topology": ["topology", "torus:65536x65536"],
}  # fmt: skip


@pytest.fixture
def small_machine(monkeypatch):
    def sysconf(name):
        if name == "SC_PHYS_PAGES":
            return RAM // _REAL_SYSCONF("SC_PAGE_SIZE")
        return _REAL_SYSCONF(name)

    monkeypatch.setattr(os, "sysconf", sysconf)


@pytest.mark.parametrize("argv", CASES.values(), ids=CASES.keys())
def test_absurd_work_is_refused_at_once_in_one_line(cli, argv, tmp_path, small_machine):
    if "direct" in argv and "direct" not in commsim.available(argv[2]):
        pytest.skip("no direct algorithm for this collective")
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    start = time.perf_counter()
    rc, out, err = cli(*argv)
    took = time.perf_counter() - start
    assert rc == 2, err
    assert out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("commsim"), err
    assert took < 10, f"{took:.1f} s to refuse"
    assert not list(tmp_path.iterdir())  # nothing written
