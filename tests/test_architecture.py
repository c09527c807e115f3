"""The layering rules of docs/architecture.md, checked statically over the package's source."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

import commsim
from commsim.exec import BACKENDS

PACKAGE = Path(commsim.__file__).parent
SOURCES = sorted(PACKAGE.rglob("*.py"))


def _rel(path: Path) -> str:
    try:
        return path.relative_to(PACKAGE.parent).as_posix()
    except ValueError:  # a file outside the package (the checks' own test)
        return path.name


def _imports(path: Path) -> list[tuple[str, list[str], int]]:
    """``(module, imported names, line)`` for every import in ``path``, relative ones resolved."""
    tree = ast.parse(path.read_text(), filename=str(path))
    here = _rel(path)[: -len(".py")].replace("/", ".").removesuffix(".__init__")
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, [], node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            out.append((base, [a.name for a in node.names], node.lineno))
    return out


def _package_of(module: str) -> str:
    """``commsim.exec.jax._plan`` -> ``commsim.exec``; modules at the root -> ``commsim``."""
    parts = module.split(".")
    if len(parts) >= 2 and (PACKAGE / parts[1]).is_dir():
        return ".".join(parts[:2])
    return parts[0]


def _violations(rule) -> list[str]:
    found = []
    for path in SOURCES:
        for module, names, line in _imports(path):
            why = rule(_rel(path), module, names)
            if why:
                found.append(f"{_rel(path)}:{line}: {why}")
    return found


def test_nothing_below_the_cli_imports_it():
    low = (
        "commsim/exec/",
        "commsim/models/",
        "commsim/algorithms/",
        "commsim/bench/",
        "commsim/topology/",
        "commsim/clusters/",
    )

    def rule(where: str, module: str, names: list[str]) -> str | None:
        cli = module == "commsim.cli" or module.startswith(("commsim.cli.", "commsim._cli"))
        cli |= module == "commsim" and any(n == "cli" or n.startswith("_cli") for n in names)
        return f"imports the CLI ({module})" if where.startswith(low) and cli else None

    assert _violations(rule) == []


def test_executors_and_bench_never_import_the_registry():
    def rule(where: str, module: str, names: list[str]) -> str | None:
        registry = module.startswith("commsim.algorithms") or (
            module == "commsim" and ("algorithms" in names or "build" in names)
        )
        below = where.startswith(("commsim/exec/", "commsim/bench/"))
        return f"imports the algorithm registry ({module})" if below and registry else None

    assert _violations(rule) == []


def test_the_network_packages_sit_low():
    """topology/ knows graphs, not schedules; profiles/ knows measured curves; clusters/ knows
    both; models know topology and profiles but not clusters (a cluster reaches a model as a
    graph) nor the registry."""
    allowed = {
        # commsim._lazy: networkx imported on first use (a helper every floor uses)
        "commsim/topology/": (
            "commsim.errors",
            "commsim.units",
            "commsim._lazy",
            "commsim._switch_tiers",  # the one rule of a reducing switch's tier (IR rule 7)
            "commsim.topology",
        ),
        "commsim/clusters/": (
            "commsim.errors",
            "commsim.units",
            "commsim._lazy",
            "commsim._toml",  # a helper every floor uses (docs/architecture.md): writing files
            "commsim.topology",
            "commsim.clusters",
            "commsim.profiles",
        ),
        "commsim/profiles/": (
            "commsim.errors",
            "commsim.units",
            "commsim._toml",
            "commsim.profiles",
        ),
    }

    def rule(where: str, module: str, names: list[str]) -> str | None:
        if not module.startswith("commsim"):
            return None
        targets = [f"commsim.{n}" for n in names] if module == "commsim" else [module]
        for target in targets:
            for root, ok in allowed.items():
                inside = any(target == m or target.startswith(m + ".") for m in ok)
                if where.startswith(root) and not inside:
                    return f"imports {target}"
            if where.startswith("commsim/models/") and target.startswith(
                ("commsim.clusters", "commsim.algorithms")
            ):
                return f"imports {target}"
        return None

    assert _violations(rule) == []


def test_no_private_names_across_packages():
    def rule(where: str, module: str, names: list[str]) -> str | None:
        if not module.startswith("commsim"):
            return None
        mine = _package_of(where[: -len(".py")].replace("/", "."))
        theirs = _package_of(module)
        private = [n for n in names if n.startswith("_") and not n.startswith("__")]
        return f"imports {private} from {module}" if private and mine != theirs else None

    assert _violations(rule) == []


def _unit(module: str) -> str:
    """The unit a layer rule talks about: a subpackage (``commsim.exec``), a module at the
    package root (``commsim._ir``), or the package's face (``commsim``, its ``__init__``)."""
    return ".".join(module.split(".")[:2])


