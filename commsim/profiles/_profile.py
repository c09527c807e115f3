"""A measured transport: fitted message-time curves, γ, LogGP's parameters, the executor's overhead.

What ``commsim calibrate`` writes and what the models read (``--profile``). One file describes
one transport as measured on one machine: how long a message of ``n`` bytes takes
(:class:`Curve` s, each a robust piecewise-linear fit of the measured medians, with the fit's
quality and the points themselves, so a plot or a re-fit never needs the machine again), how
fast a rank reduces received bytes (γ), LogGP's L, o, g, G, and the per-call overhead of each
executor that was measured (what a run costs beyond its messages: JAX dispatch, for one).

Curves (by kind, as :class:`commsim.bench.calibrate.Samples` names them):

* ``pingpong``: one message, nothing else moving (half a round trip): the transport's α and β.
* ``exchange``: two ranks sending to each other at once: what a schedule's step does (every rank
  sends and receives), including what sharing one memory system costs. The Hockney model reads
  this curve when it is there (:meth:`Profile.message_curve`).
* ``step``: an exchange and the reduction of what it received, back to back (recursive
  doubling's step): :meth:`Profile.step_reduction` reads ``step − exchange`` as what a
  reduction costs inside a step (:mod:`commsim.profiles._step_reduction`).
* ``reduction``: one local ``a += b`` of ``n`` bytes: γ is its slope.
* ``burst`` and ``overhead``: LogGP's gap per message and the sender's overhead.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from commsim import units
from commsim.errors import ParameterError
from commsim.profiles._intervals import FitIntervals
from commsim.profiles._pieces import PiecewiseLinear
from commsim.profiles._step_reduction import StepReduction

__all__ = ["Curve", "FitQuality", "LogGPParameters", "Profile"]

FORMAT = "commsim-profile"
VERSION = 1

#: A curve over at least this size ratio whose time grows by less than :data:`HIDDEN_GROWTH`
#: has its transfer hidden by a fixed per-operation cost (:meth:`Curve.hidden_transfer`).
HIDDEN_SPAN = 1024
#: The least growth of a measured transfer's time over :data:`HIDDEN_SPAN`: a rule, not a
#: fit: a transfer of the largest size adds at least a quarter of the least time, well above
#: the noise of a curve's centres (the blocks' spread, 3.4-7.6% on the H200's CUDA curves,
#: docs/benchmarks.md, fifth GPU check).
HIDDEN_GROWTH = 1.25


@dataclasses.dataclass(frozen=True)
class FitQuality:
    """How well a fit matches the medians it was fitted to; residuals are relative,
    ``(fit - measured) / measured``, and ``r2`` is the coefficient of determination of the
    relative-weighted fit (1 is perfect)."""

    r2: float
    median_rel_residual: float  # median of |relative residual|
    max_rel_residual: float  # largest |relative residual|
    points: int  # sizes fitted

    def describe(self) -> str:
        return (
            f"R²={self.r2:.4f}, |residual| median {100 * self.median_rel_residual:.1f}% "
            f"max {100 * self.max_rel_residual:.1f}% over {self.points} sizes"
        )


@dataclasses.dataclass(frozen=True, eq=False)
class Curve:
    """A measured curve and its fit: ``median_s[i]`` the time fitted at ``sizes[i]`` bytes (the
    median of the repeats; for samples taken in blocks, the 20% trimmed mean of the blocks'
    medians), ``spread`` IQR/median of the repeats; ``intervals`` the fit's parameter intervals
    when it was resampled (``None`` otherwise, and in a profile written before intervals
    existed)."""

    kind: str
    fit: PiecewiseLinear
    quality: FitQuality
    sizes: np.ndarray
    median_s: np.ndarray
    spread: np.ndarray
    intervals: FitIntervals | None = None

    def __post_init__(self) -> None:
        for name in ("sizes", "median_s", "spread"):
            object.__setattr__(self, name, np.asarray(getattr(self, name), dtype=np.float64))
        if not len(self.sizes) == len(self.median_s) == len(self.spread):
            raise ParameterError(
                f"curve {self.kind}: sizes, median_s and spread need the same length, got "
                f"{len(self.sizes)}, {len(self.median_s)}, {len(self.spread)}"
            )

    def describe(self) -> str:
        status = f", {self.intervals.status}" if self.intervals is not None else ""
        return f"{self.kind}: {self.fit.describe()} ({self.quality.describe()}{status})"

    def hidden_transfer(self) -> str | None:
        """Why this curve's bandwidth is not the transport's, or ``None``: over sizes spanning
        at least :data:`HIDDEN_SPAN`×, the time grows by less than :data:`HIDDEN_GROWTH`×, so
        a fixed cost per operation (a kernel launch, a call into a library) hides the
        transfer; a host that enqueues work slower than the device runs it times itself.

        Examples:
            >>> fit = PiecewiseLinear.hockney(alpha=1.2e-4, beta=0.0)
            >>> flat = Curve(
            ...     "pingpong",
            ...     fit,
            ...     FitQuality(1.0, 0.0, 0.0, 2),
            ...     [8, 2**26],
            ...     [1.22e-4, 1.20e-4],
            ...     [0.01, 0.01],
            ... )
            >>> flat.hidden_transfer().split(":")[0]
            'pingpong'
        """
        if len(self.sizes) < 2 or self.sizes[-1] < HIDDEN_SPAN * max(self.sizes[0], 1.0):
            return None
        least, large = float(np.min(self.median_s)), float(self.median_s[-1])
        if large >= HIDDEN_GROWTH * least:
            return None
        return (
            f"{self.kind}: the time hardly grows with the size ({units.format_time(large)} at "
            f"{units.format_size(self.sizes[-1], exact=False)}, at least "
            f"{units.format_time(least)} from {units.format_size(self.sizes[0], exact=False)} "
            "on): a fixed cost per operation (a launch, a call) hides the transfer, so its fitted "
            "bandwidth is not the transport's"
        )


@dataclasses.dataclass(frozen=True)
class LogGPParameters:
    """LogGP's parameters (Alexandrov et al., 1995), in seconds and seconds per byte."""

    L: float
    o: float
    g: float
    G: float

    def to_dict(self) -> dict[str, float]:
        return {"L_s": self.L, "o_s": self.o, "g_s": self.g, "G_s_per_byte": self.G}


