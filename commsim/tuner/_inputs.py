"""What the tuner predicts with: a :class:`~commsim.models.Model` from a model, cluster or profile.

:func:`as_model` accepts the three things a user has at hand and returns one model, so the search
never branches on where its numbers came from:

* a :class:`~commsim.models.Model` instance (Hockney, LogGP, Topology, ...), used as is;
* a **cluster**: a preset (``"dgx-h100:16"``), a cluster TOML file, or a
  :class:`~commsim.clusters.Cluster`: the topology model on its graph, with its placement, its
  reduction rate as γ and ``bottleneck`` contention (what ``commsim predict --cluster`` uses);
* a **profile**: a file ``commsim calibrate -o`` wrote, or a :class:`~commsim.profiles.Profile`:
  :meth:`commsim.models.Hockney.from_profile` (its measured message curve, and its reduction
  inside a step where it has a ``step`` curve, else γ).

A cluster also says how many ranks share a server under its placement, which becomes the default
``ranks_per_node`` of the hierarchical algorithms: :meth:`commsim.clusters.Cluster.ranks_per_server`,
the same call ``commsim tune --cluster`` makes, so the library and the command line agree.
:func:`cluster_model` (:mod:`commsim._cluster_model`, re-exported here) is the one builder of a
cluster's topology model, which the CLI and the cluster fit call too.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from commsim._cluster_model import cluster_model
from commsim.clusters import Cluster, cluster
from commsim.errors import ParameterError
from commsim.models import Hockney, Model
from commsim.profiles import Profile, is_profile_file, load_profile

__all__ = ["ModelSource", "as_model", "cluster_model"]


@dataclasses.dataclass(frozen=True, eq=False)
class ModelSource:
    """A resolved model, and the cluster it was built on (``None`` without one)."""

    model: Model
    cluster: Cluster | None = None

    def ranks_per_node(self, nranks: int) -> int | None:
        """The ``ranks_per_node`` the cluster implies for ``nranks`` ranks under its placement
        (``None`` without a cluster, or when the placement splits a server's ranks)."""
        return None if self.cluster is None else self.cluster.ranks_per_server(nranks)


def as_model(source: Any) -> ModelSource:
    """Resolve a model, a cluster (object, preset or ``.toml``) or a profile (object, ``.toml``)."""
    if isinstance(source, Model):
        return ModelSource(source)
    if isinstance(source, Profile):
        return ModelSource(Hockney.from_profile(source))
    if isinstance(source, Cluster):
        return ModelSource(cluster_model(source), source)
    if isinstance(source, (str, Path)):
        if is_profile_file(source):
            return as_model(load_profile(source))
        return as_model(cluster(source))
    raise ParameterError(
        "the tuner's model must be a commsim.models.Model, a cluster (a preset such as "
        f"'dgx-h100:16', a .toml file or a Cluster) or a profile (a .toml file or a Profile), "
        f"got {type(source).__name__}"
    )
