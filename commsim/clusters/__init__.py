"""Hypothetical clusters: presets from public specifications and TOML cluster files.

:func:`cluster` resolves ``"dgx-h100:128"`` or ``"mine.toml"`` into a :class:`Cluster`, whose
graph the topology model (:class:`commsim.models.Topology`) predicts on. ``docs/clusters.md``
documents every preset's numbers and their sources, and the file format.
"""

from commsim.clusters._build import FABRICS, build_cluster
from commsim.clusters._cluster import Cluster, LinkClass, LinkProfile
from commsim.clusters._description import description, to_toml
from commsim.clusters._edited import Edited
from commsim.clusters._presets import PRESETS, load_cluster
from commsim.clusters._resolve import cluster

__all__ = [
    "FABRICS",
    "PRESETS",
    "Cluster",
    "Edited",
    "LinkClass",
    "LinkProfile",
    "build_cluster",
    "cluster",
    "description",
    "load_cluster",
    "to_toml",
]
