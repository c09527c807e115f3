r"""The collective library's layer: what a library such as NCCL adds to a schedule's messages.

A schedule says which bytes move where; the network model says how long each message takes on
its links. Between the two sits the library that carries the schedule, and it costs time of its
own (``docs/library.md``):

* **a per-call cost** (``launch``): launching the collective's kernel and synchronising the
  ranks before the first message, paid once per call, not per message. Every rank's clock
  starts there:

  .. math::

      c_r(0) = \text{skew}_r + t_\text{launch}.

  It is the "launch" part of a prediction's breakdown
  (:attr:`~commsim.models.NetworkUsage.part_names`), beside "latency", "reduction" and the
  link classes.

* **a reduction overlapped with its transfer** (``reduction_overlap``): a GPU's reduce-copy
  kernel adds each chunk of a received message into the buffer while later chunks are still
  arriving, so the receiver of :math:`b` bytes, of which :math:`b_\text{red}` are reduced, is
  done at

  .. math::

      e_\text{red} = s + L_m + \max\left(\frac{b}{R_m},\; b_\text{red}\,\gamma\right)
                   = e + \max\left(0,\; b_\text{red}\,\gamma - \frac{b}{R_m}\right)

  instead of :math:`e + b_\text{red}\gamma` (the serial rule, kept for CPU/MPI reductions,
  which start after the receive completes). Only the excess of the reduction over the
  transfer is exposed (:func:`reduction_exposed`); it is the "reduction" part of the
  breakdown. A rank's local reductions (no message to hide behind) stay serial.

Both are parameters of the topology model (:class:`~commsim.models.Topology`'s ``launch=`` and
``reduction_overlap=``, read by its timing through
:class:`~commsim.models._network_params.NetworkParams`), set from a cluster's ``launch`` and
``reduction_overlap`` fields (:mod:`commsim.clusters`); models without a cluster keep both off,
so their results do not change.

References:
    NVIDIA NCCL, ``src/graph/tuning.cc`` (commit 5067397, 2026): ``baseLatencies``, the
    per-call latency of each algorithm and protocol; ``src/device/reduce_kernel.h`` and
    ``prims_simple.h``: the reduce-copy primitives that reduce a chunk as it is received.

See Also:
    :class:`commsim.models.Topology`: the model these parameters shape.
    :func:`commsim.algorithms._parallel.channels`: a schedule as C copies on NCCL's channels.
"""

from __future__ import annotations

import numpy as np

__all__ = ["launch_clock", "reduction_exposed"]


def launch_clock(clock: np.ndarray, launch: float) -> np.ndarray:
    """Clocks ``clock`` (``[ranks, sizes]``, each rank's start skew) after the per-call cost.

    Examples:
        >>> launch_clock(np.zeros((2, 1)), 5e-6)[:, 0].tolist()
        [5e-06, 5e-06]
    """
    return clock + launch if launch else clock


def reduction_exposed(reduction: np.ndarray, transfer: np.ndarray, overlap: bool) -> np.ndarray:
    """The part of a received message's reduction time charged after its transfer ends: all of
    it (serial), or its excess over the transfer time when the two overlap.

    Args:
        reduction: seconds to reduce the message's reduced bytes (:math:`b_\\text{red}\\gamma`).
        transfer: seconds its bytes took on the wire (:math:`b / R_m`).
        overlap: whether the receiver reduces while the message arrives.

    Examples:
        >>> reduction_exposed(np.array([3.0, 1.0]), np.array([2.0, 2.0]), True).tolist()
        [1.0, 0.0]
        >>> reduction_exposed(np.array([3.0, 1.0]), np.array([2.0, 2.0]), False).tolist()
        [3.0, 1.0]
    """
    if not overlap:
        return np.asarray(reduction, dtype=np.float64)
    return np.maximum(np.asarray(reduction, dtype=np.float64) - transfer, 0.0)
