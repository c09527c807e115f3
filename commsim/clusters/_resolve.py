"""``commsim.clusters.cluster``: a preset, a TOML file, or either with fields changed.

Examples:
    >>> from commsim.clusters import Edited, cluster
    >>> c = cluster(Edited("dgx-h100:2", ("inter.bandwidth=800Gb/s", "sharp=true")))
    >>> c.link_classes["rail"].bandwidth, c.sharp, c.ngpus
    (100000000000.0, True, 16)
"""

from __future__ import annotations

from pathlib import Path

from commsim.clusters import _presets
from commsim.clusters._build import build_cluster
from commsim.clusters._cluster import Cluster
from commsim.clusters._description import description
from commsim.clusters._edited import Edited

__all__ = ["cluster"]


def cluster(spec: str | Path | Edited) -> Cluster:
    """The cluster a preset (``"dgx-h100:128"``) or a TOML file (``"mine.toml"``) describes,
    or one of them with fields changed (:class:`~commsim.clusters.Edited`: ``--set``).

    Examples:
        >>> c = cluster("dgx-h100:4")
        >>> c.ngpus, c.ranks_per_node, sorted(c.link_classes)
        (32, 8, ['nvlink', 'rail'])
    """
    if isinstance(spec, Edited):
        return build_cluster(*description(spec))
    return _presets.cluster(spec)
