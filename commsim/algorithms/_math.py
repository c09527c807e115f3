r"""The factories' LaTeX as plain text: the one formula per algorithm, read by tables and terminals.

Every factory states its single-port Hockney time once, in its docstring's ``.. math::`` block
(for readers, rendered by Sphinx); ``cost_fn`` on its registry row is the same time as code (for
the sweep). The text that ``commsim algorithms`` shows is neither written nor stored: it is
:func:`cost_text` of that block, so the table and the docstring cannot drift.

The grammar is the restricted LaTeX the docstrings use:

* symbols: ``\alpha \beta \gamma`` → ``α β γ``; ``\lceil \rceil \lfloor \rfloor`` → ``⌈⌉⌊⌋``;
  ``\cdot \times \le \ge \sum \lg \log \#``; sizing (``\Bigl``, ``\left``, …) disappears;
* ``\frac{a}{b}`` → ``a/b``, parenthesized unless ``a`` (or ``b``) is one symbol or a number,
  with a product dot when a factor follows (``\frac{n}{p}\beta`` → ``n/p·β``);
* sub- and superscripts: ``d_i``, ``2^{k}`` → ``2^k``, ``2^{H-1}`` → ``2^(H-1)``;
* ``\text{words}`` → the words; grouping braces disappear, ``\{ \}`` stay as braces;
* spacing: source whitespace becomes single spaces, none inside brackets; the thin space ``\,``
  separates factors, so it is a product dot between two symbols (``\lg p\,\alpha`` →
  ``lg p·α``) and nothing elsewhere (``(p-1)\,\alpha`` → ``(p-1)α``); ``\quad``/``\qquad`` are
  two and four spaces.

A cost block holds one or more *displays* separated by ``\qquad``: each is ``T = …`` (or a bound
on ``T``, or a definition used by the others), optionally ending in ``\quad (condition)``.
:func:`cost_text` drops the ``T =``, puts each condition in front (``p = 2^L: …``) and joins the
displays with ``; ``.

Examples:
    >>> math_text(r"2(p-1)\,\alpha + 2\frac{p-1}{p}\,n\beta + \frac{p-1}{p}\,n\gamma")
    '2(p-1)α + 2(p-1)/p·nβ + (p-1)/p·nγ'
    >>> math_text(r"\lceil \lg p \rceil\,(\alpha + n\beta)")
    '⌈lg p⌉(α + nβ)'
    >>> cost_text('''Ring.
    ...
    ... .. math::
    ...     T = L\\alpha \\quad (p = 2^L), \\qquad T = (L+2)\\alpha \\quad (\\text{otherwise})
    ... ''')
    'p = 2^L: Lα; otherwise: (L+2)α'
"""

from __future__ import annotations

import re

__all__ = ["cost_text", "math_blocks", "math_text"]

_SYMBOLS = {
    r"\alpha": "α", r"\beta": "β", r"\gamma": "γ", r"\lceil": "⌈", r"\rceil": "⌉",
    r"\lfloor": "⌊", r"\rfloor": "⌋", r"\cdot": "·", r"\times": "×", r"\le": "≤", r"\ge": "≥",
    r"\sum": "Σ", r"\infty": "∞", r"\ldots": "…", r"\dots": "…", r"\lg": "lg", r"\log": "log",
    r"\qquad": "\x04\x04\x04\x04", r"\quad": "\x04\x04", r"\#": "#", r"\bmod": "mod",
    r"\Bigl": "", r"\Bigr": "", r"\bigl": "", r"\bigr": "", r"\left": "", r"\right": "",
}  # fmt: skip
_TEXT = re.compile(r"\\(?:text|mathrm|operatorname)\{([^{}]*)\}")
_FRAC = re.compile(r"\\frac\{([^{}]*)\}\{([^{}]*)\}")
_COMMAND = re.compile(r"\\[A-Za-z]+|\\[{}#]")
_SCRIPT = re.compile(r"([_^])\{([^{}]*)\}")  # a sub- or superscript group without nested braces
_ATOM = re.compile(r"[A-Za-z](?:_\w)?'?|[\d.]+")  # needs no parentheses in a/b
_THIN = "\x05"  # ``\,``: a product dot between two symbols, nothing elsewhere
_OPEN, _CLOSE = "(⌈⌊", ")⌉⌋"
_MARK = "\x01"  # after a fraction: a product dot if a factor follows


