r"""Fits two runs find again: pieces chosen by a tolerance, breakpoints checked by resampling.

One piecewise fit (:func:`~commsim.bench.calibrate.fit_pieces`) of one run's medians chooses its
pieces by the BIC, whose scale is the run's own noise: a quieter run gets more pieces, a noisier
one fewer, and where a curve bends smoothly (cache levels) the breakpoints land wherever the
noise puts them, so two ``commsim calibrate`` runs on one machine disagreed on the pieces
(issue #19) although their medians agreed to a few percent. :func:`fit_stable` works on
measurements taken in :math:`R` **blocks** (MPI: each block one pass over every kind and size,
so a disturbance that lasts seconds lands in some blocks of every kind; JAX and CUDA: runs of
consecutive repeats):

1. **Centre, then structure by tolerance.** Each size's centre is the mean of its blocks'
   medians with the :data:`TRIM` share at each end left out (a median of all repeats jumps
   between two modes as their share moves; a trimmed mean moves with it). The fewest pieces
   (at most ``max_pieces``) whose fit puts every size's centre within :data:`TOLERANCE` of
   the curve, or within :data:`NOISE_Z` standard errors of it where the centre is that
   uncertain
   (:meth:`~commsim.bench.calibrate.Splits.within`; the min-# rule of polygonal approximation,
   Imai and Iri 1986). The rule does not depend on the run's noise, only on its medians.
2. **Block bootstrap.** :math:`B` resamples draw :math:`R` blocks with replacement (Künsch
   1989, blocks of whole passes), take each size's centre over the drawn blocks, and are
   fitted again: once by the same rule (does it find the breakpoints again?) and once with
   the fit's number of pieces for the intervals, each resample placing its own breakpoints.
   The intervals are those of the whole procedure's output (the bootstrap principle), so
   where a breakpoint moves between resamples, the pieces beside it take in what the move
   does to their α and β, as a second run's fit would. Holding the breakpoints where the
   fit put them narrowed the intervals below what six back-to-back runs differed by (45 of
   75 pairs of curves agreed, against 75 of 75).
3. **Support.** A breakpoint's support is the share of resamples whose own fit puts a
   breakpoint within one size of it (Meinshausen and Bühlmann 2010 select what a share of
   subsamples selects). One found in fewer than :data:`SUPPORT` of them is reported
   (``"unstable breakpoints: ..."``) but kept: merging it away left fits 30% off the
   measurements, while its start interval already says how far it moves.
4. **Intervals.** Every parameter (each piece's start, :math:`\alpha`, :math:`\beta`) gets the
   percentile interval of its resampled values (Efron and Tibshirani 1993, ch. 13), expanded
   for the few blocks it resamples (:func:`expanded_level`, Hesterberg 2015): at ``level``
   0.95 and 10 blocks, the 0.86 % and 99.14 % percentiles; at 5 blocks, nearly the range.

The resampling uses a fixed seed, so the same samples always give the same intervals.

References:
    H. Imai and M. Iri, "Polygonal approximations of a curve: formulations and algorithms", in
    *Computational Morphology*, North-Holland, 1988 (the min-# problem; first in 1986).
    H. R. Künsch, "The jackknife and the bootstrap for general stationary observations",
    Annals of Statistics 17(3), 1989.
    N. Meinshausen and P. Bühlmann, "Stability selection", JRSS B 72(4), 2010.
    B. Efron and R. J. Tibshirani, *An Introduction to the Bootstrap*, Chapman & Hall, 1993.
    T. C. Hesterberg, "What teachers should know about the bootstrap", The American
    Statistician 69(4), 2015 (the expanded percentile interval).
    M. Abramowitz and I. A. Stegun, *Handbook of Mathematical Functions*, 1964, 26.7.5.

See Also:
    :class:`commsim.profiles.FitIntervals`: what a stable fit carries into the profile.
"""

from __future__ import annotations

from statistics import NormalDist

import numpy as np

from commsim import units
from commsim.bench.calibrate._fit import _quality, fit_at, fit_curve, splits_of
from commsim.bench.calibrate._samples import Samples
from commsim.profiles import Curve, FitIntervals

__all__ = ["REPLICATES", "SUPPORT", "TOLERANCE", "expanded_level", "fit_stable"]

#: resamples per curve (Efron and Tibshirani 1993 ask for 1000 for fine percentiles): the
#: expanded intervals read the 0.86 % and 99.14 % points at 10 blocks, about the 1st and
#: 100th of 100 resamples, so an interval is close to the resamples' range; 100 keep a
#: calibration's fits to about 4 s on 2 cores
REPLICATES = 100
#: the share of resamples that must find a breakpoint again for the fit to be called stable
#: (stability selection's threshold; Meinshausen and Bühlmann recommend 0.6 to 0.9)
SUPPORT = 0.75
#: relative: a curve gets a new piece only where its fewer-piece fit misses a measured size by
#: more than this. Two calibrations of this project's 2-vCPU machine, minutes apart, give
#: medians that differ by 3-7% at most sizes (docs/validation.md), so a bend smaller than
#: that is not a property of the machine one run could find again
TOLERANCE = 0.05
#: standard errors of a size's centre (the spread of its resampled centres) that a fit may
#: miss it by where that is more than :data:`TOLERANCE`: pure noise passes 3 of them at one
#: size in 370, so a noisy run does not get pieces that fit its noise
NOISE_Z = 3.0
#: the share of the blocks' medians left out at each end of a size's centre: the 20% trimmed
#: mean, robust to a disturbed block and nearly as efficient as the mean under normal noise
#: (Wilcox, *Introduction to Robust Estimation and Hypothesis Testing*, 2012, ch. 3)
TRIM = 0.2


