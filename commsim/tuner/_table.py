"""A :class:`TunerTable`: size ranges → (algorithm, parameters, predicted time), as NCCL tunes.

The table is read from a :class:`~commsim.tuner._sweep.Sweep`: at every swept size the fastest
candidate wins; consecutive sizes with the same winner (algorithm *and* parameters) merge into one
:class:`Range`. Ranges are contiguous in bytes and cover ``[smallest, largest]`` swept size: the
boundary between two ranges lies at the geometric mean of the last size of one and the first size
of the next (the sweep saw neither choice in between; sizes are usually spaced geometrically).
Each range's predicted times at its two ends are evaluated for the chosen candidate; its
``runner_up`` is the best candidate of *another* algorithm where it came closest within the range,
and ``margin`` its time over the winner's there (``1.05``: 5 % slower).

:meth:`TunerTable.schedule` is what a drop-in collective calls per message size: the chosen
algorithm built with its tuned parameters (cached per range). A size below the table's smallest
uses the first range, above its largest the last (the nearest range).
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from commsim._ir import Schedule
from commsim.algorithms import build, on_channels
from commsim.errors import ParameterError
from commsim.tuner._sweep import CHANNELS, Sweep, evaluate
from commsim.tuner._toml import read_table, write_table

__all__ = ["Range", "TunerTable", "table_from_sweep"]


@dataclasses.dataclass(frozen=True)
class Range:
    """Sizes ``min_bytes..max_bytes`` (inclusive) use ``algorithm`` with ``params``.

    Attributes:
        min_bytes, max_bytes: the range, in the collective's ``nbytes`` convention.
        algorithm, params: the choice (every parameter, defaults included).
        time_s: predicted seconds at ``min_bytes`` and at ``max_bytes``.
        runner_up, runner_up_params: the closest other algorithm (``None`` if it was alone).
        margin: the runner-up's time over the winner's where it came closest (``>= 1``).
        protocol: the protocol the winner's messages use in this range (``"LL"``, ``"LL128"``,
            ``"Simple"``) when the model chose one per size
            (:class:`commsim.models.ProtocolChoice`), else ``None``.
    """

    min_bytes: int
    max_bytes: int
    algorithm: str
    params: Mapping[str, Any]
    time_s: tuple[float, float]
    runner_up: str | None = None
    runner_up_params: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    margin: float | None = None
    protocol: str | None = None

    def __post_init__(self) -> None:  # tuples as lists: as a TOML file gives them back
        object.__setattr__(self, "params", _plain(self.params))
        object.__setattr__(self, "runner_up_params", _plain(self.runner_up_params))
        object.__setattr__(self, "time_s", tuple(float(t) for t in self.time_s))


@dataclasses.dataclass(frozen=True)
class TunerTable:
    """The tuner's choice per size range for ``collective`` on ``nranks`` ranks.

    Attributes:
        collective, nranks: what was tuned.
        model: the model's :meth:`~commsim.models.Model.to_dict` (plain data).
        model_description: its :meth:`~commsim.models.Model.describe` line.
        ranges: contiguous, increasing, covering the swept sizes.
        notes: what the tuner left out and why (algorithms that could not be built).
    """

    collective: str
    nranks: int
    model: Mapping[str, Any]
    model_description: str
    ranges: tuple[Range, ...]
    notes: tuple[str, ...] = ()
    _built: dict[int, Schedule] = dataclasses.field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if not self.ranges:
            raise ParameterError("a tuner table needs at least one range")
        object.__setattr__(self, "ranges", tuple(self.ranges))
        object.__setattr__(self, "notes", tuple(self.notes))

    @property
    def min_bytes(self) -> int:
        return self.ranges[0].min_bytes

    @property
    def max_bytes(self) -> int:
        return self.ranges[-1].max_bytes

    def index(self, nbytes: float) -> int:
        """The index of the range ``nbytes`` falls in (the nearest one outside the table)."""
        starts = [r.min_bytes for r in self.ranges]
        return max(bisect.bisect_right(starts, nbytes) - 1, 0)

    def lookup(self, nbytes: float) -> Range:
        """The range ``nbytes`` falls in (the nearest one outside the table)."""
        return self.ranges[self.index(nbytes)]

    def schedule(self, nbytes: int) -> Schedule:
        """The chosen algorithm for ``nbytes`` built on ``nranks`` ranks with its tuned parameters,
        on its tuned number of channels (``channels``, laid out by :func:`commsim.algorithms.on_channels`;
        built once per range, then reused)."""
        i = self.index(nbytes)
        if i not in self._built:
            params = dict(self.ranges[i].params)
            k = params.pop(CHANNELS, 1)
            s = build(self.collective, self.ranges[i].algorithm, self.nranks, **params)
            self._built[i] = on_channels(s, k)
        return self._built[i]

    def to_dict(self) -> dict[str, Any]:
        """Plain data (``--json``, the TOML file): the fields, each range a dict."""
        return {
            "collective": self.collective,
            "nranks": self.nranks,
            "model": dict(self.model),
            "model_description": self.model_description,
            "notes": list(self.notes),
            "ranges": [
                {
                    "min_bytes": r.min_bytes,
                    "max_bytes": r.max_bytes,
                    "algorithm": r.algorithm,
                    "params": dict(r.params),
                    "time_at_min_s": r.time_s[0],
                    "time_at_max_s": r.time_s[1],
                    **({"protocol": r.protocol} if r.protocol is not None else {}),
                    **(
                        {
                            "runner_up": r.runner_up,
                            "runner_up_params": dict(r.runner_up_params),
                            "margin": r.margin,
                        }
                        if r.runner_up is not None
                        else {}
                    ),
                }
                for r in self.ranges
            ],
        }

    def save(self, path: str | Path) -> Path:
        """Write the table as TOML at ``path`` (:mod:`commsim.tuner._toml`); the path."""
        return write_table(self.to_dict(), path)

    @classmethod
    def load(cls, path: str | Path) -> TunerTable:
        """Read a table :meth:`save` wrote; a bad file is one line naming the field."""
        fields = read_table(path)
        ranges = tuple(Range(*args) for args in fields.pop("ranges"))
        return cls(ranges=ranges, **fields)


def table_from_sweep(result: Sweep) -> TunerTable:
    """The table of a sweep's winners (the module docstring says how ranges are drawn)."""
    sizes = result.sizes
    win = result.best()
    runner = result.runner_up(win)
    protocols = result.protocols
    key = [(int(w), None if protocols is None else protocols[w, j]) for j, w in enumerate(win)]
    starts = [0, *(j for j in range(1, sizes.size) if key[j] != key[j - 1])]
    ends = [*(j - 1 for j in starts[1:]), sizes.size - 1]
    lo = [int(sizes[0])] + [int(np.sqrt(sizes[j - 1] * sizes[j])) + 1 for j in starts[1:]]
    hi = [b - 1 for b in lo[1:]] + [int(sizes[-1])]
    at_ends = _times_at(result, [int(win[s]) for s in starts], lo, hi)
    ranges = []
    for k, (s, e) in enumerate(zip(starts, ends, strict=True)):
        c = result.candidates[win[s]]
        extra: dict[str, Any] = {}
        span = np.arange(s, e + 1)
        others = runner[span]
        if (others >= 0).all():
            ratios = _ratios(result.times[others, span], result.times[win[span], span])
            j = int(np.argmin(ratios))
            r = result.candidates[others[j]]
            extra = {"runner_up": r.algorithm, "runner_up_params": r.params}
            extra["margin"] = float(ratios[j])
        protocol = None if protocols is None else str(protocols[win[s], s])
        ranges.append(
            Range(lo[k], hi[k], c.algorithm, c.params, at_ends[k], protocol=protocol, **extra)
        )
    notes = tuple(f"skipped {a}: {why}" for a, why in result.skipped.items())
    return TunerTable(
        result.collective,
        result.nranks,
        _plain(result.model.to_dict()),
        result.model.describe(),
        tuple(ranges),
        notes,
    )


