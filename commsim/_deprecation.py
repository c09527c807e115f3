"""Old public names that keep working for one release, with a :class:`DeprecationWarning`.

Two shapes, one wording (``OLD is deprecated; use NEW``):

* a renamed module attribute stays out of the module's namespace and ``__all__`` and is served
  by a module-level ``__getattr__`` (PEP 562) that :func:`deprecated_aliases` makes: every access,
  ``import`` or attribute, warns and names the replacement, then returns the object;
* a renamed function or method keeps its old name as :func:`deprecated` of the new one: a call
  warns, then forwards.

Examples:
    >>> import warnings
    >>> __getattr__ = deprecated_aliases("pkg", {"old": ("pkg.new", len)})
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     __getattr__("old") is len, str(caught[0].message)
    (True, 'pkg.old is deprecated; use pkg.new')
    >>> twice = deprecated(lambda x: 2 * x, "pkg.twice", "pkg.double")
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     twice(3), str(caught[0].message)
    (6, 'pkg.twice is deprecated; use pkg.double')
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["deprecated", "deprecated_aliases", "warn_deprecated"]


def warn_deprecated(old: str, new: str, *, stacklevel: int = 3) -> None:
    """Warn that ``old`` is deprecated in favour of ``new`` (by default at the caller's caller:
    the user's line)."""
    warnings.warn(f"{old} is deprecated; use {new}", DeprecationWarning, stacklevel=stacklevel)


def deprecated_aliases(module: str, aliases: Mapping[str, tuple[str, Any]]) -> Callable[[str], Any]:
    """A module ``__getattr__`` serving ``aliases`` (old name → (the replacement, as the user
    should write it; the object)) with a :class:`DeprecationWarning`; any other name is an
    :class:`AttributeError`, as Python's own."""

    def __getattr__(name: str) -> Any:
        if name not in aliases:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        new, obj = aliases[name]
        warn_deprecated(f"{module}.{name}", new)
        return obj

    return __getattr__


def deprecated(func: Callable[..., Any], old: str, new: str) -> Callable[..., Any]:
    """``func`` under its old name ``old``: a call warns (:func:`warn_deprecated`), then
    forwards. Works for methods too (assign it on the class)."""

    @functools.wraps(func)
    def alias(*args: Any, **kwargs: Any) -> Any:
        warn_deprecated(old, new)
        return func(*args, **kwargs)

    alias.__name__ = alias.__qualname__ = old.rpartition(".")[2].removesuffix("()")
    alias.__doc__ = f"Deprecated: use ``{new}`` (this name goes in the next release)."
    return alias
