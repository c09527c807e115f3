r"""Fits that do not depend on noise: breakpoints kept only where resamples find them again.

One piecewise fit (:func:`~commsim.bench.calibrate.fit_pieces`) of one run's medians may split
the curve where the machine merely hiccupped: two ``commsim calibrate`` runs on one machine then
disagree on the pieces (issue #19). :func:`fit_stable` measures how far the structure can be
trusted, from measurements taken in :math:`R` interleaved **blocks** (each block one pass over
every size, so a disturbance that lasts a while lands in one block, not in one size):

1. **Noise scale.** The BIC's scale is the larger of the repeats' own spread (IQR / 1.349, as
   :func:`~commsim.bench.calibrate.fit_curve`) and the blocks' spread (1.4826 × the median
   absolute deviation of the block medians around the overall median, relative, median over
   sizes): a slow disturbance that moves a whole pass counts as noise.
2. **Block bootstrap.** :math:`B` resamples draw :math:`R` blocks with replacement (Künsch
   1989, blocks of whole passes), take each size's median over the drawn blocks' repeats, and
   fit them again with the same rule.
3. **Stability selection.** A breakpoint of the fit to all repeats is kept when at least
   :data:`SUPPORT` of the resamples put a breakpoint within one size of it (Meinshausen and
   Bühlmann 2010, who select what a share of subsamples selects); the others are merged away
   (the two pieces become one) and the status says so: ``"unstable breakpoints merged: ..."``.
4. **Intervals.** Each resample is fitted again with the kept structure (each breakpoint at the
   resample's own nearest one), and every parameter (each piece's start, :math:`\alpha`,
   :math:`\beta`) gets the percentile interval of its resampled values (Efron and Tibshirani
   1993, ch. 13): at ``level`` 0.95, the 2.5 % and 97.5 % percentiles.

The resampling uses a fixed seed, so the same samples always give the same intervals.

References:
    H. R. Künsch, "The jackknife and the bootstrap for general stationary observations",
    Annals of Statistics 17(3), 1989.
    N. Meinshausen and P. Bühlmann, "Stability selection", JRSS B 72(4), 2010.
    B. Efron and R. J. Tibshirani, *An Introduction to the Bootstrap*, Chapman & Hall, 1993.

See Also:
    :class:`commsim.profiles.FitIntervals`: what a stable fit carries into the profile.
"""

from __future__ import annotations

import numpy as np

from commsim import units
from commsim.bench.calibrate._fit import _quality, fit_at, fit_curve, fit_pieces
from commsim.bench.calibrate._samples import Samples
from commsim.profiles import Curve, FitIntervals

__all__ = ["REPLICATES", "SUPPORT", "fit_stable"]

#: resamples per curve: enough for 95 % percentile intervals (Efron and Tibshirani 1993 ask
#: for 1000 for fine percentiles; 100 give the 2.5 % point to within about one resample)
REPLICATES = 100
#: the share of resamples that must find a breakpoint again for it to stay (stability
#: selection's threshold; Meinshausen and Bühlmann recommend 0.6 to 0.9)
SUPPORT = 0.75


def _noise(samples: Samples) -> float:
    """The BIC's relative noise scale: the larger of the repeats' and the blocks' spread."""
    within = float(np.median(samples.spread)) / 1.349
    rel = samples.block_medians() / samples.median - 1
    between = 1.4826 * np.median(np.abs(rel - np.median(rel, axis=0)), axis=0)
    return max(within, float(np.median(between)))


def _starts(sizes: np.ndarray, fit) -> list[int]:
    """The indices of the sizes where ``fit``'s pieces start."""
    return [int(np.searchsorted(sizes, p.start)) if p.start else 0 for p in fit.pieces]


