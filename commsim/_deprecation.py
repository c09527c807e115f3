"""Old public names kept for one release: each warns once per call site and forwards.

A renamed function keeps its old name as ``old = deprecated(new, "old", "package.new")``: a
:class:`DeprecationWarning` naming the replacement, then the new function's result. Nothing
else changes for the caller, so a release can drop the alias without a behaviour change.

Examples:
    >>> import warnings
    >>> def double(x):
    ...     return 2 * x
    >>> twice = deprecated(double, "twice", "double")
    >>> with warnings.catch_warnings(record=True) as w:
    ...     warnings.simplefilter("always")
    ...     twice(3), str(w[0].message)
    (6, 'twice is deprecated and will be removed in the next release: use double')
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

__all__ = ["deprecated", "warn_deprecated"]


def warn_deprecated(old: str, new: str, *, stacklevel: int = 3) -> None:
    """Warn that ``old`` is deprecated in favour of ``new`` (at the caller's caller)."""
    warnings.warn(
        f"{old} is deprecated and will be removed in the next release: use {new}",
        DeprecationWarning,
        stacklevel=stacklevel,
    )


def deprecated(func: Callable[..., Any], old: str, new: str) -> Callable[..., Any]:
    """``func`` under its old name ``old``: it warns (:func:`warn_deprecated`), then calls
    ``func``. Works for methods too (assign it in the class body or on the class)."""

    @functools.wraps(func)
    def alias(*args: Any, **kwargs: Any) -> Any:
        warn_deprecated(old, new)
        return func(*args, **kwargs)

    alias.__name__ = old.rpartition(".")[2]
    alias.__qualname__ = alias.__name__
    alias.__doc__ = f"Deprecated: use :func:`{new}` (this name goes in the next release)."
    return alias
