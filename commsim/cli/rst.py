"""Docstrings for a terminal: reStructuredText roles and LaTeX math as plain Unicode text.

The factories' docstrings are written for Sphinx (``:func:`x```, ``:math:`\\alpha```,
``.. math::`` blocks with ``\\frac``); ``commsim algorithms -c C -a A`` prints them through
:func:`to_text`, so a terminal shows ``T = 2(p-1)α + ...`` rather than markup.

Examples:
    >>> to_text(r"costs :math:`\\lceil\\lg p\\rceil\\alpha` (see :func:`ring`)")
    'costs ⌈lg p⌉α (see ring)'
    >>> to_text(r":math:`\\frac{p-1}{p}n\\beta`")
    '(p-1)/p·nβ'
"""

from __future__ import annotations

import re

__all__ = ["to_text"]

_SYMBOLS = {
    r"\alpha": "α", r"\beta": "β", r"\gamma": "γ", r"\lceil": "⌈", r"\rceil": "⌉",
    r"\lfloor": "⌊", r"\rfloor": "⌋", r"\cdot": "·", r"\times": "×", r"\le": "≤", r"\ge": "≥",
    r"\sum": "Σ", r"\infty": "∞", r"\ldots": "…", r"\lg": "lg", r"\log": "log",
    r"\qquad": "    ", r"\quad": "  ", r"\,": " ", r"\#": "#",
    r"\Bigl": "", r"\Bigr": "", r"\bigl": "", r"\bigr": "", r"\left": "", r"\right": "",
}  # fmt: skip
_ROLE = re.compile(r":(?:func|class|meth|mod|attr|data|math|ref):`~?([^`]*)`")
_LITERAL = re.compile(r"``([^`]*)``")
_TEXT = re.compile(r"\\(?:text|mathrm|operatorname)\{([^{}]*)\}")
_FRAC = re.compile(r"\\frac\{([^{}]*)\}\{([^{}]*)\}")
_COMMAND = re.compile(r"\\[A-Za-z]+|\\[,{}#]")
_SCRIPT = re.compile(r"([_^])\{([^{}]*)\}")  # a sub- or superscript group without nested braces


def _script(m: re.Match[str]) -> str:
    body = m.group(2)
    return m.group(1) + (body if re.fullmatch(r"\w'?", body) else f"({body})")


def _fraction(m: re.Match[str]) -> str:
    num, den = m.group(1), m.group(2)
    wrap = lambda x: x if re.fullmatch(r"[A-Za-z]'?|[\d.]+", x) else f"({x})"
    return f"{wrap(num)}/{wrap(den)}\x01"  # a product dot, if a factor follows


def _math(text: str) -> str:
    """LaTeX math as readable Unicode: symbols, ``a/b`` fractions, no braces or commands."""
    text = _TEXT.sub(lambda m: m.group(1).strip(), text)  # the words; spacing comes from outside
    text = text.replace(r"\{", "\x02").replace(r"\}", "\x03")
    while True:  # innermost groups first: scripts and fractions nest inside each other
        done = _FRAC.sub(_fraction, _SCRIPT.sub(_script, text))
        if done == text:
            break
        text = done
    text = _COMMAND.sub(lambda m: _SYMBOLS.get(m.group(0), m.group(0)[1:]), text)
    text = re.sub("\x01(?=[\\s)=,+\\-]|$)", "", text).replace("\x01", "·")
    text = re.sub(r"(?<![_^])\{([^{}]*)\}", r"\1", text)  # grouping braces
    return text.replace("\x02", "{").replace("\x03", "}")


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
            out.append(_math(line) if line.strip() else line)
            continue
        line = _ROLE.sub(lambda m: _math(m.group(1)), line)
        out.append(_LITERAL.sub(r"\1", line))
    return "\n".join(out)
