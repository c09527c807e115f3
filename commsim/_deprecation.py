"""Old public names that keep working for one release, with a :class:`DeprecationWarning`.

A package that renamed something keeps the old name out of its namespace and ``__all__`` and
serves it from a module-level ``__getattr__`` (PEP 562) made here: every access, ``import`` or
attribute, warns and names the replacement, then returns the object.

Examples:
    >>> import warnings
    >>> __getattr__ = deprecated_aliases("pkg", {"old": ("pkg.new", len)})
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     __getattr__("old") is len, str(caught[0].message)
    (True, 'pkg.old is deprecated; use pkg.new')
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["deprecated_aliases"]


def deprecated_aliases(module: str, aliases: Mapping[str, tuple[str, Any]]) -> Callable[[str], Any]:
    """A module ``__getattr__`` serving ``aliases`` (old name → (the replacement, as the user
    should write it; the object)) with a :class:`DeprecationWarning`; any other name is an
    :class:`AttributeError`, as Python's own."""

    def __getattr__(name: str) -> Any:
        if name not in aliases:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        new, obj = aliases[name]
        warnings.warn(f"{module}.{name} is deprecated; use {new}", DeprecationWarning, stacklevel=2)
        return obj

    return __getattr__
