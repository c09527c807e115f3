"""Start-up: ``import commsim`` and ``commsim --help`` import no heavy library, and every public
name of a package whose ``__init__`` imports on first use (``commsim._lazy``) still resolves.

Each import check runs in a fresh interpreter: this process has imported everything already.
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import commsim

PACKAGE = Path(commsim.__file__).parent
ROOT = PACKAGE.parent

#: what no start-up path may import (each costs 0.1-1 s; numba and networkx most)
HEAVY = ("numba", "jax", "networkx", "matplotlib", "mpi4py", "scipy")

#: the packages whose ``__init__`` serves its names on first use
LAZY_PACKAGES = (
    "commsim",
    "commsim.bench",
    "commsim.bench.calibrate",
    "commsim.interop",
    "commsim.models",
    "commsim.tuner",
)


def _heavy_after(code: str) -> list[str]:
    """The heavy modules in ``sys.modules`` after running ``code`` in a fresh interpreter."""
    probe = (
        f"{code}\nimport json, sys\nprint(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_commsim_imports_no_heavy_library():
    assert _heavy_after("import commsim") == []


def test_the_help_parser_imports_no_heavy_library():
    code = (
        "import contextlib, io\n"
        "from commsim.cli import main\n"
        "from commsim.cli._main import _parser\n"
        "_parser()\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    assert main(['--help']) == 0\n"
        "    assert main(['algorithms']) == 0\n"
    )
    assert _heavy_after(code) == []


def _modules_after(code: str, prefix: str) -> list[str]:
    """The modules named ``prefix...`` in ``sys.modules`` after ``code``, in a fresh interpreter."""
    probe = (
        f"{code}\nimport json, sys\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.startswith({prefix!r}))))"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def _commands_imported_by(*argv: str) -> list[str]:
    """The command modules (``commsim.cli.NAME``) that ``commsim ARGV`` imports."""
    from commsim.cli._main import COMMAND_HELP

    code = (
        "import contextlib, io\n"
        "from commsim.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
        f"    main({list(argv)!r})\n"
    )
    names = _modules_after(code, "commsim.cli.")
    return [m.rsplit(".", 1)[-1] for m in names if m.rsplit(".", 1)[-1] in COMMAND_HELP]


def test_the_top_level_help_imports_no_command_and_no_algorithm():
    assert _commands_imported_by("--help") == []
    assert _commands_imported_by("frobnicate") == []
    assert _modules_after("from commsim.cli import main; main(['--help'])", "commsim.algo") == []


def test_a_command_imports_its_own_module_only():
    assert _commands_imported_by("algorithms", "-c", "allreduce") == ["algorithms"]
    assert _commands_imported_by("--version", "predict") == ["predict"]


def test_the_static_command_table_is_each_modules_help():
    """``commsim --help`` lists :data:`COMMAND_HELP` without importing the commands: each line
    is the module's own ``HELP``, and the table is ``COMMANDS``, in order."""
    from commsim.cli import COMMANDS
    from commsim.cli._main import COMMAND_HELP

    assert [c.__name__ for c in COMMANDS] == [f"commsim.cli.{n}" for n in COMMAND_HELP]
    assert {n: c.HELP for n, c in zip(COMMAND_HELP, COMMANDS)} == COMMAND_HELP


def test_a_small_prediction_starts_no_numba():
    """Up to ``NUMPY_MAX_WORK`` transfer-size pairs the Hockney model runs its array kernels
    (the same bits, ``tests/test_model_numpy_kernels.py``): numba's start-up would cost more."""
    code = (
        "import commsim\n"
        "from commsim.models import Hockney\n"
        "Hockney().predict(commsim.build('allreduce', 'ring', nranks=1024), 2**20)\n"
    )
    assert _heavy_after(code) == []


def test_the_check_sees_an_eager_import():
    """The probe is a real test: a heavy import shows."""
    assert _heavy_after("import commsim, networkx") == ["networkx"]


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_every_public_name_resolves(package):
    module = importlib.import_module(package)
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert missing == []
    assert set(module.__all__) <= set(dir(module))
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        module.not_a_name  # noqa: B018


