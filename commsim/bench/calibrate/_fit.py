r"""Robust piecewise-linear fits of measured times: the statistics of calibration.

:func:`fit_curve` turns :class:`~commsim.bench.calibrate.Samples` (repeats per size) into a
:class:`commsim.profiles.Curve`:

1. **One number per size: the median of the repeats.** A repeat that the operating system
   interrupted (one 10× outlier among 20) cannot move a median; it moves a mean by half its size.
2. **Relative least squares per piece.** Sizes span 8 B to 64 MiB and times four orders of
   magnitude, so ordinary least squares would fit the large sizes and ignore α. Each piece
   minimizes :math:`\sum_i \rho\big((\alpha + \beta n_i - t_i) / t_i\big)` with Huber's
   :math:`\rho` (iteratively reweighted: a size whose median is still off by more than
   1.345 robust standard deviations counts linearly, not quadratically), with
   :math:`\alpha, \beta \ge 0`.
3. **Breakpoints from the data.** Every split of the sorted sizes into at most ``max_pieces``
   contiguous runs of at least ``min_points`` sizes is scored by dynamic programming (Bellman's
   segmented least squares, :math:`O(k n^2)`), and the number of pieces is chosen by the Bayesian
   information criterion with the measured noise as the scale:
   :math:`\chi^2/\sigma^2 + 3k \ln n` (α, β and a breakpoint per piece). :math:`\sigma` is the
   repeats' own relative spread (IQR / 1.349, their median over sizes), floored at 0.5%, so a
   piece is added only where the curve bends by more than the noise: a protocol switch
   (eager → rendezvous), a change of copy mode, a cache level.

A piece starts at the first measured size of its run; the first at 0 bytes. Fit quality
(:class:`commsim.profiles.FitQuality`): :math:`R^2` of the relative-weighted fit
(weights :math:`1/t_i^2`), and the median and largest relative residual.
"""

from __future__ import annotations

import numpy as np

from commsim.bench.calibrate._samples import Samples
from commsim.errors import CommsimError
from commsim.profiles import Curve, FitQuality, Piece, PiecewiseLinear

__all__ = ["fit_curve", "fit_pieces"]

_HUBER = 1.345  # Huber's tuning constant: 95% efficiency under Gaussian noise
_NOISE_FLOOR = 0.005  # relative: below this a curve's bend is not told apart from noise


def _line(n: np.ndarray, t: np.ndarray, w: np.ndarray) -> tuple[float, float]:
    """Weighted least squares :math:`\\alpha + \\beta n \\approx t` with α, β ≥ 0."""
    sw, swn, swt = w.sum(), (w * n).sum(), (w * t).sum()
    swnn, swnt = (w * n * n).sum(), (w * n * t).sum()
    det = sw * swnn - swn * swn
    if det > 1e-300 * max(sw * swnn, 1e-300):
        a = (swnn * swt - swn * swnt) / det
        b = (sw * swnt - swn * swt) / det
        if a >= 0 and b >= 0:
            return float(a), float(b)
    # a constraint binds: the better of the two one-parameter fits
    b0 = max(swnt / swnn, 0.0) if swnn > 0 else 0.0  # through the origin
    a0 = max(swt / sw, 0.0)  # flat
    r_b = (w * (b0 * n - t) ** 2).sum()
    r_a = (w * (a0 - t) ** 2).sum()
    return (0.0, float(b0)) if r_b <= r_a else (float(a0), 0.0)


def _robust_line(n: np.ndarray, t: np.ndarray) -> tuple[float, float, np.ndarray]:
    """Huber-IRLS relative fit on one run of sizes: ``(alpha, beta, relative residuals)``."""
    base = 1.0 / t**2
    w = base.copy()
    a, b = _line(n, t, w)
    for _ in range(20):
        r = (a + b * n - t) / t
        scale = 1.4826 * np.median(np.abs(r - np.median(r)))
        if scale <= 0:
            break
        u = np.abs(r) / (_HUBER * scale)
        hw = np.where(u <= 1, 1.0, 1.0 / np.maximum(u, 1e-300))
        a2, b2 = _line(n, t, base * hw)
        if abs(a2 - a) <= 1e-12 * max(a, 1e-30) and abs(b2 - b) <= 1e-12 * max(b, 1e-30):
            a, b = a2, b2
            break
        a, b = a2, b2
    return a, b, (a + b * n - t) / t


def _huber_loss(r: np.ndarray, sigma: float) -> float:
    """:math:`\\sum \\rho(r/\\sigma)` with Huber's ρ (quadratic, then linear past 1.345)."""
    u = np.abs(r) / sigma
    c = _HUBER
    return float(np.where(u <= c, 0.5 * u * u, c * u - 0.5 * c * c).sum())