def _script(m: re.Match[str]) -> str:
    body = m.group(2)
    return m.group(1) + (body if re.fullmatch(r"\w'?", body) else f"({body})")


def _fraction(m: re.Match[str]) -> str:
    num, den = (x.strip() for x in m.groups())
    wrap = lambda x: x if _ATOM.fullmatch(x) else f"({x})"
    return f"{wrap(num)}/{wrap(den)}{_MARK}"


def math_text(latex: str) -> str:
    r"""One piece of the docstrings' LaTeX as readable Unicode text (the module's grammar).

    Examples:
        >>> math_text(r"\frac{n}{2^{k}}\beta"), math_text(r"\frac{n}{D_i}(\beta + \gamma)")
        ('n/(2^k)·β', 'n/D_i·(β + γ)')
        >>> math_text(r"\lg p\,\alpha + \frac{n}{2}\lg p\,\beta")
        'lg p·α + n/2·lg p·β'
        >>> math_text(r"c_k = \#\{0 \le i < p : \text{bit } k \text{ of } i \text{ set}\}")
        'c_k = #{0 ≤ i < p : bit k of i set}'
    """
    text = " ".join(latex.split())
    text = _TEXT.sub(lambda m: m.group(1).strip(), text)  # the words; spacing comes from outside
    text = text.replace(r"\{", "\x02").replace(r"\}", "\x03")
    text = text.replace(r"\,", _THIN)
    while True:  # innermost groups first: scripts and fractions nest inside each other
        done = _FRAC.sub(_fraction, _SCRIPT.sub(_script, text))
        if done == text:
            break
        text = done
    text = _COMMAND.sub(lambda m: _SYMBOLS.get(m.group(0), m.group(0)[1:]), text)
    text = re.sub(f"(?<=[\\w']){_THIN} ?(?=[A-Za-zαβγ⌈])", "·", text).replace(_THIN, "")
    text = re.sub(f"{_MARK}(?=[\\s)=,;+\\-]|$)", "", text).replace(_MARK, "·")
    text = re.sub(r"(?<![_^])\{([^{}]*)\}", r"\1", text)  # grouping braces
    text = re.sub(f"(?<=[{_OPEN}]) +| +(?=[{_CLOSE}])", "", text)
    return text.replace("\x02", "{").replace("\x03", "}").replace("\x04", " ")


def math_blocks(doc: str) -> list[str]:
    """The LaTeX of every ``.. math::`` block in ``doc``, each on one line.

    A block is the directive's own line and the lines indented deeper than it that follow.

    Examples:
        >>> math_blocks("Text.\\n\\n.. math::\\n    a\\n    + b\\n\\nMore. .. math:: c")
        ['a + b']
    """
    blocks: list[list[str]] = []
    indent: int | None = None  # the directive's indentation while inside its block
    for line in doc.splitlines():
        depth = len(line) - len(line.lstrip())
        if line.strip().startswith(".. math::"):
            indent = depth
            blocks.append([line.split("::", 1)[1]])
        elif indent is not None and line.strip() and depth <= indent:
            indent = None
        elif indent is not None:
            blocks[-1].append(line)
    return [" ".join(" ".join(b).split()) for b in blocks]


def _display(latex: str) -> str:
    """One display as table text: ``condition: right-hand side``."""
    body, _, condition = latex.strip().rstrip(",.").partition(r"\quad")
    text = math_text(body).strip().rstrip(",")
    text = text[len("T = ") :] if text.startswith("T = ") else text
    cond = math_text(condition).strip().rstrip(",")
    cond = cond[1:-1] if cond.startswith("(") and cond.endswith(")") else cond
    return f"{cond}: {text}" if cond else text


def cost_text(doc: str) -> str:
    r"""The plain-text cost of a factory: its docstring's first ``.. math::`` block, displayed.

    Displays (separated by ``\qquad``) are joined by ``; ``, each without its ``T =`` and with
    its ``\quad (condition)`` in front; ``""`` when ``doc`` has no ``.. math::`` block.

    Examples:
        >>> cost_text(".. math:: T = (p-1)\\left(\\alpha + \\frac{n}{p}\\beta\\right)")
        '(p-1)(α + n/p·β)'
        >>> cost_text("no formula")
        ''
    """
    blocks = math_blocks(doc)
    if not blocks:
        return ""
    return "; ".join(_display(d) for d in blocks[0].split(r"\qquad") if d.strip())
