r"""How sparse the data is: a per-index probability of being nonzero, and the expected sizes that
follow from it.

A rank's vector of ``N`` elements has index ``i`` nonzero with probability :math:`q_i`,
independently across ranks. **Uniform** density ``d``: :math:`q_i = d`. **Power law** (the
feature frequencies of text and recommendation models that Zhao & Canny's allreduce is built
for): :math:`q_i = \min(1, c\,(i+1)^{-a})`, ``c`` chosen so that the expected fraction of
nonzeros is still ``d``; index 0 is the hottest.

The sum of ``k`` such vectors is nonzero where any of them is, so its expected support is

.. math:: E|S_1 \cup \dots \cup S_k| = \sum_i 1 - (1 - q_i)^k \;=\; N\,(1 - (1 - d)^k)
   \quad (\text{uniform})

(Renggli et al., SC 2019, §4: the expected fill-in of a sparse reduction). Sums run over
**bins** rather than indices: geometric bins (each about 0.2 % wide in ``i``, where ``q`` varies
by less than ``a`` × 0.2 %) split at every block edge, so a 64 MiB vector costs a few thousand
terms, not sixteen million. Uniform densities are exact.

References:
    Renggli, Ashkboos, Aghagolzadeh, Alistarh & Hoefler, "SparCML: High-Performance Sparse
    Communication for Machine Learning", SC 2019.
    Zhao & Canny, "Kylix: A Sparse Allreduce for Commodity Clusters", ICPP 2014 (power-law
    data).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from commsim.errors import ParameterError

__all__ = ["DISTRIBUTIONS", "Density", "expected_union"]

#: The density models :class:`Density` knows.
DISTRIBUTIONS = ("uniform", "powerlaw")
_BINS = 4096  # geometric bins over [1, N]: consecutive edges differ by a factor N**(1/4096)


def expected_union(nelems: float, density: float, k: int) -> float:
    """``N (1 - (1 - d)^k)``: the expected nonzeros of a sum of ``k`` vectors of uniform density.

    Examples:
        >>> round(expected_union(1000, 0.01, 4), 2)  # 4 supports of 10: overlaps are rare
        39.4
        >>> expected_union(1000, 0.5, 1)
        500.0
    """
    return nelems * -math.expm1(k * math.log1p(-density)) if density < 1 else float(nelems)


@dataclasses.dataclass(frozen=True)
class Density:
    """The chance of each index being nonzero in one rank's vector.

    Attributes:
        density: the expected fraction of nonzeros, in ``(0, 1]``.
        distribution: ``"uniform"`` or ``"powerlaw"`` (see the module docstring).
        exponent: the power law's ``a > 0`` (1: Zipf).

    Examples:
        >>> Density(0.01).block_union(4000, 4, 4).round(2).tolist()
        [39.4, 39.4, 39.4, 39.4]
        >>> hot = Density(0.01, "powerlaw").block_nnz(4000, 4)
        >>> bool(hot[0] > hot[-1]), round(float(hot.sum()), 6)
        (True, 40.0)
    """

    density: float
    distribution: str = "uniform"
    exponent: float = 1.0

    def __post_init__(self) -> None:
        d = self.density
        if isinstance(d, bool) or not isinstance(d, (int, float)) or not 0 < d <= 1:
            raise ParameterError(f"density must be in (0, 1] (a fraction of nonzeros), got {d!r}")
        if self.distribution not in DISTRIBUTIONS:
            raise ParameterError(
                f"distribution must be one of {', '.join(DISTRIBUTIONS)}, got {self.distribution!r}"
            )
        if not (math.isfinite(self.exponent) and self.exponent > 0):
            raise ParameterError(f"the power-law exponent must be > 0, got {self.exponent!r}")

    def describe(self) -> str:
        """E.g. ``"1% uniform"``, ``"1% power law (a = 1)"``."""
        pct = f"{self.density * 100:g}%"
        return (
            f"{pct} uniform"
            if self.distribution == "uniform"
            else f"{pct} power law (a = {self.exponent:g})"
        )

    # -- bins ----------------------------------------------------------------------------------
    def _bins(self, nelems: int, nblocks: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(width, q, block)`` per bin: indices in it, their probability, their block."""
        edges = np.arange(nblocks + 1, dtype=np.int64) * nelems // nblocks
        if self.distribution == "powerlaw":
            geo = np.unique(np.geomspace(1, nelems + 1, _BINS).astype(np.int64) - 1)
            edges = np.unique(np.concatenate([edges, geo[(geo > 0) & (geo < nelems)]]))
        width = np.diff(edges).astype(np.float64)
        keep = width > 0
        lo, width = edges[:-1][keep], width[keep]
        block = np.searchsorted(np.arange(1, nblocks + 1) * nelems // nblocks, lo, side="right")
        if self.distribution == "uniform":
            return width, np.full(len(width), float(self.density)), block
        mid = np.sqrt((lo + 1.0) * (lo + width))  # geometric middle of (i + 1) over the bin
        shape = mid**-self.exponent
        want = self.density * nelems
        lo_c, hi_c = 0.0, 1.0
        while np.sum(width * np.minimum(1.0, hi_c * shape)) < want:
            hi_c *= 2.0
        for _ in range(100):  # bisection on c: the expected nonzeros are d N
            c = 0.5 * (lo_c + hi_c)
            lo_c, hi_c = (
                (c, hi_c) if np.sum(width * np.minimum(1.0, c * shape)) < want else (lo_c, c)
            )
        q = np.minimum(1.0, hi_c * shape)
        return width, q, block

    def block_nnz(self, nelems: int, nblocks: int) -> np.ndarray:
        """Expected nonzeros of one rank's vector in each of ``nblocks`` equal blocks."""
        width, q, block = self._bins(nelems, nblocks)
        return np.bincount(block, weights=width * q, minlength=nblocks)

    def block_union(self, nelems: int, nblocks: int, k: int) -> np.ndarray:
        """Expected nonzeros of the sum of ``k`` ranks' vectors in each block."""
        width, q, block = self._bins(nelems, nblocks)
        full = q >= 1.0  # always nonzero: log1p(-1) would be -inf
        fill = np.where(full, 1.0, -np.expm1(k * np.log1p(-np.where(full, 0.0, q))))
        return np.bincount(block, weights=width * fill, minlength=nblocks)

    def sample(self, nelems: int, rng: np.random.Generator) -> np.ndarray:
        """Sorted nonzero indices of one random vector (``int64``) drawn from this density."""
        if self.distribution == "uniform":
            return np.flatnonzero(rng.random(nelems) < self.density)
        width, q, _ = self._bins(nelems, 1)
        per_index = np.repeat(q, width.astype(np.int64))
        return np.flatnonzero(rng.random(nelems) < per_index)
