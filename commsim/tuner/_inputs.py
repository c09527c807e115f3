"""What the tuner predicts with: a :class:`~commsim.models.Model` from a model, cluster or profile.

:func:`as_model` accepts the three things a user has at hand and returns one model, so the search
never branches on where its numbers came from:

* a :class:`~commsim.models.Model` instance (Hockney, LogGP, Topology, ...), used as is;
* a **cluster**: a preset (``"dgx-h100:16"``), a cluster TOML file, or a
  :class:`~commsim.clusters.Cluster`: the topology model on its graph, with its placement, its
  reduction rate as γ and ``bottleneck`` contention (what ``commsim predict --cluster`` uses);
* a **profile**: a file ``commsim calibrate -o`` wrote, or a :class:`~commsim.profiles.Profile`:
  :meth:`commsim.models.Hockney.from_profile` (its measured message curve and γ).

A cluster also says how many consecutive ranks share a server, which becomes the default
``ranks_per_node`` of the hierarchical algorithms (as on the command line).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import tomllib

from commsim.clusters import Cluster, cluster
from commsim.errors import ParameterError
from commsim.models import Hockney, Model, Topology
from commsim.profiles import Profile, load_profile

__all__ = ["ModelSource", "as_model", "cluster_model"]

#: the ``format`` field of a profile file (how a profile ``.toml`` is told from a cluster ``.toml``)
_PROFILE_FORMAT = "commsim-profile"


@dataclasses.dataclass(frozen=True, eq=False)
class ModelSource:
    """A resolved model, and the ``ranks_per_node`` its cluster implies (``None`` without one)."""

    model: Model
    ranks_per_node: int | None = None


def cluster_model(c: Cluster, *, contention: str = "bottleneck") -> Topology:
    """The topology model of cluster ``c``: its graph, its default placement, γ from its
    reduction rate.

    Examples:
        >>> from commsim.clusters import cluster
        >>> cluster_model(cluster("dgx-h100:2")).to_dict()["hosts"]
        16
    """
    return Topology(c.network, placement=c.placement, contention=contention, gamma=c.gamma)


def as_model(source: Any) -> ModelSource:
    """Resolve a model, a cluster (object, preset or ``.toml``) or a profile (object, ``.toml``)."""
    if isinstance(source, Model):
        return ModelSource(source)
    if isinstance(source, Profile):
        return ModelSource(Hockney.from_profile(source))
    if isinstance(source, Cluster):
        linear = source.placement == "linear"
        return ModelSource(cluster_model(source), source.ranks_per_node if linear else None)
    if isinstance(source, (str, Path)):
        if _is_profile_file(source):
            return as_model(load_profile(source))
        return as_model(cluster(source))
    raise ParameterError(
        "the tuner's model must be a commsim.models.Model, a cluster (a preset such as "
        f"'dgx-h100:16', a .toml file or a Cluster) or a profile (a .toml file or a Profile), "
        f"got {type(source).__name__}"
    )


def _is_profile_file(path: str | Path) -> bool:
    """Whether ``path`` is a readable TOML file whose ``format`` says it is a profile (anything
    else is left to the cluster reader, whose errors name the problem)."""
    path = Path(path)
    if not path.is_file():
        return False
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False
    return data.get("format") == _PROFILE_FORMAT