def fit_pieces(
    sizes: np.ndarray,
    times: np.ndarray,
    *,
    noise: float = _NOISE_FLOOR,
    max_pieces: int = 4,
    min_points: int = 3,
) -> tuple[PiecewiseLinear, np.ndarray]:
    """Fit ``times`` (one per size) piecewise; ``(the fit, relative residuals per size)``.

    Args:
        sizes: bytes, increasing (at least 2).
        times: seconds, one per size (medians), all positive.
        noise: the relative noise of one median (the BIC's scale), floored at 0.5%.
        max_pieces: at most this many pieces.
        min_points: sizes per piece at least (2 when there are fewer than 6 sizes in all).

    Examples:
        >>> n = 2.0 ** np.arange(3, 27)  # 8 B .. 64 MiB
        >>> t = np.where(n < 65536, 1e-6 + n / 4e9, 20e-6 + n / 8e9)  # a protocol switch at 64 KiB
        >>> fit, r = fit_pieces(n, t)
        >>> [p.start for p in fit.pieces], float(abs(r).max()) < 1e-9
        ([0.0, 65536.0], True)
    """
    n = np.asarray(sizes, dtype=np.float64)
    t = np.asarray(times, dtype=np.float64)
    if len(n) < 2:
        raise CommsimError(f"a fit of alpha and beta needs at least 2 sizes, got {len(n)}")
    if (np.diff(n) <= 0).any():
        raise CommsimError("the sizes of a fit must increase")
    if not np.isfinite(t).all() or (t <= 0).any():
        raise CommsimError("every measured time must be positive and finite")
    sigma = max(float(noise), _NOISE_FLOOR)
    m = len(n)
    least = min_points if m >= 2 * min_points else m + 1  # fewer sizes: one piece only
    k_max = max(1, min(max_pieces, m // max(least, 1)))
    # cost[i, j]: Huber loss of one piece over sizes i..j (inclusive)
    cost = np.full((m, m), np.inf)
    fits: dict[tuple[int, int], tuple[float, float]] = {}
    for i in range(m):
        for j in range(i + min(least, m) - 1, m):
            a, b, r = _robust_line(n[i : j + 1], t[i : j + 1])
            cost[i, j] = _huber_loss(r, sigma)
            fits[i, j] = a, b
    # best[k, j]: the best split of sizes 0..j into k+1 pieces; back[k, j]: its last piece's start
    best = np.full((k_max, m), np.inf)
    back = np.zeros((k_max, m), dtype=np.int64)
    best[0] = cost[0]
    for k in range(1, k_max):
        for j in range(m):
            cand = best[k - 1, :j] + cost[1 : j + 1, j]  # last piece i..j, i >= 1
            if len(cand) and np.isfinite(cand).any():
                i = int(np.argmin(cand))
                best[k, j], back[k, j] = cand[i], i + 1
    bic = [2 * best[k, m - 1] + 3 * (k + 1) * np.log(m) for k in range(k_max)]
    k = int(np.argmin(bic))
    starts, j = [], m - 1
    for kk in range(k, 0, -1):
        i = int(back[kk, j])
        starts.append(i)
        j = i - 1
    starts = [0, *reversed(starts)]
    ends = [*(s - 1 for s in starts[1:]), m - 1]
    pieces, resid = [], np.empty(m)
    for s, e in zip(starts, ends, strict=True):
        a, b = fits[s, e]
        pieces.append(Piece(0.0 if s == 0 else float(n[s]), a, b))
        resid[s : e + 1] = (a + b * n[s : e + 1] - t[s : e + 1]) / t[s : e + 1]
    return PiecewiseLinear(tuple(pieces)), resid


def _quality(t: np.ndarray, fitted: np.ndarray, resid: np.ndarray) -> FitQuality:
    w = 1.0 / t**2
    mean = (w * t).sum() / w.sum()
    ss_tot = float((w * (t - mean) ** 2).sum())
    ss_res = float((w * (t - fitted) ** 2).sum())
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0
    a = np.abs(resid)
    return FitQuality(r2, float(np.median(a)), float(a.max()), len(t))


def fit_curve(samples: Samples, *, max_pieces: int = 4) -> Curve:
    """The robust piecewise fit of ``samples`` (module docstring), with its quality and points.

    Examples:
        >>> n = 2.0 ** np.arange(3, 20)
        >>> times = np.outer(2e-6 + n / 1e9, np.ones(9))
        >>> times[5, 0] *= 10  # one interrupted repeat
        >>> c = fit_curve(Samples("pingpong", n, times, "mpi", 2))
        >>> len(c.fit.pieces), round(c.fit.pieces[0].alpha * 1e6, 6), c.quality.r2 > 0.999999
        (1, 2.0, True)
    """
    med = samples.median
    if len(med) < 2:
        raise CommsimError(
            f"{samples.kind}: a fit needs at least 2 sizes, got {len(med)} (give more sizes)"
        )
    noise = float(np.median(samples.spread)) / 1.349  # IQR of a normal is 1.349 sigma
    fit, resid = fit_pieces(samples.sizes, med, noise=noise, max_pieces=max_pieces)
    quality = _quality(med, fit(samples.sizes), resid)
    return Curve(samples.kind, fit, quality, samples.sizes, med, samples.spread)