@dataclasses.dataclass(frozen=True, eq=False)
class Profile:
    """One transport, measured on one machine (the module docstring).

    Attributes:
        backend: which executor's transport (``"mpi"``, ``"jax"``, ``"cuda"``).
        nranks: processes or devices the calibration ran on.
        transport: what was measured, in words (``"mpi4py Sendrecv on numpy buffers"``).
        machine: where (host, cores, CPU), and ``date`` when (ISO 8601).
        curves: by kind (``pingpong``, ``exchange``, ``step``, ``reduction``, ``burst``,
            ``overhead``).
        loggp: LogGP's L, o, g, G, when the burst and overhead curves were measured.
        call_overhead: seconds per executor call that moves nothing, by executor name.
        notes: why a number may not mean what it seems (oversubscribed cores, the simulator).
    """

    backend: str
    nranks: int
    transport: str
    machine: str
    date: str
    curves: Mapping[str, Curve]
    loggp: LogGPParameters | None = None
    call_overhead: Mapping[str, float] = dataclasses.field(default_factory=dict)
    notes: tuple[str, ...] = ()
    source: str = ""  # the file it was read from, for messages

    def __post_init__(self) -> None:
        if "pingpong" not in self.curves and "exchange" not in self.curves:
            raise ParameterError(
                f"profile {self.source or self.backend}: needs a pingpong or an exchange curve"
            )
        object.__setattr__(self, "notes", tuple(self.notes))

    def message_curve(self) -> Curve:
        """The curve a schedule's messages follow: ``exchange`` (every rank sends and receives
        in a step) when measured, else ``pingpong``."""
        return self.curves.get("exchange") or self.curves["pingpong"]

    def step_reduction(self) -> StepReduction | None:
        """What a reduction costs inside a step (:class:`StepReduction`), when the profile has
        a ``step`` and an ``exchange`` curve; ``None`` otherwise (γ alone then)."""
        step, exchange = self.curves.get("step"), self.curves.get("exchange")
        if step is None or exchange is None:
            return None
        red = self.curves.get("reduction")
        return StepReduction(step.fit, exchange.fit, red.fit if red is not None else None)

    @property
    def gamma(self) -> float:
        """Seconds per reduced byte: the ``reduction`` curve's slope at its largest piece, else 0."""
        red = self.curves.get("reduction")
        return red.fit.pieces[-1].beta if red is not None else 0.0

    def describe(self) -> str:
        lines = [f"profile: {self.backend} on {self.nranks} ranks, {self.transport}"]
        lines += [f"  measured on {self.machine}, {self.date}"]
        lines += [f"  {c.describe()}" for c in self.curves.values()]
        if self.loggp is not None:
            p = self.loggp
            lines.append(
                f"  loggp: L={units.format_time(p.L)} o={units.format_time(p.o)} "
                f"g={units.format_time(p.g)} G=1/({_bw(p.G)})"
            )
        lines += [
            f"  per-call overhead ({k}): {units.format_time(v)}"
            for k, v in self.call_overhead.items()
        ]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": VERSION,
            "backend": self.backend,
            "nranks": self.nranks,
            "transport": self.transport,
            "machine": self.machine,
            "date": self.date,
            "notes": list(self.notes),
            "call_overhead_s": dict(self.call_overhead),
            "loggp": self.loggp.to_dict() if self.loggp else None,
            "curves": {k: _curve_dict(c) for k, c in self.curves.items()},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "") -> Profile:
        """Read what :meth:`to_dict` (or a TOML file) holds; every problem names its field."""
        return _from_dict(data, source)


