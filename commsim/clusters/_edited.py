"""A preset or cluster file with some fields changed: what ``--set FIELD=VALUE`` names.

:class:`Edited` stands wherever a cluster spec does (:func:`commsim.clusters.cluster`,
:func:`commsim.clusters.description`): its description is the spec's with each ``FIELD=VALUE``
written in (dotted fields name tables: ``inter.bandwidth``, ``topology.oversubscription``; a
link class's name stands for its table, ``rail.bandwidth``, as ``whatif --vary`` names it), and
the cluster's own checks word any error, as for a file.

Examples:
    >>> str(Edited("dgx-h100:2", ("nodes=4", "sharp=true")))
    'dgx-h100:2 with --set nodes=4, sharp=true'
    >>> edit({"inter": {"bandwidth": "400Gb/s"}}, ["inter.bandwidth=800Gb/s", "nodes=4"])
    {'inter': {'bandwidth': '800Gb/s'}, 'nodes': 4}
    >>> edit({"inter": {"kind": "rail", "bandwidth": "400Gb/s"}}, ["rail.bandwidth=800Gb/s"])
    {'inter': {'kind': 'rail', 'bandwidth': '800Gb/s'}}
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from commsim.errors import ParameterError

__all__ = ["Edited", "edit"]


@dataclasses.dataclass(frozen=True)
class Edited:
    """Cluster ``spec`` (a preset or a file) with the ``FIELD=VALUE`` items of ``sets``."""

    spec: str
    sets: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.spec} with --set {', '.join(self.sets)}"


def edit(description: dict[str, Any], sets: Sequence[str]) -> dict[str, Any]:
    """``description`` (changed in place and returned) with each ``FIELD=VALUE`` of ``sets``
    written in; a malformed item is one line (:class:`~commsim.errors.ParameterError`)."""
    for item in sets:
        field, eq, raw = item.partition("=")
        path = [k.strip() for k in field.split(".")]
        if not eq or not all(path) or not raw.strip():
            raise ParameterError(
                f"--set {item!r}: expected FIELD=VALUE, e.g. inter.bandwidth=800Gb/s"
            )
        path[0] = _table_of_class(description, path[0]) if len(path) > 1 else path[0]
        table = description
        for k in path[:-1]:
            inner = table.get(k)
            if inner is None:
                inner = table[k] = {}
            if not isinstance(inner, dict):
                raise ParameterError(f"--set {item!r}: {k!r} is a value, not a table")
            table = inner
        table[path[-1]] = _toml_value(raw.strip())
    return description


def _table_of_class(description: dict[str, Any], name: str) -> str:
    """``name``, or the table (``intra``, ``inter``) whose link class it names, as ``commsim
    whatif --vary`` names a class (``rail.bandwidth`` for ``inter.bandwidth`` on the DGX
    presets); a name both tables' class carries stays as given."""
    if name in description:
        return name
    owners = [
        key
        for key, default in (("intra", "nvlink"), ("inter", "link"))
        if isinstance(description.get(key), dict) and description[key].get("kind", default) == name
    ]
    return owners[0] if len(owners) == 1 else name


def _toml_value(raw: str) -> Any:
    """``VALUE`` as a TOML file would hold it: an integer, a number, true/false, else text."""
    if raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    for kind in (int, float):
        try:
            return kind(raw)
        except ValueError:
            pass
    return raw
