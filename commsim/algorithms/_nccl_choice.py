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
tuner does, among :data:`NCCL_CHOICES`: the rows NCCL picks from per collective (for
allreduce its ring and its tree; NVLS and CollNet are not modelled here), each on 1, 2, 4, ...
channels (:func:`commsim.algorithms.on_channels`) and with the fastest protocol.

References:
    NCCL's cost model, ``src/graph/tuning.cc``, chooses among its algorithms per collective and
    size; ``docs/nccl-tests.md`` says what a fit to a log can and cannot know.

Examples:
    >>> from commsim.algorithms import available
    >>> all(a in available(c) for c, a in NCCL_ALGORITHMS.items())
    True
"""

from __future__ import annotations

__all__ = ["NCCL_ALGORITHMS", "NCCL_CHOICES"]

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