def _ratios(runner: np.ndarray, winner: np.ndarray) -> np.ndarray:
    """``runner / winner``, with a winner that takes no time (one rank) counting as a tie when
    the runner-up takes none either, and as an unbounded margin otherwise."""
    safe = np.where(winner > 0, winner, 1.0)
    return np.where(winner > 0, runner / safe, np.where(runner > 0, np.inf, 1.0))


def _times_at(
    result: Sweep, chosen: list[int], lo: list[int], hi: list[int]
) -> list[tuple[float, float]]:
    """Each range's predicted times at its ends: one evaluation per distinct chosen candidate,
    reusing the sweep's times where an end is a swept size."""
    swept = {int(n): j for j, n in enumerate(result.sizes)}
    out: list[list[float]] = [[np.nan, np.nan] for _ in chosen]
    todo: dict[int, list[tuple[int, int, int]]] = {}
    for k, (i, a, b) in enumerate(zip(chosen, lo, hi, strict=True)):
        for side, n in enumerate((a, b)):
            if n in swept:
                out[k][side] = float(result.times[i, swept[n]])
            else:
                todo.setdefault(i, []).append((k, side, n))
    for i, wanted in todo.items():
        times = evaluate(
            result.model, result.candidates[i], np.array([n for *_, n in wanted], float)
        )
        for (k, side, _), t in zip(wanted, times, strict=True):
            out[k][side] = float(t)
    return [(a, b) for a, b in out]


def _plain(x: Any) -> Any:
    """``x`` as TOML-able plain data: numpy scalars and tuples become Python's, ``None`` values
    are dropped (TOML has no null), so a saved table loads back equal."""
    if isinstance(x, Mapping):
        return {str(k): _plain(v) for k, v in x.items() if v is not None}
    if isinstance(x, (list, tuple, np.ndarray)):
        return [_plain(v) for v in x]
    if isinstance(x, np.generic):
        return x.item()
    return x
