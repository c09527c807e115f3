"""The schedule argument group: which schedules a command works on.

``-c/--collective``, ``-a/--algorithm``, ``-p/--nranks``, ``--param K=V``, ``--root`` and, for the
commands that read saved schedules, ``-f/--file``. A command declares its group once
(:class:`ScheduleGroup`), adds it to its parser and parses it back into a :class:`ScheduleChoice`
(or a :class:`ScheduleFile`): names checked against the registry, rank counts and parameters
parsed. Schedules are then built lazily within a :class:`~commsim.cli.memory.MemoryBudget`.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from commsim import units
from commsim._collectives import COLLECTIVES
from commsim._ir import Schedule
from commsim.algorithms import available, build, info
from commsim.cli.arguments import UNITS_EPILOG, add_epilog, int_type
from commsim.cli.errors import UsageError, quote
from commsim.cli.memory import MemoryBudget
from commsim.errors import ResourceError

__all__ = [
    "ScheduleChoice",
    "ScheduleFile",
    "ScheduleGroup",
    "coerce_param",
    "parse_nranks",
    "parse_params",
]

_PARAM_LIMIT = 2**31  # numeric algorithm parameters (segments, ...): beyond it is a typo


@dataclasses.dataclass(frozen=True)
class ScheduleChoice:
    """Schedules chosen by name: every ``algorithms`` × ``nranks`` of ``collective``.

    ``params[algorithm]`` holds the ``--param`` values that algorithm accepts, each parsed like
    its default; ``root`` is ``None`` when not given (the collective's default, 0).
    """

    collective: str
    algorithms: tuple[str, ...]
    nranks: tuple[int, ...]
    params: Mapping[str, Mapping[str, Any]]
    root: int | None = None
    gpus: bool = dataclasses.field(default=False, compare=False)

    def build(self, algorithm: str, nranks: int, budget: MemoryBudget) -> Schedule:
        """``algorithm`` on ``nranks`` ranks, built lazily; refused if its ``O(p)`` arrays
        would not fit in ``budget``. With ``gpus`` (``predict`` and ``compare``: ``-p`` counts
        the GPUs) an in-network row's switch helpers come on top
        (:meth:`commsim.algorithms.AlgorithmInfo.nranks_for`); without (``run``,
        ``validate``: ``-p`` processes) every rank is one of the ``nranks``."""
        if self.gpus:
            nranks = info(self.collective, algorithm).nranks_for(nranks)
        budget.check_build(nranks)
        root = {} if self.root is None else {"root": self.root}
        try:
            return build(self.collective, algorithm, nranks, **self.params[algorithm], **root)
        except MemoryError:
            raise ResourceError(
                f"p={nranks}: out of memory building {self.collective}/{algorithm}"
            ) from None

    def build_all(self, budget: MemoryBudget) -> list[Schedule]:
        """Every algorithm at every rank count, in that order."""
        return [self.build(a, p, budget) for a in self.algorithms for p in self.nranks]


@dataclasses.dataclass(frozen=True)
class ScheduleFile:
    """A saved schedule (``.json``, ``.npz`` or MSCCL-IR ``.xml``), read by :func:`commsim.load`."""

    path: Path

    def build_all(self, budget: MemoryBudget) -> list[Schedule]:
        """The file's schedule (loading validates it: a malformed file is a one-line error)."""
        from commsim import load

        try:
            return [load(self.path)]
        except OSError as e:  # a directory, permissions: whatever load did not word itself
            raise UsageError(f"{self.path}: cannot read ({e.strerror or e})") from None


@dataclasses.dataclass(frozen=True)
class ScheduleGroup:
    """The schedule options of ``command``: one or several algorithms and rank counts, and
    whether ``--file`` may replace them. With several algorithms allowed, none means all."""

    command: str
    many_algorithms: bool = False
    many_nranks: bool = False
    file: bool = False

    def add(self, parser: argparse.ArgumentParser) -> None:
        """Add the ``schedule`` group to ``parser`` (and the units to its epilog)."""
        g = parser.add_argument_group("schedule")
        g.add_argument(
            "-c", "--collective", metavar="C", help=f"the collective: {', '.join(COLLECTIVES)}"
        )
        if self.many_algorithms:
            g.add_argument(
                "-a",
                "--algorithm",
                metavar="A1,A2",
                help="algorithm name(s), comma-separated "
                "(default: every algorithm of the collective)",
            )
        else:
            g.add_argument(
                "-a",
                "--algorithm",
                metavar="A",
                help="algorithm name ('commsim algorithms' lists them)",
            )
        g.add_argument(
            "-p",
            "--nranks",
            metavar="P",
            help="rank count(s): 8, 8,64,1024 or 2..1024"
            if self.many_nranks
            else "rank count, e.g. 64",
        )
        g.add_argument(
            "--param",
            action="append",
            default=[],
            metavar="K=V",
            help="algorithm parameter passed to its factory, e.g. segments=8 (repeatable)",
        )
        g.add_argument(
            "--root",
            type=int_type("root", 0),
            metavar="R",
            help="root rank of broadcast/reduce (default: 0)",
        )
        if self.file:
            g.add_argument(
                "-f",
                "--file",
                metavar="FILE",
                help="a saved schedule (.json or .npz) or an MSCCL-IR algorithm (.xml) "
                "instead of -c/-a/-p",
            )
        add_epilog(parser, UNITS_EPILOG)

    def parse(self, args: argparse.Namespace) -> ScheduleChoice | ScheduleFile:
        """The group's options as a :class:`ScheduleChoice` (or :class:`ScheduleFile`)."""
        if self.file and args.file:
            given = [
                flag
                for flag, value in (
                    ("-c", args.collective),
                    ("-a", args.algorithm),
                    ("-p", args.nranks),
                    ("--param", args.param),
                    ("--root", args.root),
                )
                if value
            ]
            if given:
                raise UsageError(
                    f"--file takes the schedule from the file; drop {', '.join(given)}"
                )
            return ScheduleFile(Path(args.file))
        collective = _parse_collective(args.collective)
        algorithms = self._parse_algorithms(args.algorithm, collective)
        nranks = parse_nranks(args.nranks, command=self.command, many=self.many_nranks)
        params = parse_params(args.param, collective, algorithms)
        return ScheduleChoice(collective, algorithms, nranks, params, args.root)

    def _parse_algorithms(self, text: str | None, collective: str) -> tuple[str, ...]:
        names = available(collective)
        if not text:
            if not self.many_algorithms:
                raise UsageError(
                    f"give the algorithm with -a (for {collective}: {', '.join(names)})"
                )
            if not names:
                raise UsageError(f"no {collective} algorithms are registered yet")
            # rows whose helpers are a switch (nvls) need a reducing switch: named with -a only
            return tuple(a for a in names if info(collective, a).helpers_for is None)
        chosen = [a.strip() for a in text.split(",")]
        if "" in chosen:
            raise UsageError(f"empty name in algorithm list {quote(text)}")
        for a in chosen:
            info(collective, a)  # UnknownNameError with the closest names
        if len(chosen) > 1 and not self.many_algorithms:
            raise UsageError(f"{self.command} takes one algorithm, got {len(chosen)} ({text})")
        return tuple(dict.fromkeys(chosen))


def parse_nranks(text: str | None, *, command: str, many: bool) -> tuple[int, ...]:
    """``-p`` as rank counts; for a command that takes one (``many=False``), exactly one."""
    if text is None:
        example = "-p 64 or -p 2..1024" if many else "-p 64"
        raise UsageError(f"give the rank count with -p (e.g. {example})")
    counts = units.parse_int_list(text)
    if not many and len(counts) > 1:
        raise UsageError(f"{command} takes one rank count, got {len(counts)} ({text})")
    return tuple(counts)


def coerce_param(key: str, value: str, default: Any) -> Any:
    """Parse ``--param`` ``value`` like the parameter's ``default``: bool, int (a size allowed),
    float or text."""
    if isinstance(default, bool):
        low = value.lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise UsageError(f"parameter {key} is a boolean (true/false), got {quote(value)}")
    if isinstance(default, str):  # text stays text: "0" is not the number 0
        return value
    for parse in (int, float):
        try:
            number = parse(value)
        except ValueError:
            continue
        if isinstance(default, int) and isinstance(number, float):
            if not number.is_integer():
                raise UsageError(f"parameter {key} is an integer, got {quote(value)}")
            number = int(number)
        if abs(number) > _PARAM_LIMIT or not math.isfinite(number):  # ints past any float
            raise UsageError(
                f"parameter {key}={quote(value)} is out of range (|value| <= {_PARAM_LIMIT})"
            )
        return number
    if isinstance(default, int):
        try:
            number = units.parse_size(value)
        except units.UnitError:
            raise UsageError(f"parameter {key} is an integer, got {quote(value)}") from None
        if number > _PARAM_LIMIT:
            raise UsageError(
                f"parameter {key}={quote(value)} is out of range (|value| <= {_PARAM_LIMIT})"
            )
        return number
    if isinstance(default, float):
        raise UsageError(f"parameter {key} is a number, got {quote(value)}")
    return value


def _parse_collective(text: str | None) -> str:
    if not text:
        raise UsageError("give the collective with -c (one of " + ", ".join(COLLECTIVES) + ")")
    available(text)  # UnknownNameError with the closest names
    return text


def parse_params(
    items: Sequence[str], collective: str, algorithms: Sequence[str]
) -> dict[str, dict[str, Any]]:
    """``--param K=V`` items, per algorithm: the keys it accepts, parsed like their defaults.

    A key no chosen algorithm accepts is an error; one that only some accept goes to those.
    """
    raw: dict[str, str] = {}
    for item in items:
        key, eq, value = (part.strip() for part in item.partition("="))
        if not eq or not key.isidentifier() or not value:
            raise UsageError(f"--param expects KEY=VALUE such as segments=8, got {quote(item)}")
        raw[key] = value
    accepted = {a: info(collective, a).params for a in algorithms}
    for key in raw:
        if not any(key in params for params in accepted.values()):
            if len(algorithms) == 1:
                names = sorted(accepted[algorithms[0]])
                raise UsageError(
                    f"{collective}/{algorithms[0]} has no parameter {quote(key)}; "
                    f"accepted: {', '.join(names) or 'none'}"
                )
            each = "; ".join(f"{a}: {', '.join(sorted(p)) or 'none'}" for a, p in accepted.items())
            raise UsageError(
                f"no algorithm of -a {','.join(algorithms)} has a parameter {quote(key)} "
                f"(they accept {each})"
            )
    return {
        a: {k: coerce_param(k, v, params[k]) for k, v in raw.items() if k in params}
        for a, params in accepted.items()
    }
