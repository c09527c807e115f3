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

import dataclasses

import numpy as np

from commsim.bench.calibrate._samples import Samples
from commsim.errors import CommsimError
from commsim.profiles import Curve, FitQuality, Piece, PiecewiseLinear

__all__ = ["Splits", "fit_at", "fit_curve", "fit_pieces", "splits_of"]

_HUBER = 1.345  # Huber's tuning constant: 95% efficiency under Gaussian noise
_NOISE_FLOOR = 0.005  # relative: below this a curve's bend is not told apart from noise


def _lines(n: np.ndarray, t: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Weighted least squares :math:`\\alpha + \\beta n \\approx t` with α, β ≥ 0, one line per
    row of the weights ``w`` (``[segments, sizes]``; a zero weight leaves a size out)."""
    sw, swn, swt = w.sum(1), (w * n).sum(1), (w * t).sum(1)
    swnn, swnt = (w * n * n).sum(1), (w * n * t).sum(1)
    det = sw * swnn - swn * swn
    with np.errstate(divide="ignore", invalid="ignore"):
        a = (swnn * swt - swn * swnt) / det
        b = (sw * swnt - swn * swt) / det
        ok = (det > 1e-300 * np.maximum(sw * swnn, 1e-300)) & (a >= 0) & (b >= 0)
        # a constraint binds: the better of the two one-parameter fits
        b0 = np.where(swnn > 0, np.maximum(swnt / swnn, 0.0), 0.0)  # through the origin
    a0 = np.maximum(swt / sw, 0.0)  # flat
    r_b = (w * (b0[:, None] * n - t) ** 2).sum(1)
    r_a = (w * (a0[:, None] - t) ** 2).sum(1)
    through = r_b <= r_a
    return (
        np.where(ok, a, np.where(through, 0.0, a0)),
        np.where(ok, b, np.where(through, b0, 0.0)),
    )


def _masked_median(x: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The median of each row of ``x`` over the entries ``mask`` holds (at least one per row)."""
    srt = np.sort(np.where(mask, x, np.inf), axis=1)
    cnt = mask.sum(1)
    rows = np.arange(len(x))
    return 0.5 * (srt[rows, (cnt - 1) // 2] + srt[rows, cnt // 2])


def _robust_lines(n: np.ndarray, t: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, ...]:
    """Huber-IRLS relative fits, one per row of ``mask`` (``[segments, sizes]``, the sizes of
    each run): ``(alpha, beta, relative residuals [segments, sizes])``. Every run iterates
    until its own fit stops moving (or its residuals' spread is 0), all runs at once."""
    base = np.where(mask, 1.0 / t**2, 0.0)
    a, b = _lines(n, t, base)
    active = np.ones(len(a), dtype=bool)
    for _ in range(20):
        r = (a[:, None] + b[:, None] * n - t) / t
        dev = np.abs(r - _masked_median(r, mask)[:, None])
        scale = 1.4826 * _masked_median(dev, mask)
        go = active & (scale > 0)
        if not go.any():
            break
        with np.errstate(divide="ignore", invalid="ignore"):
            u = np.abs(r) / (_HUBER * scale[:, None])
        hw = np.where(u <= 1, 1.0, 1.0 / np.maximum(np.nan_to_num(u, nan=1.0), 1e-300))
        a2, b2 = _lines(n, t, base * hw)
        still = (np.abs(a2 - a) > 1e-12 * np.maximum(a, 1e-30)) | (
            np.abs(b2 - b) > 1e-12 * np.maximum(b, 1e-30)
        )
        a, b = np.where(go, a2, a), np.where(go, b2, b)
        active = go & still
    return a, b, (a[:, None] + b[:, None] * n - t) / t


def _huber_losses(r: np.ndarray, mask: np.ndarray, sigma: float) -> np.ndarray:
    """:math:`\\sum \\rho(r/\\sigma)` with Huber's ρ (quadratic, then linear past 1.345), per row
    of ``r`` over the sizes ``mask`` holds."""
    u = np.abs(r) / sigma
    c = _HUBER
    return np.where(mask, np.where(u <= c, 0.5 * u * u, c * u - 0.5 * c * c), 0.0).sum(1)


def _segments(n: np.ndarray, t: np.ndarray, least: int, sigma: float):
    """Every run ``i..j`` of at least ``least`` sizes, fitted: ``(cost [m, m], fits)``, the
    Huber loss of each (``inf`` where too short) and its ``(alpha, beta)`` by ``(i, j)``."""
    m = len(n)
    i, j = np.triu_indices(m)
    keep = j - i + 1 >= min(least, m)
    i, j = i[keep], j[keep]
    k = np.arange(m)
    mask = (k >= i[:, None]) & (k <= j[:, None])
    a, b, r = _robust_lines(n, t, mask)
    cost = np.full((m, m), np.inf)
    cost[i, j] = _huber_losses(r, mask, sigma)
    fits = {(int(x), int(y)): (float(p), float(q)) for x, y, p, q in zip(i, j, a, b, strict=True)}
    return cost, fits


def fit_at(
    sizes: np.ndarray, times: np.ndarray, starts: list[int]
) -> tuple[PiecewiseLinear, np.ndarray]:
    """Fit ``times`` with the pieces starting at the indices ``starts`` (the first is 0): each
    piece the robust relative line of its run; ``(the fit, relative residuals per size)``.

    Examples:
        >>> n = 2.0 ** np.arange(3, 20)
        >>> fit, _ = fit_at(n, 1e-6 + n / 5e9, [0, 8])
        >>> [p.start for p in fit.pieces], round(fit.pieces[1].alpha * 1e6, 6)
        ([0.0, 2048.0], 1.0)
    """
    n = np.asarray(sizes, dtype=np.float64)
    t = np.asarray(times, dtype=np.float64)
    ends = [*(s - 1 for s in starts[1:]), len(n) - 1]
    k = np.arange(len(n))
    mask = np.array([(k >= s) & (k <= e) for s, e in zip(starts, ends, strict=True)])
    a, b, _ = _robust_lines(n, t, mask)
    fits = {(s, e): (float(x), float(y)) for s, e, x, y in zip(starts, ends, a, b, strict=True)}
    return _assemble(n, t, starts, fits)


def _assemble(
    n: np.ndarray,
    t: np.ndarray,
    starts: list[int],
    fits: dict[tuple[int, int], tuple[float, float]],
) -> tuple[PiecewiseLinear, np.ndarray]:
    """The pieces starting at indices ``starts`` with their ``fits``, and the residuals."""
    m = len(n)
    ends = [*(s - 1 for s in starts[1:]), m - 1]
    pieces, resid = [], np.empty(m)
    for s, e in zip(starts, ends, strict=True):
        a, b = fits[s, e]
        pieces.append(Piece(0.0 if s == 0 else float(n[s]), a, b))
        resid[s : e + 1] = (a + b * n[s : e + 1] - t[s : e + 1]) / t[s : e + 1]
    return PiecewiseLinear(tuple(pieces)), resid


def _best_splits(
    n: np.ndarray, t: np.ndarray, *, sigma: float, max_pieces: int, min_points: int
) -> tuple[list[tuple[float, list[int]]], dict[tuple[int, int], tuple[float, float]]]:
    """For every piece count k = 1 .. (at most ``max_pieces``), the split of the sizes into k
    runs of at least ``min_points`` with the least total Huber loss (Bellman's segmented least
    squares, dynamic programming): ``([(loss, starts) per k], fits of every run)``."""
    m = len(n)
    least = min_points if m >= 2 * min_points else m + 1  # fewer sizes: one piece only
    k_max = max(1, min(max_pieces, m // max(least, 1)))
    cost, fits = _segments(n, t, least, sigma)
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
    out = []
    for k in range(k_max):
        if not np.isfinite(best[k, m - 1]):
            break
        starts, j = [], m - 1
        for kk in range(k, 0, -1):
            i = int(back[kk, j])
            starts.append(i)
            j = i - 1
        out.append((float(best[k, m - 1]), [0, *reversed(starts)]))
    return out, fits


def _checked(sizes: np.ndarray, times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = np.asarray(sizes, dtype=np.float64)
    t = np.asarray(times, dtype=np.float64)
    if len(n) < 2:
        raise CommsimError(f"a fit of alpha and beta needs at least 2 sizes, got {len(n)}")
    if (np.diff(n) <= 0).any():
        raise CommsimError("the sizes of a fit must increase")
    if not np.isfinite(t).all() or (t <= 0).any():
        raise CommsimError("every measured time must be positive and finite")
    return n, t


def fit_pieces(
    sizes: np.ndarray,
    times: np.ndarray,
    *,
    noise: float = _NOISE_FLOOR,
    max_pieces: int = 4,
    min_points: int = 3,
) -> tuple[PiecewiseLinear, np.ndarray]:
    """Fit ``times`` (one per size) piecewise, the number of pieces by the BIC; ``(the fit,
    relative residuals per size)``.

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
    n, t = _checked(sizes, times)
    sigma = max(float(noise), _NOISE_FLOOR)
    splits, fits = _best_splits(n, t, sigma=sigma, max_pieces=max_pieces, min_points=min_points)
    bic = [2 * loss + 3 * len(starts) * np.log(len(n)) for loss, starts in splits]
    return _assemble(n, t, splits[int(np.argmin(bic))][1], fits)


@dataclasses.dataclass(frozen=True, eq=False)
class Splits:
    """One curve's best fit with each number of pieces up to a maximum (:func:`splits_of`):
    the fit for a tolerance or a piece count is read off, not searched or assembled again."""

    fits: list[tuple[PiecewiseLinear, np.ndarray]]  # (fit, relative residuals): 1, 2, ... pieces

    def within(self, tolerance: float | np.ndarray) -> tuple[PiecewiseLinear, np.ndarray]:
        r"""The fewest pieces that put every size within ``tolerance`` (relative; one for all
        sizes or one per size) of its time, or the most pieces where none does (the *min-#*
        rule of polygonal approximation, Imai and Iri 1986, over the segmented least-squares
        splits); ``(the fit, relative residuals per size)``. Unlike the BIC, the rule does not
        read the noise: a noisier run does not get fewer pieces, so two runs whose medians
        agree to better than the tolerance choose the same structure."""
        return next((f for f in self.fits if (np.abs(f[1]) <= tolerance).all()), self.fits[-1])

    def exactly(self, pieces: int) -> PiecewiseLinear | None:
        """The best fit with exactly ``pieces`` pieces, or ``None`` where the sizes do not
        split into that many runs."""
        return self.fits[pieces - 1][0] if len(self.fits) >= pieces else None


def splits_of(
    sizes: np.ndarray, times: np.ndarray, *, max_pieces: int = 4, min_points: int = 3
) -> Splits:
    """:class:`Splits` of ``times`` (one per size) into 1 .. ``max_pieces`` pieces of at least
    ``min_points`` sizes.

    Examples:
        >>> n = 2.0 ** np.arange(3, 27)
        >>> t = np.where(n < 65536, 1e-6 + n / 4e9, 20e-6 + n / 8e9)  # a switch at 64 KiB
        >>> sp = splits_of(n, t)
        >>> [p.start for p in sp.within(0.05)[0].pieces], len(sp.exactly(3).pieces)
        ([0.0, 65536.0], 3)
        >>> len(splits_of(n, t * (1 + 0.02 * np.cos(n))).within(0.05)[0].pieces)
        2
        >>> splits_of(n[:5], t[:5]).exactly(2) is None
        True
    """
    n, t = _checked(sizes, times)
    best, fits = _best_splits(
        n, t, sigma=_NOISE_FLOOR, max_pieces=max_pieces, min_points=min_points
    )
    return Splits([_assemble(n, t, starts, fits) for _, starts in best])


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
