"""The topology model of a cluster: the one place a :class:`~commsim.clusters.Cluster` becomes a
:class:`~commsim.models.Topology`.

The clusters sit below the models (``tests/test_architecture.py``: a cluster reaches a model as a
graph), so a cluster states its model's inputs (:meth:`~commsim.clusters.Cluster.topology_inputs`:
graph, placement, contention, γ from its reduction rate, the collective library's per-call
``launch`` and ``reduction_overlap``, :mod:`commsim.models._library`) and this module, at the root where both
packages may be imported, builds the model. ``commsim predict --cluster``, ``commsim.tune`` on a
cluster (re-exported as :func:`commsim.tuner.cluster_model`) and the cluster fit of
``commsim calibrate --from-nccl-tests`` all call it, so they predict with the same model.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from commsim.clusters import Cluster
from commsim.models import Protocol, Topology

__all__ = ["cluster_model"]


def cluster_model(
    c: Cluster,
    *,
    placement: str | Sequence[int] | None = None,
    contention: str = "bottleneck",
    gamma: float | None = None,
    protocol: Protocol | str | None = None,
    **stragglers: Any,
) -> Topology:
    """The topology model of cluster ``c``: its graph, its placement (or ``placement``), γ from
    its reduction rate (or ``gamma``), from :meth:`~commsim.clusters.Cluster.topology_inputs`;
    messages carried by ``protocol`` (``"LL"``, ``"LL128"``, ``"Simple"``, or ``None``: the
    links' latency and rate, the cluster's ``launch``; :mod:`commsim.models._library`).
    ``stragglers`` (``start_skew``, ``slow_ranks``, ``link_factor``) go to the model as given.

    Examples:
        >>> from commsim.clusters import cluster
        >>> cluster_model(cluster("dgx-h100:2")).to_dict()["hosts"]
        16
    """
    inputs = c.topology_inputs(placement, contention)
    if gamma is not None:
        inputs["gamma"] = gamma
    return Topology(inputs.pop("network"), protocol=protocol, **inputs, **stragglers)
