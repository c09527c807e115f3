"""A cluster as its description: the tables of a TOML cluster file, for a preset or a file.

:func:`description` gives a preset's (``dgx-h100:4``) or a file's description, the dict its
TOML file holds; :func:`to_toml` writes one as TOML text that :func:`commsim.clusters.cluster`
reads back into the same cluster. ``commsim topology PRESET --toml FILE`` writes a preset out as a
file to edit (issue #26: presets as files), and the nccl-tests fit writes its fitted file with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tomllib

from commsim._toml import key, value
from commsim.clusters._edited import Edited, edit
from commsim.clusters._presets import PRESETS, cluster

__all__ = ["description", "to_toml"]


def description(spec: str | Path | Edited) -> tuple[dict[str, Any], str, Path | None]:
    """The description (a TOML file's tables) of a preset (``dgx-h100:4``) or a TOML file, its
    origin name, and the directory its relative file names start from (a link's ``profile``);
    :func:`commsim.clusters.cluster` checks it first, so every error is the one ``--cluster``
    gives.

    Examples:
        >>> d, origin, _ = description("dgx-h100:2")
        >>> d["nodes"], d["gpus_per_node"], origin
        (2, 8, 'dgx-h100:2')
    """
    if isinstance(spec, Edited):
        d, origin, base = description(spec.spec)
        named = any(item.partition("=")[0].strip() == "name" for item in spec.sets)
        d = edit(d, spec.sets)
        if not named:  # the model line and --json say which cluster this is: the edited one
            d["name"] = f"{d.get('name', origin)} with --set {', '.join(spec.sets)}"
        return d, str(spec), base
    built = cluster(spec)
    text = str(spec).strip()
    if text.endswith(".toml") or Path(text).is_file():
        path = Path(text)
        return tomllib.loads(path.read_text()), path.name, path.resolve().parent
    name, _, arg = text.partition(":")
    d = PRESETS[name.strip().lower()][1](text, arg)
    d.setdefault("name", built.name)
    return d, text, None


def to_toml(d: Mapping[str, Any]) -> str:
    """A cluster description as TOML (scalars and lists at the top, then its tables).

    Examples:
        >>> print(to_toml({"name": "x", "nodes": 2, "inter": {"bandwidth": "50GB/s"}}), end="")
        name = "x"
        nodes = 2
        <BLANKLINE>
        [inter]
        bandwidth = "50GB/s"
    """
    lines = [f"{key(k)} = {value(v)}" for k, v in d.items() if not isinstance(v, Mapping)]
    for k, v in d.items():
        if isinstance(v, Mapping):
            scalars = {kk: vv for kk, vv in v.items() if not isinstance(vv, Mapping)}
            lines += [
                "",
                f"[{key(k)}]",
                *(f"{key(kk)} = {value(vv)}" for kk, vv in scalars.items()),
            ]
            for kk, vv in v.items():
                if isinstance(vv, Mapping):
                    lines += ["", f"[{key(k)}.{key(kk)}]"]
                    lines += [f"{key(a)} = {value(b)}" for a, b in vv.items()]
    return "\n".join(lines) + "\n"