def _bw(beta: float) -> str:
    return "inf" if beta == 0 else units.format_bandwidth(1 / beta)


def _curve_dict(c: Curve) -> dict[str, Any]:
    q = c.quality
    return {
        "pieces": c.fit.to_dict(),
        "r2": q.r2,
        "median_rel_residual": q.median_rel_residual,
        "max_rel_residual": q.max_rel_residual,
        "points": q.points,
        "sizes": c.sizes.tolist(),
        "median_s": c.median_s.tolist(),
        "spread": c.spread.tolist(),
        **({"intervals": c.intervals.to_dict()} if c.intervals is not None else {}),
    }


class _Reader:
    """Field access with one-line errors that name the file and the field."""

    def __init__(self, source: str) -> None:
        self.source = source or "profile"

    def error(self, field: str, what: str) -> ParameterError:
        return ParameterError(f"{self.source}: {field}: {what}")

    def unknown(self, d: Mapping[str, Any], known: set[str], field: str) -> None:
        extra = sorted(set(d) - known)
        if extra:
            raise self.error(
                f"{field}{extra[0]}", f"unknown field (known: {', '.join(sorted(known))})"
            )

    def get(self, d: Mapping[str, Any], key: str, field: str, default: Any = ...) -> Any:
        if key not in d:
            if default is ...:
                raise self.error(f"{field}{key}", "missing")
            return default
        return d[key]

    def number(self, d: Mapping[str, Any], key: str, field: str, parse: Any = None) -> float:
        v = self.get(d, key, field)
        try:
            if isinstance(v, str) and parse is not None:
                return float(parse(v))
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v):
                raise ValueError
            if v < 0:
                raise self.error(f"{field}{key}", f"must be >= 0, got {v!r}")
            return float(v)
        except ParameterError:
            raise
        except (ValueError, units.UnitError) as e:
            raise self.error(f"{field}{key}", f"not a number: {v!r} {e}".strip()) from None

    def array(self, d: Mapping[str, Any], key: str, field: str) -> np.ndarray:
        v = self.get(d, key, field, [])
        if not isinstance(v, Sequence) or isinstance(v, str):
            raise self.error(f"{field}{key}", "must be a list of numbers")
        try:
            a = np.array([float(x) for x in v], dtype=np.float64)
        except (TypeError, ValueError):
            raise self.error(f"{field}{key}", "must be a list of numbers") from None
        return a


