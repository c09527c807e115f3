"""The layering rules of docs/architecture.md, checked statically over the package's source."""

from __future__ import annotations

import ast
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
        "commsim/topology/": ("commsim.errors", "commsim.units", "commsim.topology"),
        "commsim/clusters/": (
            "commsim.errors",
            "commsim.units",
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


def _comparisons(path: Path, names: set[str]) -> list[str]:
    """``path:line`` of every ``==``, ``!=`` or ``in`` with one of ``names`` as a literal."""
    tree = ast.parse(path.read_text())
    hits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and isinstance(
            node.ops[0], (ast.Eq, ast.NotEq, ast.In, ast.NotIn)
        ):
            for side in [node.left, *node.comparators]:
                consts = [side] if isinstance(side, ast.Constant) else []
                if isinstance(side, (ast.Tuple, ast.List, ast.Set)):
                    consts = [e for e in side.elts if isinstance(e, ast.Constant)]
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
    assert _backend_comparisons(path) == []


def test_the_checks_catch_what_they_look_for(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text('def f(s):\n    return s.collective == "allgather" or s in ("reduce", "x")\n')
    assert len(_collective_comparisons(bad)) == 2
    bad.write_text('def f(b):\n    return b not in ("mpi", "x") or b.name == "jax"\n')
    assert len(_backend_comparisons(bad)) == 2
