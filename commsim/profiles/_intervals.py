r"""How sure a fit is of its pieces: an interval per parameter and a verdict on its breakpoints.

A curve fitted from interleaved measurement blocks (``commsim calibrate --blocks``) carries a
:class:`FitIntervals`: for every piece, an interval for where it starts, for its
:math:`\alpha` and for its :math:`\beta`, and the share of resamples in which its breakpoint
appeared (its *support*). The status says whether the piece structure is ``"stable"`` (every
breakpoint of the fit found again in most resamples) or which were not, as
``"unstable breakpoints: ..."``. The method that made them is
:mod:`commsim.bench.calibrate._stability`.

Two calibrations of one machine agree when they have as many pieces and every parameter's two
intervals overlap (:meth:`FitIntervals.agrees`); an old profile without intervals still loads
(``Curve.intervals`` is ``None``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from commsim.errors import ParameterError

__all__ = ["FitIntervals"]

_ARRAYS = ("start", "alpha", "beta")


@dataclasses.dataclass(frozen=True, eq=False)
class FitIntervals:
    """Intervals of a piecewise fit's parameters, one row per piece.

    Attributes:
        start: ``[pieces, 2]`` bytes, where each piece starts (low, high); the first is 0.
        alpha: ``[pieces, 2]`` seconds.
        beta: ``[pieces, 2]`` seconds per byte.
        support: ``[pieces]`` the share of resamples that found each piece's breakpoint (1 for
            the first piece).
        level: the intervals' coverage (0.95), read from the resamples' percentiles at the
            expanded level for their number of blocks
            (:func:`commsim.bench.calibrate.expanded_level`).
        replicates: resamples the intervals come from.
        blocks: the independent measurement blocks that were resampled.
        status: ``"stable"``, or ``"unstable breakpoints: ..."`` naming the breakpoints
            fewer resamples found, and their support.
    """

    start: np.ndarray
    alpha: np.ndarray
    beta: np.ndarray
    support: np.ndarray
    level: float
    replicates: int
    blocks: int
    status: str

    def __post_init__(self) -> None:
        for name in (*_ARRAYS, "support"):
            object.__setattr__(self, name, np.asarray(getattr(self, name), dtype=np.float64))
        k = len(self.support)
        if any(getattr(self, a).shape != (k, 2) for a in _ARRAYS):
            raise ParameterError(
                f"fit intervals: start, alpha and beta need one (low, high) pair per piece ({k})"
            )

    @property
    def stable(self) -> bool:
        """Whether every breakpoint the data suggested was found again in most resamples."""
        return self.status == "stable"

    def covers(self, piece: int, alpha: float, beta: float) -> bool:
        """Whether ``alpha`` and ``beta`` lie in piece ``piece``'s intervals."""
        (a0, a1), (b0, b1) = self.alpha[piece], self.beta[piece]
        return bool(a0 <= alpha <= a1 and b0 <= beta <= b1)

    def agrees(self, other: FitIntervals) -> bool:
        """Whether two fits agree: as many pieces, and every parameter's intervals overlap (two
        estimates of one value, each with its own interval, differ by less than the two
        half-widths together).

        Examples:
            >>> one = FitIntervals([[0, 0]], [[1, 3]], [[1, 2]], [1], 0.95, 100, 5, "stable")
            >>> two = FitIntervals([[0, 0]], [[2, 4]], [[1.5, 3]], [1], 0.95, 100, 5, "stable")
            >>> (
            ...     one.agrees(two),
            ...     one.agrees(
            ...         FitIntervals([[0, 0]], [[5, 6]], [[1, 2]], [1], 0.95, 100, 5, "stable")
            ...     ),
            ... )
            (True, False)
        """
        if len(self.support) != len(other.support):
            return False
        return all(
            bool((getattr(self, a)[:, 0] <= getattr(other, a)[:, 1]).all())
            and bool((getattr(other, a)[:, 0] <= getattr(self, a)[:, 1]).all())
            for a in _ARRAYS
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            **{f"{a}_interval": getattr(self, a).tolist() for a in _ARRAYS},
            "support": self.support.tolist(),
            "level": self.level,
            "replicates": self.replicates,
            "blocks": self.blocks,
            "status": self.status,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], field: str = "intervals") -> FitIntervals:
        """Read :meth:`to_dict`'s table; a bad one is one line naming ``field``."""
        try:
            return cls(
                *(np.array(d[f"{a}_interval"], dtype=np.float64) for a in _ARRAYS),
                np.array(d["support"], dtype=np.float64),
                float(d["level"]),
                int(d["replicates"]),
                int(d["blocks"]),
                str(d["status"]),
            )
        except KeyError as e:
            raise ParameterError(f"{field}: missing {e.args[0]}") from None
        except (TypeError, ValueError) as e:
            raise ParameterError(f"{field}: {e}") from None
