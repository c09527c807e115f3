r"""How sure a validation's median error is: an interval from the measurement's own repeats.

A validation's headline is the median, over message sizes, of :math:`|\hat t - t| / t` (the
predicted :math:`\hat t` against the measured median :math:`t`). Each :math:`t` is a median of
:math:`n` timed repeats, so it would move if the run were repeated; :func:`median_error_interval`
says by how much the headline would move with it, by a **parametric bootstrap** of each size's
median:

* the repeats' spread gives their scale, :math:`\sigma \approx \text{IQR} / 1.349` (the IQR of a
  normal distribution is :math:`1.349\sigma`);
* the median of :math:`n` repeats then has the standard error
  :math:`\sqrt{\pi/2}\,\sigma/\sqrt{n} \approx 1.2533\,\sigma/\sqrt{n}` (the sample median's
  asymptotic variance :math:`1/(4 n f(m)^2)` at a normal density);
* each of ``replicates`` draws perturbs every size's median by that error (normal, independent
  between sizes), recomputes the median |error| over the sizes, and the interval is the
  percentile interval of the draws (2.5 % and 97.5 % at ``level`` 0.95).

The measurement keeps its repeats as a median and quartiles, not one by one, which is why the
bootstrap draws from the median's distribution instead of resampling the repeats themselves. A
fixed seed makes the same measurement always give the same interval. What it cannot see is a
machine that changes between runs (another job starting): ``docs/validation.md`` says how far
two runs agreed.

References:
    A. Stuart and J. K. Ord, *Kendall's Advanced Theory of Statistics*, vol. 1, 6th ed., 1994,
    §10.10 (the variance of a sample quantile).
    B. Efron and R. J. Tibshirani, *An Introduction to the Bootstrap*, Chapman & Hall, 1993,
    ch. 6 (the parametric bootstrap) and ch. 13 (percentile intervals).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["median_error_interval"]

_IQR_SIGMA = 1.349  # IQR / sigma of a normal distribution
_MEDIAN_SE = math.sqrt(math.pi / 2)  # standard error of a normal sample's median, in sigma/sqrt(n)


def median_error_interval(
    predicted: np.ndarray,
    measured: np.ndarray,
    spread: np.ndarray,
    repeats: int,
    *,
    level: float = 0.95,
    replicates: int = 1000,
    seed: int = 0,
) -> tuple[float, float]:
    """The interval of the median |error| over sizes (the module docstring).

    Args:
        predicted: seconds per size.
        measured: the measured medians, seconds per size.
        spread: each median's repeats' IQR / median.
        repeats: timed repeats per median (fewer than 1 counts as 1).
        level: the interval's coverage.
        replicates: bootstrap draws.
        seed: the draws' seed.

    Examples:
        >>> lo, hi = median_error_interval(
        ...     np.array([1.2, 1.1, 0.9]), np.ones(3), np.full(3, 0.1), 10
        ... )
        >>> bool(lo < 0.1 < hi), bool(hi - lo < 0.1)
        (True, True)
        >>> median_error_interval(np.array([1.2]), np.ones(1), np.zeros(1), 10)
        (0.19999999999999996, 0.19999999999999996)
    """
    pred = np.asarray(predicted, dtype=np.float64)
    meas = np.asarray(measured, dtype=np.float64)
    se = _MEDIAN_SE * np.nan_to_num(np.asarray(spread, dtype=np.float64)) / _IQR_SIGMA
    se = se / math.sqrt(max(int(repeats), 1))
    z = np.random.default_rng(seed).standard_normal((replicates, len(meas)))
    drawn = meas * np.maximum(1 + se * z, 1e-9)  # a time stays positive
    err = np.median(np.abs(pred - drawn) / drawn, axis=1)
    q = 100 * np.array([(1 - level) / 2, (1 + level) / 2])
    lo, hi = np.percentile(err, q)
    return float(lo), float(hi)
