"""Which algorithm NCCL runs for each collective: data for whoever models an NCCL run.

An nccl-tests log is NCCL's choice, not a schedule, so a model of it needs the algorithm NCCL
would have run (``commsim calibrate --from-nccl-tests`` and ``commsim validate
--from-nccl-tests`` run this one unless ``--algorithm`` says otherwise):

* **allreduce**: NCCL's ring, ordered by the topology so that it visits each server's GPUs in
  turn: ``snake_ring`` (:mod:`commsim.algorithms.nccl`), which takes ``ranks_per_node``.
* **allgather**, **reduce_scatter**: the ring.
* **broadcast**: NCCL's pipelined chain (its ring, cut open at the root): ``chain``.
* **reduce**: NCCL's is a pipelined chain too, which commsim does not have; Rabenseifner's
  stands in, and a fitted efficiency absorbs the difference.
* **alltoall**: NCCL posts every send at once: ``direct``.

``commsim validate --from-nccl-tests LOG -a auto`` lets the model choose instead, as NCCL's
tuner does, among :func:`nccl_choices`: the rows NCCL picks from per collective (for
allreduce its ring and its tree, :data:`NCCL_CHOICES`, and where the servers' NVSwitches reduce
NVLS on one server or NVLSTree across servers, :data:`NCCL_SWITCH_CHOICES`; and where the
fabric's switches reduce, InfiniBand SHARP, CollNetDirect across servers,
:data:`NCCL_FABRIC_CHOICES`), each on 1, 2, 4, ... channels
(:func:`commsim.algorithms.on_channels`) and with the fastest protocol (Simple alone for the
in-network rows, as NCCL).

References:
    NCCL's cost model, ``src/graph/tuning.cc``, chooses among its algorithms per collective and
    size; ``docs/nccl-tests.md`` says what a fit to a log can and cannot know.

Examples:
    >>> from commsim.algorithms import available
    >>> all(a in available(c) for c, a in NCCL_ALGORITHMS.items())
    True
"""

from __future__ import annotations

__all__ = [
    "NCCL_ALGORITHMS",
    "NCCL_CHOICES",
    "NCCL_FABRIC_CHOICES",
    "NCCL_SWITCH_CHOICES",
    "nccl_choices",
]

#: collective → the registry name of the algorithm NCCL runs for it (module docstring: why).
NCCL_ALGORITHMS: dict[str, str] = {
    "allreduce": "snake_ring",
    "allgather": "ring",
    "reduce_scatter": "ring",
    "broadcast": "chain",
    "reduce": "rabenseifner",
    "alltoall": "direct",
}

#: collective → the registry rows NCCL's tuner chooses among (``tuning.cc``: ring and tree for
#: allreduce; one algorithm for the others), for ``validate --from-nccl-tests -a auto``.
NCCL_CHOICES: dict[str, tuple[str, ...]] = {
    **{c: (a,) for c, a in NCCL_ALGORITHMS.items()},
    "allreduce": ("snake_ring", "nccl_tree"),
}

#: collective → ``(one server, several servers)``: the in-network row NCCL's tuner adds where
#: each server's NVSwitch reduces (``tuning.cc``: NVLS on one server; NVLSTree across servers,
#: where it disables NVLS without CollNet and NVLSTree on one server).
NCCL_SWITCH_CHOICES: dict[str, tuple[str, str]] = {"allreduce": ("nvls", "nvls_tree")}

#: collective → the in-network row NCCL's tuner adds across servers where the fabric's switches
#: reduce (InfiniBand SHARP with NCCL's CollNet plugin: ``tuning.cc`` offers CollNetDirect with
#: Simple only, and only with ``collnetEnable``).
NCCL_FABRIC_CHOICES: dict[str, str] = {"allreduce": "collnet_direct"}


def nccl_choices(
    collective: str,
    *,
    switch_reduces: bool = False,
    servers: int = 1,
    fabric_reduces: bool = False,
) -> tuple[str, ...]:
    """The rows NCCL's tuner chooses among for ``collective`` on ``servers`` servers, with the
    in-network rows where the servers' switches reduce (``switch_reduces``: NVLS) and where the
    fabric's do (``fabric_reduces``: SHARP, across servers only).

    Examples:
        >>> nccl_choices("allreduce", switch_reduces=True, servers=2)
        ('snake_ring', 'nccl_tree', 'nvls_tree')
        >>> nccl_choices("allreduce", switch_reduces=True), nccl_choices("allgather")
        (('snake_ring', 'nccl_tree', 'nvls'), ('ring',))
        >>> nccl_choices("allreduce", servers=4, fabric_reduces=True)
        ('snake_ring', 'nccl_tree', 'collnet_direct')
    """
    rows = NCCL_CHOICES[collective]
    switch = NCCL_SWITCH_CHOICES.get(collective)
    if switch_reduces and switch is not None:
        rows = (*rows, switch[0] if servers <= 1 else switch[1])
    fabric = NCCL_FABRIC_CHOICES.get(collective)
    if fabric_reduces and fabric is not None and servers > 1:
        rows = (*rows, fabric)
    return rows
