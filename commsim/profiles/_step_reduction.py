r"""What a reduction costs inside a collective's step, from a profile's measured curves.

An allreduce step sends a buffer, receives into scratch and adds what arrived into a buffer a
message has just read or will read next. On a shared-memory transport the cores then trade the
buffers' cache lines, and the reduction pays for that: on a 2-vCPU virtual machine (MPICH's
shared memory, ``docs/validation.md``) recursive doubling's step at 64 KiB took 54 µs, where
the calibrated exchange (7 µs) and ``numpy.add`` alone (2 µs) add up to 9 µs; from a few MiB,
where the data stream from memory anyway, the parts add up again.

The ``step`` curve (:mod:`commsim.bench.calibrate._mpi_bench`) times that step whole, and the
``exchange`` curve its message alone, so the reduction inside a step costs

.. math::

    r(b) = \max\bigl(t_\text{step}(b) - t_\text{exchange}(b),\; t_\text{reduction}(b)\bigr),

never less than the same reduction alone (the ``reduction`` curve, when measured; 0 otherwise).
The Hockney model charges :math:`r(b)` for every reduction of :math:`b` bytes in place of
:math:`b\gamma` (:meth:`commsim.models.Hockney.from_profile`); its lower bound keeps
:math:`\gamma` = the reduction curve's smallest slope, which :math:`r` never goes below.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from commsim import units
from commsim.profiles._pieces import PiecewiseLinear

__all__ = ["StepReduction"]


@dataclasses.dataclass(frozen=True)
class StepReduction:
    """:math:`r(b)` of the module docstring: seconds to reduce ``b`` bytes inside a step.

    Examples:
        >>> step = PiecewiseLinear.hockney(alpha=10e-6, beta=3e-10)
        >>> exchange = PiecewiseLinear.hockney(alpha=4e-6, beta=1e-10)
        >>> alone = PiecewiseLinear.hockney(alpha=1e-6, beta=1e-10)
        >>> r = StepReduction(step, exchange, alone)
        >>> [round(float(t) * 1e6, 3) for t in r([1000, 10**6])]  # 6 us + 2e-10 s/B
        [6.2, 206.0]
        >>> r.gamma  # the lower bound's: the reduction alone's smallest slope
        1e-10
    """

    step: PiecewiseLinear
    exchange: PiecewiseLinear
    alone: PiecewiseLinear | None = None

    def __call__(self, nbytes: Any) -> np.ndarray:
        """:math:`r(b)` in seconds, elementwise over ``nbytes``."""
        n = np.asarray(nbytes, dtype=np.float64)
        floor = self.alone(n) if self.alone is not None else np.zeros_like(n)
        return np.maximum(self.step(n) - self.exchange(n), floor)

    @property
    def gamma(self) -> float:
        """Seconds per byte that :math:`r(b)` never goes below (for lower bounds)."""
        return self.alone.beta_min if self.alone is not None else 0.0

    def describe(self) -> str:
        """E.g. ``reduction in a step: 26.3us at 64KiB, 1.98ms at 16MiB``."""
        at = [64 * 2**10, 16 * 2**20]
        costs = ", ".join(
            f"{units.format_time(float(self(b)))} at {units.format_size(b)}" for b in at
        )
        return f"reduction in a step: {costs}"

    def to_dict(self) -> dict[str, Any]:
        """The rule and the three fits' pieces (what a model's ``--json`` shows)."""
        return {
            "rule": "max(step(b) - exchange(b), reduction(b))",
            "step": self.step.to_dict(),
            "exchange": self.exchange.to_dict(),
            **({"reduction": self.alone.to_dict()} if self.alone is not None else {}),
        }
