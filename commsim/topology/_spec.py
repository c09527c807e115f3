"""Topologies named on a command line: ``NAME[:ARGS]`` strings and graph files.

Grammar (whitespace ignored)::

    spec  := NAME [":" args]
    args  := arg ("," arg)*
    arg   := value | KEY "=" value          positional values first, then keywords
    value := an integer, a size-like product "8x8x4", or a quantity with a unit ("400Gb/s", "1us")

``torus:8x8x4`` is ``torus((8, 8, 4))``; ``switch:64,bandwidth=400Gb/s,latency=1us`` is
``switch(64, bandwidth="400Gb/s", latency="1us")``;
``fat_tree:64,hosts_per_leaf=16,spines=16,routing=dmodk`` routes it destination-based
(:mod:`commsim.topology._dmodk`). Every generator in :data:`GENERATORS` takes
the same keywords (``bandwidth``, ``latency``) plus its own. Files: ``.graphml``, ``.gml`` and
node-link ``.json`` (networkx's formats); their attribute strings parse with units like the
keywords.
"""

from __future__ import annotations

import difflib
import inspect
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from commsim._lazy import lazy_module
from commsim.errors import ParameterError, UnknownNameError
from commsim.topology._basic import hypercube, ring, switch, torus
from commsim.topology._dragonfly import dragonfly
from commsim.topology._fat_tree import fat_tree, kary_fat_tree
from commsim.topology._gpu import nvlink_island, rail_optimized

if TYPE_CHECKING:
    import networkx as nx
else:
    nx = lazy_module("networkx")

__all__ = ["GENERATORS", "call_problem", "load_topology", "parse_topology", "register_generator"]

#: Generators reachable by name: ``name -> function(size, **keywords) -> nx.Graph``.
GENERATORS: dict[str, Callable[..., nx.Graph]] = {
    "switch": switch,
    "ring": ring,
    "torus": torus,
    "hypercube": hypercube,
    "fat_tree": fat_tree,
    "kary_fat_tree": kary_fat_tree,
    "dragonfly": dragonfly,
    "nvlink_island": nvlink_island,
    "rail_optimized": rail_optimized,
}

_FILE_SUFFIXES = (".graphml", ".gml", ".json")


def register_generator(name: str, fn: Callable[..., nx.Graph]) -> None:
    """Make generator ``fn`` reachable as ``name`` in topology specs."""
    GENERATORS[name] = fn


def call_problem(
    fn: Callable[..., Any], args: tuple | list, kwargs: dict[str, Any], noun: str = "keyword"
) -> str | None:
    """What is wrong with calling generator ``fn`` with ``args`` and ``kwargs``, as a sentence for
    a user (``None``: nothing); ``noun`` is what a keyword is called where the user wrote it (a
    command line's keyword, a file's field).

    Examples:
        >>> call_problem(switch, (4,), {"bandwith": "1GB/s"})
        'unknown keyword bandwith (did you mean bandwidth?)'
        >>> call_problem(switch, (), {})
        'missing the number of hosts n (the first value)'
        >>> call_problem(switch, (4,), {}) is None
        True
    """
    sig = inspect.signature(fn)
    params = sig.parameters
    takes = [k for k, v in params.items() if v.kind is not v.VAR_KEYWORD]
    open_ended = any(v.kind is v.VAR_KEYWORD for v in params.values())
    for key in kwargs:
        if key not in params and not open_ended:
            close = difflib.get_close_matches(key, takes, n=1)
            hint = f"did you mean {close[0]}?" if close else f"{noun}s: {', '.join(takes)}"
            return f"unknown {noun} {key} ({hint})"
    try:
        sig.bind(*args, **kwargs)
    except TypeError:
        return _bind_problem(fn, params, args, kwargs, noun)
    return None


