"""The device backends' plans, without any device: one anatomy for every backend.

Each backend package (``commsim.exec.jax``, ``.mpi``, ``.cuda``, ``.shmem``) splits at the same seam: a
numpy-only ``_plan`` (which rounds, segments, launches), a ``_program`` that builds the device
program, and a ``_backend`` whose sections run validate → plan → program → native collective →
register. These tests need neither JAX devices, MPI nor CUDA: they import the plans alone, check
that the JAX and MPI plans agree with each other round for round (both follow
:func:`commsim._messages.matchings`), and check the anatomy itself.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import commsim
from commsim.errors import CommsimError
from commsim.exec import backend_info, layout
from commsim.exec.cuda import plan as cuda_plan
from commsim.exec.jax import plan as jax_plan
from commsim.exec.mpi import plan as mpi_plan
from commsim.exec.shmem import plan as shmem_plan

EXEC = Path(commsim.__file__).parent / "exec"
PACKAGES = ("jax", "mpi", "cuda", "shmem")
HEAVY = ("jax", "mpi4py", "mpi4jax", "numba.cuda")
ROWS = [
    ("allreduce", "ring", 5),
    ("allreduce", "rabenseifner", 6),
    ("reduce_scatter", "direct", 4),
    ("alltoall", "bruck", 5),
    ("broadcast", "binomial", 7),
]


# -- the plans import with numpy alone -----------------------------------------------------------
@pytest.mark.parametrize("package", PACKAGES)
def test_plan_imports_no_device_library(package):
    code = (
        f"import sys, commsim.exec.{package}._plan, commsim.exec.{package}\n"
        f"print([m for m in {HEAVY!r} if m in sys.modules])\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"


# -- the plans, on the host ----------------------------------------------------------------------
def _schedule(collective: str, name: str, p: int):
    s = commsim.build(collective, name, nranks=p)
    return s, layout(s, 3 * s.nbytes_units)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r[0]}/{r[1]}/p={r[2]}")
def test_jax_and_mpi_plans_agree_round_for_round(row):
    """Every rank's MPI rounds are the JAX plan's ``ppermute`` s it takes part in, in order."""
    s, lay = _schedule(*row)
    jp = jax_plan(s, lay)
    for rp in mpi_plan(s, lay):
        assert len(rp.steps) == len(jp.steps)
        for mine, rounds in zip(rp.steps, jp.steps, strict=True):
            want = []
            for rnd in rounds:
                if rnd.perm is None:
                    continue
                send = [d for q, d in rnd.perm if q == rp.rank]
                recv = [q for q, d in rnd.perm if d == rp.rank]
                if send or recv:
                    want.append((send[0] if send else None, recv[0] if recv else None))
            got = [
                (r.send.peer if r.send else None, r.recv.peer if r.recv else None)
                for r in mine.rounds
            ]
            assert got == want


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r[0]}/{r[1]}/p={r[2]}")
def test_mpi_and_cuda_plans_move_the_same_elements(row):
    """What the MPI ranks send plus what they copy locally is what the CUDA launches move."""
    s, lay = _schedule(*row)
    plans = mpi_plan(s, lay)
    sent = sum(rp.summary()["elements_sent"] for rp in plans)
    local = sum(seg.length for rp in plans for st in rp.steps for seg in st.local)
    assert sent + local == sum(sp.moved for sp in cuda_plan(s, lay).steps)


def test_every_plan_has_a_summary():
    s, lay = _schedule("allreduce", "ring", 4)
    [rp] = mpi_plan(s, lay, ranks=[0])
    summaries = [jax_plan(s, lay).summary(), rp.summary(), cuda_plan(s, lay).summary()]
    for summary in summaries:
        assert summary["steps"] == 6 and all(isinstance(v, int) for v in summary.values())
    assert summaries[2] == {
        "steps": 6,
        "launches": 6,
        "staged_steps": 0,
        "stage_elems": 0,
        "traffic_elems": 5 * 3 * 12,  # 5 (p - 1) n for n = 12 elements
    }


@pytest.mark.parametrize("plan", [jax_plan, mpi_plan, cuda_plan, shmem_plan], ids=PACKAGES)
def test_every_plan_refuses_another_schedules_layout(plan):
    s3 = commsim.build("allreduce", "ring", nranks=3)
    s4 = commsim.build("allreduce", "ring", nranks=4)
    with pytest.raises(CommsimError, match="p=4 ranks but the layout is for 3 ranks"):
        plan(s4, layout(s3, 6))


def test_mpi_plan_of_some_ranks_is_theirs_of_all():
    s, lay = _schedule("alltoall", "bruck", 6)
    every = mpi_plan(s, lay)
    assert mpi_plan(s, lay, ranks=[4, 1]) == [every[4], every[1]]


# -- one anatomy -------------------------------------------------------------------------------
PROTOCOL = ["name", "prepare", "check_dtype", "unavailable", "native_name", "compile", "native"]
SECTIONS = ["validate", "plan", "program", "native collective", "register"]


@pytest.mark.parametrize("name", ["numpy", *PACKAGES])
def test_backend_classes_list_the_protocol_in_order(name):
    module, attr = backend_info(name).entry.split(":")
    cls = backend_info(name).load()
    members = [m for m in cls.__dict__ if m in PROTOCOL]
    assert members == PROTOCOL
    assert cls.name == name
    dt = cls.check_dtype("int32")  # on the class: starts no device
    assert dt == np.dtype("int32")
    if name != "numpy":
        assert module == f"commsim.exec.{name}"
        assert set(importlib.import_module(module).__all__) >= {attr, "DTYPES", "plan"}


@pytest.mark.parametrize("package", PACKAGES)
def test_backend_modules_have_the_same_sections(package):
    text = (EXEC / package / "_backend.py").read_text()
    banners = re.findall(r"^# -- ([a-z ]+?)(?::| -)", text, flags=re.M)
    assert banners == SECTIONS
    assert {p.name for p in (EXEC / package).glob("*.py")} >= {
        "__init__.py",
        "_plan.py",
        "_program.py",
        "_backend.py",
    }


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.append((node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names]
    return out


OWN = [
    *(p for pkg in PACKAGES for p in sorted((EXEC / pkg).glob("*.py"))),
    *(
        EXEC / f
        for f in ("_backend.py", "_lowering.py", "_layout.py", "_execute.py", "_channels.py")
    ),
    EXEC / "reference.py",
]


@pytest.mark.parametrize("path", OWN, ids=lambda p: str(p.relative_to(EXEC)))
def test_executors_import_no_registry_cli_or_private_names(path):
    """Schedules reach executors as objects; no module takes another package's private names."""
    package = ".".join(["commsim", *path.relative_to(EXEC.parent).parent.parts])
    for module, names in _imports(path):
        assert not module.startswith(("commsim.algorithms", "commsim.cli", "commsim._cli"))
        private = [n for n in names if n.startswith("_") and n != "__future__"]
        if module.startswith("commsim") and private:
            assert module.startswith(package), (module, private)
        if path.name == "_plan.py":
            assert not module.startswith(("jax", "mpi4py", "mpi4jax", "numba")), module


def test_every_module_has_a_docstring_and_all():
    for path in OWN:
        tree = ast.parse(path.read_text())
        assert ast.get_docstring(tree), path
        assert any(
            isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in n.targets)
            for n in tree.body
        ), path


def test_native_names_need_no_device():
    for name in PACKAGES:
        cls = backend_info(name).load()
        assert inspect.isfunction(inspect.getattr_static(cls, "native_name").__func__)
        assert cls.native_name("allreduce")