def _t_quantile(p: float, dof: int) -> float:
    """Student's t quantile by the Cornish-Fisher expansion in 1/dof (Abramowitz and Stegun
    26.7.5; within 0.001 of the tables from 4 degrees of freedom, 0.004 low at 3 and lower
    below, which only widens :func:`expanded_level` less than it should where it is already
    the resamples' whole range)."""
    z = NormalDist().inv_cdf(p)
    v = float(dof)
    return (
        z
        + (z**3 + z) / (4 * v)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * v**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * v**3)
        + (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / (92160 * v**4)
    )


def expanded_level(level: float, blocks: int) -> float:
    r"""The coverage a percentile interval of ``blocks`` resampled blocks is read at so that it
    covers ``level``: the *expanded percentile interval* (Hesterberg 2015). A bootstrap of
    :math:`n` blocks spreads its replicates by the plug-in variance, :math:`(n-1)/n` of the
    unbiased one, and a normal quantile where a mean of :math:`n` needs Student's, so with 5
    blocks a 95 % percentile interval covers about 85 %. It is read at :math:`2\Phi(z') - 1`
    with :math:`z' = \sqrt{n/(n-1)}\, t_{(1+\text{level})/2,\, n-1}`.

    Examples:
        >>> round(expanded_level(0.95, 10), 4), round(expanded_level(0.95, 5), 4)
        (0.9829, 0.9981)
    """
    z = np.sqrt(blocks / (blocks - 1)) * _t_quantile((1 + level) / 2, blocks - 1)
    return 2 * NormalDist().cdf(z) - 1


def _starts(sizes: np.ndarray, fit) -> list[int]:
    """The indices of the sizes where ``fit``'s pieces start."""
    return [int(np.searchsorted(sizes, p.start)) if p.start else 0 for p in fit.pieces]


def _center(block_medians: np.ndarray) -> np.ndarray:
    """Each size's trimmed mean over the blocks' medians (axis -2), the :data:`TRIM` share of
    the blocks at each end left out, and at least one at each end from 3 blocks (3 blocks:
    their median; 2: their mean).

    Examples:
        >>> _center(np.array([[1.0], [2.0], [3.0], [4.0], [100.0]])).tolist()
        [3.0]
    """
    r = block_medians.shape[-2]
    cut = min(max(1, int(np.ceil(TRIM * r - 1e-9))), (r - 1) // 2)  # 3-4 blocks: still one
    srt = np.sort(block_medians, axis=-2)
    return srt[..., cut : r - cut, :].mean(axis=-2)


def _resamples(samples: Samples, replicates: int, seed: int) -> np.ndarray:
    """``[replicates, sizes]``: the centre of ``blocks`` blocks drawn with replacement."""
    draws = np.random.default_rng(seed).integers(0, samples.blocks, (replicates, samples.blocks))
    return _center(samples.block_medians()[draws])


def _nearest(found: list[int], k: int) -> int | None:
    """The breakpoint of ``found`` within one size of index ``k`` (the closest), or ``None``."""
    near = [f for f in found if f and abs(f - k) <= 1]
    return min(near, key=lambda f: abs(f - k)) if near else None


def fit_stable(
    samples: Samples,
    *,
    max_pieces: int = 4,
    tolerance: float = TOLERANCE,
    replicates: int = REPLICATES,
    support: float = SUPPORT,
    level: float = 0.95,
    seed: int = 0,
) -> Curve:
    """The fewest-pieces fit of ``samples`` within ``tolerance``, how often resamples find
    its breakpoints again, and an interval for every parameter (the module docstring).
    Samples of one block fall back to :func:`~commsim.bench.calibrate.fit_curve` (no
    intervals).

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
    sizes, med = samples.sizes, _center(samples.block_medians())
    whole = splits_of(sizes, med, max_pieces=max_pieces)  # refuses bad times in one line
    boot = _resamples(samples, replicates, seed)
    # a size whose centre is itself uncertain by more than a third of the tolerance: within
    # NOISE_Z of its standard error instead, so noise alone does not make a piece
    tol = np.maximum(tolerance, NOISE_Z * boot.std(axis=0) / med)
    fit, resid = whole.within(tol)
    starts = _starts(sizes, fit)
    rows, found = [], []
    for b in boot:
        sp = splits_of(sizes, b, max_pieces=max_pieces)
        found.append(_starts(sizes, sp.within(tol)[0]))
        rf = sp.exactly(len(starts)) or fit_at(sizes, b, starts)[0]  # its own breakpoints
        rows.append(np.stack([rf.starts, rf.alphas, rf.betas]))
    share = [1.0, *(np.mean([_nearest(f, k) is not None for f in found]) for k in starts[1:])]
    weak = [(k, w) for k, w in zip(starts[1:], share[1:], strict=True) if w < support]
    status = "stable"
    if weak:
        where = ", ".join(
            f"{units.format_size(sizes[k], exact=False)} ({100 * w:.0f}%)" for k, w in weak
        )
        status = (
            f"unstable breakpoints: {where} of {replicates} resamples found them, fewer than "
            f"{100 * support:.0f}% (their start intervals say how far they move)"
        )
    wide = expanded_level(level, samples.blocks)
    q = 100 * np.array([(1 - wide) / 2, (1 + wide) / 2])
    lo_hi = np.percentile(np.array(rows), q, axis=0)  # [2, 3, pieces]
    intervals = FitIntervals(
        *(lo_hi[:, i, :].T for i in range(3)),
        np.array(share),
        level,
        replicates,
        samples.blocks,
        status,
    )
    quality = _quality(med, fit(sizes), resid)
    return Curve(samples.kind, fit, quality, sizes, med, samples.spread, intervals)
