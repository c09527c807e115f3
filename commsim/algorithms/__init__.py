"""The algorithm library: schedule factories for every collective, and combinators.

Use :func:`commsim.build` (or :func:`build` here) by name; :func:`available` lists the names.
Each factory's docstring states its α-β-γ cost once, in a ``.. math::`` block (the table text
:attr:`AlgorithmInfo.cost` is derived from it by :func:`cost_text`), with its references and
its siblings under See Also.
:func:`parallel` and :func:`channels` run schedules side by side on channels of their own (IR rule
6); :func:`on_channels` lays out ``k`` channels as the algorithm's row says (spread over the
servers' NICs for ``snake_ring`` and ``nccl_tree``, :func:`rotate_in_servers`), copies otherwise;
:func:`pipeline` runs one chunk by chunk, as a wavefront. :data:`NCCL_ALGORITHMS` says which of
them NCCL runs for each collective.
"""

# importing the algorithm modules registers their factories
from commsim.algorithms import (  # noqa: F401
    bruck,
    direct,
    hierarchical,
    nccl,
    packed_rings,
    parameter_server,
    recursive,
    ring,
    swing,
    torus,
    torus_multiport,
    trees,
)

# isort: off
from commsim.algorithms import in_network  # noqa: F401  (appended: the registry keeps its order)
from commsim.algorithms import packed_trees  # noqa: F401  (registered last: ties keep their rows)
from commsim.algorithms import collnet  # noqa: F401  (after them: the rows before keep their ties)

# isort: on
from commsim.algorithms._channel_layout import on_channels, rotate_in_servers
from commsim.algorithms._combinators import concat, lazy, relabel, with_root
from commsim.algorithms._math import cost_text, math_text
from commsim.algorithms._nccl_choice import (
    NCCL_ALGORITHMS,
    NCCL_CHOICES,
    NCCL_FABRIC_CHOICES,
    NCCL_SWITCH_CHOICES,
    nccl_choices,
)
from commsim.algorithms._parallel import MAX_PARTS, channels, parallel
from commsim.algorithms._pipeline import pipeline
from commsim.algorithms._registry import (
    REGISTRY,
    AlgorithmInfo,
    available,
    build,
    info,
    register,
    unregister,
)

__all__ = [
    "MAX_PARTS",
    "NCCL_ALGORITHMS",
    "NCCL_CHOICES",
    "NCCL_FABRIC_CHOICES",
    "NCCL_SWITCH_CHOICES",
    "REGISTRY",
    "AlgorithmInfo",
    "available",
    "build",
    "channels",
    "concat",
    "cost_text",
    "info",
    "lazy",
    "math_text",
    "nccl_choices",
    "on_channels",
    "parallel",
    "pipeline",
    "register",
    "relabel",
    "rotate_in_servers",
    "unregister",
    "with_root",
]
