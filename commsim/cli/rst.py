"""Docstrings for a terminal: reStructuredText roles and LaTeX math as plain Unicode text.

The factories' docstrings are written for Sphinx (``:func:`x```, ``:math:`\\alpha```,
``.. math::`` blocks with ``\\frac``); ``commsim algorithms -c C -a A`` prints them through
:func:`to_text`, so a terminal shows ``T = 2(p-1)α + ...`` rather than markup. The LaTeX is
converted by :func:`commsim.algorithms.math_text`, the converter that derives the table's cost
text, so the detail view and the table show one formula alike.

Examples:
    >>> to_text(r"costs :math:`\\lceil\\lg p\\rceil\\alpha` (see :func:`ring`)")
    'costs ⌈lg p⌉α (see ring)'
    >>> to_text(r":math:`\\frac{p-1}{p}n\\beta`")
    '(p-1)/p·nβ'
"""

from __future__ import annotations

import re

from commsim.algorithms import math_text as _math

__all__ = ["to_text"]

_ROLE = re.compile(r":(?:func|class|meth|mod|attr|data|math|ref):`~?([^`]*)`")
_LITERAL = re.compile(r"``([^`]*)``")


def to_text(doc: str) -> str:
    """``doc`` (reStructuredText with LaTeX math) as plain text for a terminal."""
    out: list[str] = []
    math_indent: int | None = None  # the ``.. math::`` directive's indentation, inside its block
    for line in doc.splitlines():
        indent = len(line) - len(line.lstrip())
        if line.strip().startswith(".. math::"):
            math_indent, rest = indent, line.split("::", 1)[1].strip()
            if rest:
                out.append(" " * (indent + 4) + _math(rest))
            continue
        if math_indent is not None and line.strip() and indent <= math_indent:
            math_indent = None  # the block ends at a line no deeper than its directive
        in_math = math_indent is not None
        if in_math:
            out.append(line[:indent] + _math(line).rstrip() if line.strip() else line)
            continue
        line = _ROLE.sub(lambda m: _math(m.group(1)), line)
        out.append(_LITERAL.sub(r"\1", line))
    return "\n".join(out)