def _imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, at any depth of its code (functions included)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            if node.module == "commsim":
                out |= {f"commsim.{a.name}" for a in node.names}
    return out


def test_the_ir_imports_nothing_built_on_it():
    """``_ir.py`` stands on the errors, the collectives' specs and the switch tiers' rule only:
    the message grouping, the DAG, the verifier, the models (everything built on the IR) are
    never imported by it, not even inside a function, so there is no import circle through the
    IR."""
    floor = {"commsim.errors", "commsim._collectives", "commsim._switch_tiers"}
    mine = {m for m in _imported_modules(PACKAGE / "_ir.py") if m.startswith("commsim")}
    assert mine <= floor, sorted(mine - floor)
    assert "commsim._ir" not in _imported_modules(PACKAGE / "_collectives.py")


#: the modules of compiled kernels (numba), each imported only where its kernels run
KERNEL_MODULES = (
    "commsim._verify_kernel",
    "commsim._messages_kernel",
    "commsim.models._kernels",
    "commsim.models._loggp_kernels",
    "commsim.models._topology_kernels",
    "commsim.models._flow",
    "commsim.topology._routing",
    "commsim.topology._dmodk_kernels",
)


def test_every_kernel_is_cached_on_disk():
    """``cache=True`` on every ``@numba.njit``: a second process loads the machine code
    instead of compiling it again (seconds per kernel)."""
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text()
        if "njit" not in text:
            continue
        for node in ast.walk(ast.parse(text, filename=str(path))):
            if not isinstance(node, ast.FunctionDef):
                continue
            for d in node.decorator_list:
                deco = ast.unparse(d)
                if "njit" in deco and "cache=True" not in deco:
                    missing.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    assert missing == []


def test_importing_the_kernels_compiles_nothing():
    """No work at import: every kernel module imports without compiling (no signature yet)."""
    code = (
        "import importlib, json\n"
        "from numba.core.registry import CPUDispatcher\n"
        f"mods = [importlib.import_module(m) for m in {KERNEL_MODULES!r}]\n"
        "compiled = [f'{m.__name__}.{k}' for m in mods for k, v in vars(m).items()\n"
        "            if isinstance(v, CPUDispatcher) and v.signatures]\n"
        "print(json.dumps(compiled))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_a_second_process_loads_the_verifier_kernel_without_compiling(tmp_path):
    code = (
        "import json, commsim\n"
        "from commsim import _verify_kernel as k\n"
        "commsim.verify(commsim.build('allreduce', 'ring', nranks=4))\n"
        "st = k.apply_step.stats\n"
        "print(json.dumps([sum(st.cache_hits.values()), sum(st.cache_misses.values())]))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NUMBA_CACHE_DIR": str(tmp_path)}
    runs = []
    for _ in range(2):
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600
        )
        assert out.returncode == 0, out.stderr
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    (_, first_misses), (second_hits, second_misses) = runs
    assert first_misses >= 1  # compiled, and written to the cache
    assert second_misses == 0 and second_hits >= 1


def test_the_mpi4py_executor_runs_without_jax():
    """``--backend mpi4py`` is numpy and mpi4py: planning, running and gathering a schedule and
    the library's own collective beside it import neither JAX nor mpi4jax (1.2 s a rank)."""
    code = (
        "import numpy as np, commsim\n"
        "from commsim.exec import get_backend, layout, random_inputs\n"
        "s = commsim.build('allreduce', 'ring', nranks=1)\n"
        "be = get_backend('mpi4py')\n"
        "lay = layout(s, 8)\n"
        "x = random_inputs(lay, np.float32)\n"
        "for c in (be.compile(s, lay, 'float32'), be.native(s, lay, 'float32')):\n"
        "    out = c.get(c.run(c.put(lay.pack(x))))\n"
        "    assert np.array_equal(lay.unpack(np.asarray(out)), x), out\n"
    )
    heavy = _heavy_after(code)
    assert "jax" not in heavy
    assert "mpi4py" in heavy  # the probe did run the executor