def _resolved(module: str, names: list[str]) -> list[str]:
    """What an import really reaches: ``from commsim import units`` is the module
    ``commsim.units``; ``from commsim import Schedule`` is the face; ``from commsim.exec import
    _layout`` the module ``commsim.exec._layout``."""
    out = []
    for n in names or [""]:
        sub = f"{module}.{n}"
        is_module = n and (
            (PACKAGE.parent / sub.replace(".", "/")).is_dir()
            or (PACKAGE.parent / f"{sub.replace('.', '/')}.py").is_file()
        )
        out.append(sub if is_module else module)
    return out


def _is_private_path(module: str) -> bool:
    return any(p.startswith("_") and not p.startswith("__") for p in module.split(".")[1:])


#: The floors, lowest first: a unit imports only units on lower floors (besides its own
#: modules). docs/architecture.md draws them; the face (``commsim``) sits under the CLI only.
FLOORS = (
    ("commsim.errors",),
    (
        "commsim.units",
        "commsim._compat",
        "commsim._toml",
        "commsim._deprecation",
        "commsim._lazy",
        "commsim._switch_tiers",
    ),
    ("commsim._collectives", "commsim.topology", "commsim.profiles"),
    ("commsim._ir", "commsim.clusters", "commsim._wire", "commsim._messages_kernel"),
    (
        "commsim._messages",
        "commsim._progress",
        "commsim._verify_kernel",
        "commsim._verify_trace",
        "commsim._serialize",
        "commsim._wire_run",
    ),
    (
        "commsim.algorithms",
        "commsim._verify",
        "commsim.models",
        "commsim.exec",
        "commsim.interop",
        "commsim.viz",
        "commsim.sparse",
    ),
    ("commsim._cluster_model",),
    ("commsim.tuner",),
    ("commsim.bench", "commsim"),
    ("commsim.cli",),
    ("commsim.__main__",),
)
FLOOR = {unit: level for level, units in enumerate(FLOORS) for unit in units}


def _edges() -> list[tuple[str, str, str]]:
    """``(importing module, imported module, "path:line")`` for every import of the package by
    itself, function-level imports included."""
    out = []
    for path in SOURCES:
        here = _rel(path)[: -len(".py")].replace("/", ".").removesuffix(".__init__")
        for module, names, line in _imports(path):
            if module.split(".")[0] == "commsim":
                out += [(here, t, f"{_rel(path)}:{line}") for t in _resolved(module, names)]
    return out


def _up_a_floor() -> list[str]:
    return [
        f"{where}: {a} imports {b}"
        for a, b, where in _edges()
        if _unit(a) != _unit(b) and FLOOR[_unit(b)] >= FLOOR[_unit(a)]
    ]


def _circles() -> list[list[str]]:
    import networkx as nx

    return list(nx.simple_cycles(nx.DiGraph((a, b) for a, b, _ in _edges() if a != b)))


def _private_modules_of_others() -> list[str]:
    return [
        f"{where}: {a} imports {b}"
        for a, b, where in _edges()
        if _is_private_path(b) and _unit(b) != _unit(a) and (PACKAGE / b.split(".")[1]).is_dir()
    ]


def _face_imports() -> list[str]:
    below = ("commsim", "commsim.cli", "commsim.__main__")
    return [f"{where}: {a}" for a, b, where in _edges() if b == "commsim" and _unit(a) not in below]


def test_every_unit_has_a_floor():
    units = {_unit(a) for a, _, _ in _edges()} | {_unit(b) for _, b, _ in _edges()}
    assert units - set(FLOOR) == set()


def test_no_import_runs_up_a_floor():
    """Every arrow of the import graph (function-level imports included) points down."""
    assert _up_a_floor() == []


def test_no_import_circle_even_inside_a_package():
    """Module by module, function-level imports included, the import graph has no circle."""
    assert _circles() == []


def test_no_private_module_of_another_package():
    """Module paths, not only names: ``commsim.tuner._candidates`` is the tuner's own business
    (the root's private modules, the IR floor, are everyone's)."""
    assert _private_modules_of_others() == []


def test_below_the_cli_nothing_imports_the_face():
    """``from commsim import Schedule`` runs up to the package's face: import the layer."""
    assert _face_imports() == []