def _bind_problem(
    fn: Callable[..., Any], params: Any, args: tuple | list, kwargs: dict[str, Any], noun: str
) -> str:
    """Why ``fn(*args, **kwargs)`` does not bind, once the keywords are known ones."""
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    positional = [v for v in params.values() if v.kind in kinds]
    if len(args) > len(positional):
        names = ", ".join(v.name for v in positional)
        takes = f"{fn.__name__} takes {len(positional)} ({names})"
        return f"{len(args)} values before the keywords, {takes}"
    for i, v in enumerate(positional[len(args) :], start=len(args)):
        if v.default is v.empty and v.name not in kwargs:
            what = "the number of hosts n" if v.name == "n" else v.name
            return f"missing {what} (the {_ordinal(i)} value)"
    needed = [
        v.name
        for v in params.values()
        if v.kind is v.KEYWORD_ONLY and v.default is v.empty and v.name not in kwargs
    ]
    if needed:
        return f"missing {noun} {needed[0]}"
    twice = [k for k in kwargs if k in {v.name for v in positional[: len(args)]}]
    return f"a value given twice ({', '.join(twice)})"


def _ordinal(i: int) -> str:
    return ("first", "second", "third")[i] if i < 3 else f"{i + 1}th"


def _value(text: str) -> Any:
    """An int, a tuple of ints (``8x8x4``), a float, or the text itself (a quantity with a unit)."""
    t = text.strip()
    if re.fullmatch(r"\d+", t):
        return int(t)
    if re.fullmatch(r"\d+(x\d+)+", t):
        return tuple(int(x) for x in t.split("x"))
    if re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", t):
        return float(t)
    return t


def parse_topology(text: str) -> nx.Graph:
    """The graph a ``NAME[:ARGS]`` spec names (see the module docstring).

    Examples:
        >>> parse_topology("torus:4x4").number_of_nodes()
        16
        >>> parse_topology("switch:8,bandwidth=400Gb/s").edges[0, "switch"]["bandwidth"]
        50000000000.0
    """
    name, _, rest = text.strip().partition(":")
    name = name.strip().replace("-", "_")
    fn = GENERATORS.get(name)
    if fn is None:
        close = difflib.get_close_matches(name, GENERATORS, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise UnknownNameError(
            f"unknown topology {name!r}{hint} (known: {', '.join(sorted(GENERATORS))})"
        )
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for item in filter(None, (x.strip() for x in rest.split(","))) if rest.strip() else []:
        key, eq, value = item.partition("=")
        if eq:
            kwargs[key.strip().replace("-", "_")] = _value(value)
        elif kwargs:
            raise ParameterError(f"topology {text!r}: positional value {item!r} after a keyword")
        else:
            args.append(_value(item))
    if "routing" in kwargs and "routing" not in inspect.signature(fn).parameters:
        takes = sorted(
            k for k, f in GENERATORS.items() if "routing" in inspect.signature(f).parameters
        )
        raise ParameterError(
            f"topology {text!r}: {name} takes no routing= (only the leaf-spine trees "
            f"{', '.join(takes)} do)"
        )
    problem = call_problem(fn, args, kwargs)
    if problem:
        sig = str(inspect.signature(fn)).replace("'", "")
        raise ParameterError(f"topology {text!r}: {problem} (usage: {name}{sig})")
    return fn(*args, **kwargs)


def load_topology(path: str | Path) -> nx.Graph:
    """A graph from a ``.graphml``, ``.gml`` or node-link ``.json`` file."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in _FILE_SUFFIXES:
        raise ParameterError(
            f"{path}: a topology file ends in {', '.join(_FILE_SUFFIXES)} (got {suffix or 'no suffix'!r})"
        )
    if not path.is_file():
        raise ParameterError(f"{path}: no such file")
    try:
        if suffix == ".graphml":
            return nx.read_graphml(path)
        if suffix == ".gml":
            return nx.read_gml(path)
        return nx.node_link_graph(json.loads(path.read_text()), edges="links")
    except (OSError, ValueError, KeyError, TypeError, SyntaxError, nx.NetworkXError) as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ParameterError(f"{path}: cannot read the graph ({first[:200]})") from None
