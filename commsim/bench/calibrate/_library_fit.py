r"""The collective library's parameters fitted to an nccl-tests log: NCCL's cost model, per protocol.

NCCL's own cost model (``src/graph/tuning.cc``) prices a ring collective of :math:`n` bytes with
protocol :math:`p` (LL, LL128, Simple) as a per-call latency plus a bandwidth term, and its tuner
runs the protocol of least predicted time:

.. math::

    t(n) = \min_p \Big( c_p + \frac{F\,n}{\eta_p B} \Big), \qquad
    c_p = t_\text{launch}(p) + S\,h_p,

with :math:`F` the collective's bus-bandwidth factor (nccl-tests' ``busbw = algbw · F``), :math:`B`
the bus bandwidth of the Simple protocol (:math:`\eta_\text{Simple} = 1`), :math:`\eta_p` the
other protocols' share of it, :math:`S` the schedule's steps (NCCL's ring: :math:`2(P-1)` for
allreduce, :math:`P-1` for allgather and reduce-scatter) and :math:`h_p` a step's latency. The minimum of
lines is a lower envelope: along the sizes, the protocols take over one after the other, each
with more latency and more bandwidth. Within Simple, NCCL also runs fewer channels while a call
is small (``src/enqueue.cc``, ``topoGetAlgoInfo``: one channel less while
:math:`n < n_c \cdot n_t \cdot \text{threadThreshold}`), so Simple may show two lines: fewer
channels, then all of them (its "efficiency" is then the share of the full rate those channels
reach).

:func:`fit_library` fits it to the rows up to ``fit_up_to`` bytes:

* every split of the rows, in size order, into at most four runs of at least two rows (LL, then
  LL128, then Simple on fewer channels, then Simple; fewer regimes when the rows do not show
  them) is fitted, each run by the
  robust relative line of :func:`~commsim.bench.calibrate.fit_at`; a split counts only when it is
  an envelope (each later line has a larger :math:`c` and a smaller slope), and the split of
  least BIC wins (the noise scale from the log's out-of-place against in-place times);
* **identifiable** from one log (one rank count): :math:`B`, from the last run's slope (it needs
  two rows of its own); each :math:`c_p`; :math:`\eta_p` for a protocol whose rows are not
  latency-bound (its bandwidth term is at least :data:`BANDWIDTH_SHARE` of its largest row's time);
  the per-call launch, only given the step latencies: it is reported as :math:`c_\text{first} -
  S\,h^\text{NCCL}_p`, with NCCL's ``hwLatencies`` for :math:`h` (one rank count cannot tell a
  launch from :math:`S` step latencies);
* **not identifiable**, and refused in words: a protocol with fewer than two rows; the step
  latencies apart from the launch (they need logs at two rank counts); the channel cap, since
  :math:`B` is the number of channels times one channel's rate (it needs runs with different
  ``NCCL_MAX_NCHANNELS``).

The held-out rows (64 MiB and up) are predicted by the envelope, so the Simple line extrapolates:
its slope comes from the largest rows of the fit, where the bandwidth term dominates, instead of
one line through every size, which the latency of the small sizes bends.

References:
    NVIDIA NCCL, ``src/graph/tuning.cc`` (commit 5067397): ``baseLatencies``, ``hwLatencies``,
    the per-protocol bandwidth factors; the tuner's choice of the protocol of least time;
    ``src/enqueue.cc``: fewer channels (then fewer threads) for small calls.
    G. Schwarz, "Estimating the dimension of a model", Annals of Statistics 6(2), 1978 (BIC).

See Also:
    :func:`commsim.bench.calibrate.fit_cluster`: the topology model's link parameters fitted to
    the same log.
    :data:`commsim.models.PROTOCOLS`: NCCL's protocols as the topology model carries them.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import numpy as np

from commsim._ir import Schedule
from commsim.bench.calibrate._fit import _huber_losses, _robust_lines
from commsim.errors import CommsimError
from commsim.interop import NcclTestsLog
from commsim.models import PROTOCOLS

__all__ = ["BANDWIDTH_SHARE", "LibraryFit", "ProtocolLine", "fit_library", "library_times"]

#: a protocol's efficiency is identified only where its bandwidth term reaches this share of
#: its largest row's time (below it the rows are latency-bound and the slope is noise)
BANDWIDTH_SHARE = 0.1
_NAMES = {
    1: ("Simple",),
    2: ("LL", "Simple"),
    3: ("LL", "LL128", "Simple"),
    4: ("LL", "LL128", "Simple (fewer channels)", "Simple"),
}
_NOISE_FLOOR = 0.005
_HELD_OUT = 64 * 2**20


@dataclasses.dataclass(frozen=True)
class ProtocolLine:
    """One protocol's line: ``constant`` seconds (:math:`c_p`), ``slope`` seconds per byte,
    ``efficiency`` (:math:`\\eta_p`; ``None`` where not identifiable), the size its rows start
    at and how many fit rows it has."""

    name: str
    constant: float
    slope: float
    efficiency: float | None
    start: float
    rows: int


@dataclasses.dataclass(frozen=True, eq=False)
class LibraryFit:
    """The result of :func:`fit_library` (the module docstring).

    Attributes:
        bus_bandwidth: :math:`B`, bytes/s (nccl-tests' busbw of the Simple protocol).
        launch: the per-call launch in seconds, given NCCL's step latencies.
        protocols: the fitted lines, in size order.
        predicted: seconds, every row of the log (the envelope).
        notes: what the log does not identify, and why.
    """

    collective: str
    nranks: int
    steps: int
    factor: float
    bus_bandwidth: float
    launch: float
    protocols: tuple[ProtocolLine, ...]
    sizes: np.ndarray
    measured: np.ndarray
    predicted: np.ndarray
    fit_up_to: int
    noise: float
    notes: tuple[str, ...]

    @property
    def error(self) -> np.ndarray:
        """Relative error per row, predicted / measured - 1."""
        return self.predicted / self.measured - 1

    def median_error(self, held_out: bool = True) -> float:
        """The median |error| of the held-out rows (64 MiB and up), or of the fit rows."""
        rows = self.sizes >= _HELD_OUT if held_out else self.sizes <= self.fit_up_to
        return float(np.median(np.abs(self.error[rows]))) if rows.any() else float("nan")

    def to_dict(self) -> dict[str, Any]:
        return {
            "collective": self.collective,
            "nranks": self.nranks,
            "steps": self.steps,
            "bus_bandwidth_Bps": self.bus_bandwidth,
            "launch_s": self.launch,
            "protocols": [dataclasses.asdict(p) for p in self.protocols],
            "noise": self.noise,
            "median_abs_error_fit_rows": self.median_error(held_out=False),
            "median_abs_error_held_out": self.median_error(),
            "predicted_s": self.predicted.tolist(),
            "notes": list(self.notes),
        }


def library_times(protocols: tuple[ProtocolLine, ...], sizes: np.ndarray) -> np.ndarray:
    """The envelope :math:`\\min_p (c_p + n\\,\\text{slope}_p)` at ``sizes`` (seconds).

    Examples:
        >>> lines = (
        ...     ProtocolLine("LL", 2e-5, 1e-11, None, 0.0, 3),
        ...     ProtocolLine("Simple", 6e-5, 5e-12, 1.0, 1e6, 3),
        ... )
        >>> (library_times(lines, np.array([0.0, 1e8])) * 1e6).round(1).tolist()
        [20.0, 560.0]
    """
    n = np.asarray(sizes, dtype=np.float64)
    return np.min([p.constant + n * p.slope for p in protocols], axis=0)


def _noise(log: NcclTestsLog, rows: np.ndarray) -> float:
    """Relative noise of one time from the out-of-place and in-place runs of each row: their
    difference has :math:`\\sqrt 2\\sigma`, its median absolute value :math:`0.6745\\sqrt 2\\sigma`."""
    pairs = [
        (r.time_oop_s, r.time_ip_s)
        for r, keep in zip(log.rows, rows, strict=True)
        if keep and r.time_oop_s and r.time_ip_s
    ]
    if not pairs:
        return 0.01  # no in-place column: 1%
    d = np.array([a / b - 1 for a, b in pairs])
    return max(float(np.median(np.abs(d))) / (0.6745 * np.sqrt(2)), _NOISE_FLOOR)


def _envelope(n: np.ndarray, t: np.ndarray, sigma: float) -> list[tuple[int, int, float, float]]:
    """The best split of the rows into envelope runs: ``[(first, last, constant, slope)]``."""
    m = len(n)
    i, j = np.triu_indices(m)
    keep = j - i >= 1
    i, j = i[keep], j[keep]
    k = np.arange(m)
    mask = (k >= i[:, None]) & (k <= j[:, None])
    a, b, r = _robust_lines(n, t, mask)
    loss = _huber_losses(r, mask, sigma)
    seg = {
        (int(x), int(y)): (float(p), float(q), float(c))
        for x, y, p, q, c in zip(i, j, a, b, loss, strict=True)
    }
    best, best_score = None, np.inf
    for pieces in range(1, len(_NAMES) + 1):
        for cuts in itertools.combinations(range(2, m - 1), pieces - 1):
            bounds = [0, *cuts, m]
            runs = [(s, e - 1) for s, e in itertools.pairwise(bounds)]
            if any(e - s < 1 for s, e in runs):
                continue
            lines = [seg[s, e] for s, e in runs]
            if any(
                lo[0] > hi[0] or lo[1] < hi[1] for lo, hi in itertools.pairwise(lines)
            ):  # not an envelope: a later protocol must cost more latency and less per byte
                continue
            score = 2 * sum(x[2] for x in lines) + 3 * pieces * np.log(m)
            if score < best_score:
                best_score = score
                best = [(s, e, x[0], x[1]) for (s, e), x in zip(runs, lines, strict=True)]
    if best is None:
        raise CommsimError("no envelope of protocol lines fits these rows")
    return best


def fit_library(
    log: NcclTestsLog, schedule: Schedule, *, fit_up_to: int = 16 * 2**20
) -> LibraryFit:
    """Fit NCCL's cost model (the module docstring) to ``log``'s rows up to ``fit_up_to`` bytes.

    Args:
        log: the parsed nccl-tests log.
        schedule: the schedule NCCL runs for it (its steps are :math:`S`, its collective's
            bus-bandwidth factor :math:`F`): the ring for allreduce, allgather, reduce-scatter.
        fit_up_to: rows up to this many bytes are fitted; larger ones only predicted.
    """
    if schedule.nranks != log.nranks or schedule.spec.name != log.collective:
        raise CommsimError(
            f"the schedule is {schedule.spec.name} on {schedule.nranks} ranks but {log.source} "
            f"is {log.collective} on {log.nranks}"
        )
    steps = schedule.nsteps
    factor = float(schedule.spec.busbw_factor(schedule.workers))
    sizes, times = log.sizes, log.times
    rows = (sizes > 0) & (sizes <= fit_up_to)
    if rows.sum() < 2:
        raise CommsimError(
            f"{log.source}: {int(rows.sum())} rows up to {fit_up_to} bytes; the library fit "
            "needs at least 2"
        )
    order = np.argsort(sizes[rows], kind="stable")
    n, t = sizes[rows][order], times[rows][order]
    sigma = _noise(log, rows)
    runs = _envelope(n, t, sigma)
    names = _NAMES[len(runs)]
    slope_simple = runs[-1][3]
    notes: list[str] = []
    if slope_simple <= 0:
        raise CommsimError(f"{log.source}: the largest rows do not grow with the size")
    lines = []
    for name, (s, e, c, slope) in zip(names, runs, strict=True):
        bw_share = slope * n[e] / max(c + slope * n[e], 1e-300)
        eff = 1.0 if name == "Simple" else slope_simple / slope if slope > 0 else None
        if name != "Simple" and bw_share < BANDWIDTH_SHARE:
            eff = None
            notes.append(
                f"{name}: efficiency not identifiable: its rows are latency-bound (the size "
                f"term is {100 * bw_share:.0f}% of its largest row's time)"
            )
        lines.append(ProtocolLine(name, c, slope, eff, 0.0 if s == 0 else float(n[s]), e - s + 1))
    missing = [p for p in ("LL", "LL128") if p not in names]
    if missing:
        notes.append(
            f"{', '.join(missing)}: not identifiable: the fit rows show {len(runs)} regime"
            f"{'s' * (len(runs) > 1)} (a protocol needs 2 rows of its own)"
        )
    first = PROTOCOLS[names[0]]
    hop = first.hop_intra if (log.nodes or 1) == 1 else first.hop_inter
    launch = max(lines[0].constant - steps * hop, 0.0)
    if launch == 0.0:
        notes.append(
            f"launch: {names[0]}'s constant is below {steps} of NCCL's step latencies: this log's "
            "steps are faster than NCCL's table, and the launch is reported as 0"
        )
    notes.append(
        f"launch: {names[0]}'s constant less {steps} steps of NCCL's {names[0]} step latency "
        "(one rank count cannot separate a launch from its step latencies)"
    )
    notes.append(
        "channel cap: not identifiable: the bus bandwidth is channels x one channel's rate "
        "(it needs runs with different NCCL_MAX_NCHANNELS)"
    )
    return LibraryFit(
        log.collective, log.nranks, steps, factor, factor / slope_simple, launch, tuple(lines),
        sizes, times, library_times(tuple(lines), sizes), int(fit_up_to), sigma, tuple(notes),
    )  # fmt: skip