def test_the_layer_checks_catch_what_they_look_for(tmp_path, monkeypatch):
    """A small package that breaks every layer rule once: each check names its breach."""
    files = {
        "__init__.py": "",
        "_ir.py": "",
        "cli/__init__.py": "",
        "tuner/__init__.py": "",
        "tuner/_candidates.py": "",
        "bench/__init__.py": "",
        "bench/a.py": "from commsim import Schedule, _ir\nfrom commsim.tuner import _candidates\n",
        "bench/b.py": "from commsim.bench import c\n",
        "bench/c.py": "def f():\n    from commsim.cli import main\n    from commsim.bench import b\n",
    }
    for name, text in files.items():
        (tmp_path / "commsim" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "commsim" / name).write_text(text)
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", tmp_path / "commsim")
    monkeypatch.setattr(
        sys.modules[__name__], "SOURCES", sorted((tmp_path / "commsim").rglob("*.py"))
    )
    assert _up_a_floor() == [
        "commsim/bench/a.py:1: commsim.bench.a imports commsim",
        "commsim/bench/c.py:2: commsim.bench.c imports commsim.cli",
    ]
    assert [sorted(c) for c in _circles()] == [["commsim.bench.b", "commsim.bench.c"]]
    assert _private_modules_of_others() == [
        "commsim/bench/a.py:2: commsim.bench.a imports commsim.tuner._candidates"
    ]
    assert _face_imports() == ["commsim/bench/a.py:1: commsim.bench.a"]


def _comparisons(path: Path, names: set[str]) -> list[str]:
    """``path:line`` of every ``==``, ``!=``, ``in`` or ``not in`` with one of ``names`` as a
    literal, or as a module-level constant holding such literals (``_GPUS = ("cuda",)`` then
    ``x in _GPUS`` is the same comparison)."""
    tree = ast.parse(path.read_text())

    def literals(node: ast.AST) -> list[ast.AST]:
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return [e for e in node.elts if isinstance(e, ast.Constant)]
        return [node] if isinstance(node, ast.Constant) else []

    constants = {
        t.id: literals(n.value)
        for n in tree.body
        if isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None
        for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
        if isinstance(t, ast.Name)
    }
    hits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and isinstance(
            node.ops[0], (ast.Eq, ast.NotEq, ast.In, ast.NotIn)
        ):
            for side in [node.left, *node.comparators]:
                consts = literals(side)
                if isinstance(side, ast.Name):
                    consts = constants.get(side.id, [])
                if any(c.value in names for c in consts):
                    hits.append(f"{_rel(path)}:{node.lineno}")
    return hits


def _collective_comparisons(path: Path) -> list[str]:
    return _comparisons(path, set(commsim.COLLECTIVES))


def _backend_comparisons(path: Path) -> list[str]:
    return _comparisons(path, set(BACKENDS))


@pytest.mark.parametrize("path", SOURCES, ids=_rel)
def test_only_the_specs_compare_collective_names(path):
    if path.name == "_collectives.py":
        return
    assert _collective_comparisons(path) == []


@pytest.mark.parametrize("path", SOURCES, ids=_rel)
def test_only_the_executors_compare_backend_names(path):
    """Outside ``exec/`` a backend is its row (launcher, capabilities), never its name."""
    if _rel(path).startswith("commsim/exec/"):
        return
    if _rel(path) == "commsim/_compat.py":  # JAX's platform names ("cuda", "rocm"), not backends
        return
    assert _backend_comparisons(path) == []


def test_the_checks_catch_what_they_look_for(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text('def f(s):\n    return s.collective == "allgather" or s in ("reduce", "x")\n')
    assert len(_collective_comparisons(bad)) == 2
    bad.write_text('MPI = ("mpi", "x")\n\ndef f(b):\n    return b not in MPI or b.name == "jax"\n')
    assert len(_backend_comparisons(bad)) == 2


#: functions allowed past :data:`MAX_FUNCTION_LINES` besides compiled kernels (whose loops are
#: kept in one function for the compiler): each is someone's open work (issue #20)
#: ``path:name`` of functions allowed past the limit while they are being split (none now)
LONG_FUNCTIONS: set[str] = set()
MAX_FUNCTION_LINES = 80


def _long_functions(sources: list[Path]) -> list[str]:
    """``path:name (lines)`` of every function over :data:`MAX_FUNCTION_LINES` lines (its
    docstring included) that is not a compiled kernel (``@numba.njit``/``@njit``)."""
    found = []
    for path in sources:
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            kernel = any("njit" in ast.unparse(d) for d in node.decorator_list)
            lines = node.end_lineno - node.lineno + 1
            if lines > MAX_FUNCTION_LINES and not kernel:
                found.append(f"{_rel(path)}:{node.name} ({lines} lines)")
    return found


def test_functions_fit_on_a_screen():
    found = [f.rsplit(" (", 1)[0] for f in _long_functions(SOURCES)]
    assert [f for f in found if f not in LONG_FUNCTIONS] == []
    assert set(found) >= LONG_FUNCTIONS, "an exception that is short now: drop it from the list"


def test_the_length_check_sees_a_long_function(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    (tmp_path / "long.py").write_text(f"def f():\n{body}\n\n@numba.njit\ndef k():\n{body}\n")
    assert [f.rsplit(":", 1)[1] for f in _long_functions([tmp_path / "long.py"])] == [
        f"f ({MAX_FUNCTION_LINES + 1} lines)"
    ]