def _resamples(samples: Samples, replicates: int, seed: int) -> np.ndarray:
    """``[replicates, sizes]`` medians, each over ``blocks`` blocks drawn with replacement."""
    per = samples.times.shape[1] // samples.blocks
    by_block = samples.times.reshape(len(samples.sizes), samples.blocks, per)
    draws = np.random.default_rng(seed).integers(0, samples.blocks, (replicates, samples.blocks))
    picked = by_block[:, draws, :]  # [sizes, replicates, blocks, per]
    return np.median(picked.reshape(len(samples.sizes), replicates, -1), axis=2).T


def _nearest(found: list[int], k: int) -> int | None:
    """The breakpoint of ``found`` within one size of index ``k`` (the closest), or ``None``."""
    near = [f for f in found if f and abs(f - k) <= 1]
    return min(near, key=lambda f: abs(f - k)) if near else None


def fit_stable(
    samples: Samples,
    *,
    max_pieces: int = 4,
    replicates: int = REPLICATES,
    support: float = SUPPORT,
    level: float = 0.95,
    seed: int = 0,
) -> Curve:
    """The piecewise fit of ``samples`` with only the breakpoints resamples confirm, and an
    interval for every parameter (the module docstring). Samples of one block fall back to
    :func:`~commsim.bench.calibrate.fit_curve` (no intervals).

    Examples:
        >>> rng = np.random.default_rng(1)
        >>> n = 2.0 ** np.arange(3, 23)
        >>> t = np.where(n < 65536, 1e-6 + n / 4e9, 20e-6 + n / 8e9)
        >>> s = Samples(
        ...     "exchange",
        ...     n,
        ...     t[:, None] * (1 + 0.01 * rng.standard_normal((20, 15))),
        ...     "mpi",
        ...     2,
        ...     blocks=5,
        ... )
        >>> c = fit_stable(s)
        >>> [p.start for p in c.fit.pieces], c.intervals.status
        ([0.0, 65536.0], 'stable')
    """
    if samples.blocks < 2:
        return fit_curve(samples, max_pieces=max_pieces)
    sizes, med = samples.sizes, samples.median
    noise = _noise(samples)
    fit, _ = fit_pieces(sizes, med, noise=noise, max_pieces=max_pieces)
    starts = _starts(sizes, fit)
    boot = _resamples(samples, replicates, seed)
    found = [
        _starts(sizes, fit_pieces(sizes, b, noise=noise, max_pieces=max_pieces)[0]) for b in boot
    ]
    share = {k: np.mean([_nearest(f, k) is not None for f in found]) for k in starts[1:]}
    kept = [0, *(k for k in starts[1:] if share[k] >= support)]
    merged = [k for k in starts[1:] if share[k] < support]
    status = "stable"
    if merged:
        where = ", ".join(
            f"{units.format_size(sizes[k], exact=False)} ({100 * share[k]:.0f}%)" for k in merged
        )
        status = (
            f"unstable breakpoints merged: {where} of {replicates} resamples found them, "
            f"fewer than {100 * support:.0f}%"
        )
    fit, resid = fit_at(sizes, med, kept)
    rows = []
    for b, f in zip(boot, found, strict=True):
        mine = [0, *(_nearest(f, k) or k for k in kept[1:])]
        if len(set(mine)) < len(mine):  # two kept breakpoints matched one: use the kept ones
            mine = kept
        rf, _ = fit_at(sizes, b, mine)
        rows.append(np.stack([rf.starts, rf.alphas, rf.betas]))
    q = 100 * np.array([(1 - level) / 2, (1 + level) / 2])
    lo_hi = np.percentile(np.array(rows), q, axis=0)  # [2, 3, pieces]
    intervals = FitIntervals(
        *(lo_hi[:, i, :].T for i in range(3)),
        np.array([1.0, *(share[k] for k in kept[1:])]),
        level,
        replicates,
        samples.blocks,
        status,
    )
    quality = _quality(med, fit(sizes), resid)
    return Curve(samples.kind, fit, quality, sizes, med, samples.spread, intervals)
