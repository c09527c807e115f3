r"""A message time that is linear in the size piece by piece: what a transport's protocols make it.

Hockney's model times a message of :math:`n` bytes as :math:`\alpha + n\beta`. A real transport
switches protocol with the size (MPI's eager and rendezvous protocols, shared-memory copy modes,
NCCL's LL/LL128/Simple), so a measured curve is linear *in pieces*:

.. math::

    t(n) = \alpha_k + n\,\beta_k \quad\text{for } b_k \le n < b_{k+1},

with breakpoints :math:`0 = b_0 < b_1 < \dots`; the last piece extends to any size. A single
piece is Hockney's model exactly. The pieces come from a fit (:mod:`commsim.bench.calibrate`),
which finds the breakpoints from the data.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from commsim import units
from commsim.errors import ParameterError

__all__ = ["Piece", "PiecewiseLinear"]


@dataclasses.dataclass(frozen=True)
class Piece:
    """:math:`t(n) = \\alpha + n\\beta` for sizes from ``start`` bytes (to the next piece's start)."""

    start: float  # bytes
    alpha: float  # seconds
    beta: float  # seconds per byte

    def __post_init__(self) -> None:
        for name in ("start", "alpha", "beta"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ParameterError(f"piece {name} must be a finite number, got {v!r}")
            if v < 0:
                raise ParameterError(f"piece {name} must be >= 0, got {v!r}")
            object.__setattr__(self, name, float(v))

    def describe(self) -> str:
        bw = "inf" if self.beta == 0 else units.format_bandwidth(1 / self.beta)
        return (
            f"from {units.format_size(self.start, exact=False)}: "
            f"alpha={units.format_time(self.alpha)} bandwidth={bw}"
        )


@dataclasses.dataclass(frozen=True)
class PiecewiseLinear:
    """Message time as a function of bytes, linear in each piece (the module docstring).

    Examples:
        >>> f = PiecewiseLinear((Piece(0, 1e-6, 1e-9), Piece(65536, 5e-6, 5e-10)))
        >>> [round(float(t) * 1e6, 3) for t in f([0, 1000, 65536])]  # us
        [1.0, 2.0, 37.768]
        >>> f.alpha_min, f.beta_min
        (1e-06, 5e-10)
    """

    pieces: tuple[Piece, ...]

    def __post_init__(self) -> None:
        pieces = tuple(self.pieces)
        if not pieces:
            raise ParameterError("a piecewise message time needs at least one piece")
        if pieces[0].start != 0:
            raise ParameterError(f"the first piece must start at 0 bytes, got {pieces[0].start:g}")
        starts = [p.start for p in pieces]
        if any(b <= a for a, b in itertools.pairwise(starts)):
            raise ParameterError(f"piece starts must increase, got {starts}")
        object.__setattr__(self, "pieces", pieces)

    @classmethod
    def hockney(cls, alpha: float, beta: float) -> PiecewiseLinear:
        """One piece: Hockney's :math:`\\alpha + n\\beta`."""
        return cls((Piece(0.0, alpha, beta),))

    @property
    def starts(self) -> np.ndarray:
        return np.array([p.start for p in self.pieces])

    @property
    def alphas(self) -> np.ndarray:
        return np.array([p.alpha for p in self.pieces])

    @property
    def betas(self) -> np.ndarray:
        return np.array([p.beta for p in self.pieces])

    @property
    def alpha_min(self) -> float:
        """The smallest α of any piece: with :attr:`beta_min`, a line below every piece."""
        return float(self.alphas.min())

    @property
    def beta_min(self) -> float:
        return float(self.betas.min())

    def piece_index(self, nbytes: Any) -> np.ndarray:
        """Which piece times a message of ``nbytes`` (array in, array out)."""
        return np.searchsorted(self.starts, np.asarray(nbytes, dtype=np.float64), side="right") - 1

    def __call__(self, nbytes: Any) -> np.ndarray:
        """:math:`t(n)` in seconds, elementwise."""
        n = np.asarray(nbytes, dtype=np.float64)
        k = self.piece_index(n)
        return self.alphas[k] + n * self.betas[k]

    def describe(self) -> str:
        return "; ".join(p.describe() for p in self.pieces)

    def to_dict(self) -> list[dict[str, float]]:
        return [
            {"start_bytes": p.start, "alpha_s": p.alpha, "beta_s_per_byte": p.beta}
            for p in self.pieces
        ]

    @classmethod
    def from_dict(cls, data: Sequence[Any]) -> PiecewiseLinear:
        return cls(tuple(Piece(d["start_bytes"], d["alpha_s"], d["beta_s_per_byte"]) for d in data))
