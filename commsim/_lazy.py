"""Heavy third-party modules imported on first use, so that ``import commsim`` and ``commsim
--help`` start at once.

networkx costs about 0.15 s to import and numba about 0.2 s (``python -X importtime``); most
commands need neither. A module that uses networkx writes ::

    from typing import TYPE_CHECKING

    from commsim._lazy import lazy_module

    if TYPE_CHECKING:
        import networkx as nx
    else:
        nx = lazy_module("networkx")

and uses ``nx.Graph`` as before: the first attribute read imports networkx (once; Python's own
module cache holds it after that). Nothing is put in :data:`sys.modules` before that read, so
``"networkx" in sys.modules`` stays a true test of whether it was imported
(``tests/test_startup.py`` checks it after ``import commsim`` and after ``commsim --help``).

Compiled (numba) kernels cannot be proxied this way (a kernel that calls another needs the real
dispatcher when it compiles): they live in their own modules (``*_kernels.py``), which the code
that runs them imports inside the function that runs them.

See Also:
    :mod:`commsim._compat`: version shims for JAX, imported when called too.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any

__all__ = ["lazy_exports", "lazy_module"]


class _LazyModule:
    """A stand-in for a module, importing it at the first attribute read."""

    __slots__ = ("_module", "_name")

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attribute: str) -> Any:
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return getattr(self._module, attribute)

    def __repr__(self) -> str:
        state = "imported" if self._module is not None else "not imported yet"
        return f"<lazy module {self._name!r} ({state})>"


def lazy_module(name: str) -> Any:
    """A proxy for the module ``name`` that imports it when one of its attributes is first read.

    Args:
        name: an absolute module name, e.g. ``"networkx"``.

    Returns:
        An object whose attributes are the module's (``lazy_module("math").pi``).

    Examples:
        >>> import sys
        >>> m = lazy_module("colorsys")
        >>> m.rgb_to_hsv(1.0, 0.0, 0.0)
        (0.0, 1.0, 1.0)
        >>> "colorsys" in sys.modules
        True
    """
    return _LazyModule(name)


def lazy_exports(
    package: str,
    exports: Mapping[str, Sequence[str]],
    fallback: Callable[[str], Any] | None = None,
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__`` (PEP 562) that import each public name from
    its module on first use.

    The package's ``__init__`` keeps its imports, under ``if TYPE_CHECKING:`` (for readers,
    type checkers and the layering tests, which read imports), and serves them with these two.

    Args:
        package: the package's name (``__name__``).
        exports: module → the public names it defines (``{"commsim.models.hockney":
            ["Hockney"]}``).
        fallback: the ``__getattr__`` to ask for any other name (deprecated aliases); ``None``:
            an :class:`AttributeError`, as Python's own.

    Returns:
        ``(__getattr__, __dir__)``: the first keeps each name it imports in the package, so the
        lookup happens once.

    Examples:
        >>> getattr_, dir_ = lazy_exports("pkg", {"colorsys": ["rgb_to_hsv"]})
        >>> getattr_("rgb_to_hsv").__module__, "rgb_to_hsv" in dir_()
        ('colorsys', True)
    """
    where = {name: module for module, names in exports.items() for name in names}

    def __getattr__(name: str) -> Any:
        if name not in where:
            if fallback is not None:
                return fallback(name)
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(where[name]), name)
        module = sys.modules.get(package)
        if module is not None:
            setattr(module, name, value)
        return value

    def __dir__() -> list[str]:
        module = sys.modules.get(package)
        return sorted(set(vars(module) if module is not None else ()) | set(where))

    return __getattr__, __dir__
