"""A preset or cluster file with some fields changed: what ``--set FIELD=VALUE`` names.

:class:`Edited` stands wherever a cluster spec does (:func:`commsim.clusters.cluster`,
:func:`commsim.clusters.description`): its description is the spec's with each ``FIELD=VALUE``
written in (dotted fields name tables: ``inter.bandwidth``, ``topology.oversubscription``), and
the cluster's own checks word any error, as for a file.

Examples:
    >>> str(Edited("dgx-h100:2", ("nodes=4", "sharp=true")))
    'dgx-h100:2 with --set nodes=4, sharp=true'
    >>> edit({"inter": {"bandwidth": "400Gb/s"}}, ["inter.bandwidth=800Gb/s", "nodes=4"])
    {'inter': {'bandwidth': '800Gb/s'}, 'nodes': 4}
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