def _curve(r: _Reader, kind: str, d: Any) -> Curve:
    from commsim.profiles._pieces import Piece

    field = f"curves.{kind}."
    if not isinstance(d, Mapping):
        raise r.error(f"curves.{kind}", "must be a table")
    r.unknown(d, _CURVE_KEYS, field)
    raw = r.get(d, "pieces", field)
    if not isinstance(raw, Sequence) or not raw:
        raise r.error(f"{field}pieces", "must be a non-empty list of tables")
    pieces = []
    for i, p in enumerate(raw):
        pf = f"{field}pieces[{i}]."
        if not isinstance(p, Mapping):
            raise r.error(f"{field}pieces[{i}]", "must be a table")
        r.unknown(p, {"start_bytes", "alpha_s", "beta_s_per_byte"}, pf)
        pieces.append(
            Piece(
                r.number(p, "start_bytes", pf, units.parse_size),
                r.number(p, "alpha_s", pf, units.parse_time),
                r.number(p, "beta_s_per_byte", pf, units.parse_bandwidth_or_inverse),
            )
        )
    try:
        fit = PiecewiseLinear(tuple(pieces))
    except ParameterError as e:
        raise r.error(f"{field}pieces", str(e)) from None
    sizes, med = r.array(d, "sizes", field), r.array(d, "median_s", field)
    spread = r.array(d, "spread", field) if "spread" in d else np.zeros_like(sizes)
    if not len(sizes) == len(med) == len(spread):
        raise r.error(field.rstrip("."), "sizes, median_s and spread need the same length")
    quality = FitQuality(
        r2=float(d.get("r2", float("nan"))),
        median_rel_residual=float(d.get("median_rel_residual", float("nan"))),
        max_rel_residual=float(d.get("max_rel_residual", float("nan"))),
        points=int(d.get("points", len(sizes))),
    )
    intervals = None
    if "intervals" in d:
        if not isinstance(d["intervals"], Mapping):
            raise r.error(f"{field}intervals", "must be a table")
        try:
            intervals = FitIntervals.from_dict(d["intervals"], f"{field}intervals")
        except ParameterError as e:
            raise r.error(f"{field}intervals", str(e).partition(": ")[2]) from None
        if len(intervals.support) != len(fit.pieces):
            raise r.error(f"{field}intervals", "needs one interval per piece")
    return Curve(kind, fit, quality, sizes, med, spread, intervals)


_CURVE_KEYS = {
    "intervals",
    "pieces",
    "r2",
    "median_rel_residual",
    "max_rel_residual",
    "points",
    "sizes",
    "median_s",
    "spread",
}
_KNOWN = {
    "format",
    "version",
    "backend",
    "nranks",
    "transport",
    "machine",
    "date",
    "notes",
    "call_overhead_s",
    "loggp",
    "curves",
}


def _from_dict(data: Mapping[str, Any], source: str) -> Profile:
    r = _Reader(source)
    if data.get("format") != FORMAT:
        raise r.error("format", f"expected {FORMAT!r} (a file `commsim calibrate` wrote)")
    if data.get("version") != VERSION:
        raise r.error(
            "version", f"this commsim reads version {VERSION}, got {data.get('version')!r}"
        )
    r.unknown(data, _KNOWN, "")
    curves_raw = r.get(data, "curves", "")
    if not isinstance(curves_raw, Mapping) or not curves_raw:
        raise r.error("curves", "must be a table of curves (pingpong, exchange, reduce, ...)")
    curves = {str(k): _curve(r, str(k), v) for k, v in curves_raw.items()}
    lg = data.get("loggp")
    loggp = None
    if lg:
        loggp = LogGPParameters(
            r.number(lg, "L_s", "loggp."),
            r.number(lg, "o_s", "loggp."),
            r.number(lg, "g_s", "loggp."),
            r.number(lg, "G_s_per_byte", "loggp."),
        )
    overhead_raw = data.get("call_overhead_s") or {}
    if not isinstance(overhead_raw, Mapping):
        raise r.error("call_overhead_s", "must be a table executor = seconds")
    overhead = {str(k): r.number(overhead_raw, k, "call_overhead_s.") for k in overhead_raw}
    nranks = r.get(data, "nranks", "")
    if isinstance(nranks, bool) or not isinstance(nranks, int) or nranks < 1:
        raise r.error("nranks", f"must be a whole number >= 1, got {nranks!r}")
    notes = r.get(data, "notes", "", [])
    return Profile(
        backend=str(r.get(data, "backend", "")),
        nranks=nranks,
        transport=str(data.get("transport", "")),
        machine=str(data.get("machine", "")),
        date=str(data.get("date", "")),
        curves=curves,
        loggp=loggp,
        call_overhead=overhead,
        notes=tuple(str(n) for n in notes),
        source=source,
    )
