r"""GOAL, the text schedules LogGOPSim simulates: written, never read.

GOAL (Hoefler, Siebert & Lumsdaine, "Group Operation Assembly Language", ICPP 2009) is what
LogGOPSim (Hoefler, Schneider & Lumsdaine, HPDC 2010) simulates after ``txt2bin`` compiles it.
The grammar, as ``txt2bin.re`` in ``spcl/LogGOPSim`` scans it (one item per line)::

    num_ranks <N>
    rank <r> {
    <label>: send <bytes>b to <peer> tag <t>
    <label>: recv <bytes>b from <peer> tag <t>
    <label>: calc <time>
    <label> requires <label>
    }

Labels are identifiers (``[a-zA-Z][a-zA-Z0-9_]*``) local to their rank; ranks must appear in
order ``0 .. N-1`` (``txt2bin`` stops after rank ``N-1``). ``a requires b`` starts ``a`` once
``b`` has completed (an eager send completes after its overhead ``o``, a receive once its
message is in).

**What each rank does** is the event order of commsim's own LogGP model
(:class:`commsim.models.LogGP`), so LogGOPSim with the same ``L, o, g, G`` reproduces its
prediction: step by step, each step's messages (:func:`commsim._messages.messages`) in the
rounds of :func:`commsim._messages.matchings`, and in each round the rank's send, then its
receive, then a ``calc`` for the part of that message it reduces; after the rounds, one ``calc``
for the step's local reductions. Every operation ``requires`` the rank's previous one, a chain
that is the model's single CPU clock per rank (``n`` operations: ``n - 1`` requires).

Conventions:

* **tags**: a message's tag is its step index, so a send and its receive match by
  ``(sender, receiver, step)``, the IR's one message per ``(step, src, dst)``. A schedule of
  ``C > 1`` channels has one message per ``(step, src, dst, channel)``: its tag is
  ``step · C + channel``.
* **labels**: ``s<step>t<peer>`` (send to), ``r<step>f<peer>`` (receive from), ``c<step>f<peer>``
  (its reduction), ``l<step>`` (the step's local reductions); with ``C > 1`` channels the
  message labels end in ``c<channel>`` (``s3t1c2``). The chain stays one per rank: the LogGP
  model has one CPU clock per rank whatever the channels (they share its overhead ``o``).
* **sizes**: a message of ``u`` slot units carries ``u · nbytes / nbytes_units`` bytes, rounded to
  the nearest integer and at least 1 (LogGOPSim charges ``(s - 1)G``, commsim ``max(s - 1, 0)G``).
* **calc**: GOAL's ``calc`` is a time, not bytes: reducing ``b`` bytes is ``calc round(b·gamma)``
  with ``gamma`` in LogGOPSim's time unit per byte (the unit of ``-L``, ``-o``...; ``gamma = 0``
  keeps the ``calc 0`` steps, so reductions stay visible).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import os
from pathlib import Path
from typing import Any

import numpy as np

from commsim import units
from commsim._ir import Schedule
from commsim._messages import matchings, messages
from commsim.errors import ParameterError

__all__ = ["GoalProgram", "format_goal", "goal_program", "write_goal"]


@dataclasses.dataclass(frozen=True)
class GoalProgram:
    """A GOAL schedule's text and its operation counts (all ranks)."""

    text: str
    nranks: int
    nbytes: int
    nsends: int
    nrecvs: int
    ncalcs: int
    nrequires: int

    def summary(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "text"}


def format_goal(schedule: Schedule, nbytes: int | str, *, gamma: float = 0.0) -> str:
    """The GOAL text of ``schedule`` at message size ``nbytes`` (see :func:`goal_program`).

    See Also:
        :func:`write_goal` (to a file); there is no ``parse_goal``: LogGOPSim reads GOAL,
        commsim does not.
    """
    return goal_program(schedule, nbytes, gamma=gamma).text


def write_goal(
    schedule: Schedule, path: str | os.PathLike[str], nbytes: int | str, *, gamma: float = 0.0
) -> Path:
    """Write :func:`format_goal`'s text to ``path`` (nothing is written if it fails)."""
    path = Path(path)
    path.write_text(format_goal(schedule, nbytes, gamma=gamma))
    return path


def goal_program(schedule: Schedule, nbytes: int | str, *, gamma: float = 0.0) -> GoalProgram:
    """``schedule`` as a GOAL program for LogGOPSim (module docstring): its text and counts.

    Args:
        nbytes: the collective's size (commsim's convention, :attr:`Schedule.nbytes_units`), an
            integer or a size string such as ``"1MiB"``.
        gamma: ``calc`` time per byte reduced, in LogGOPSim's time unit.

    Examples:
        >>> import commsim
        >>> print(format_goal(commsim.build("allgather", "ring", nranks=2), 8))
        num_ranks 2
        rank 0 {
        s0t1: send 4b to 1 tag 0
        r0f1: recv 4b from 1 tag 0
        r0f1 requires s0t1
        }
        rank 1 {
        s0t0: send 4b to 0 tag 0
        r0f0: recv 4b from 0 tag 0
        r0f0 requires s0t0
        }
        <BLANKLINE>
    """
    size, gamma = _size(nbytes), _gamma(gamma)
    s, p = schedule, schedule.nranks
    per_unit = size / s.nbytes_units
    body: list[list[str]] = [[] for _ in range(p)]
    last: list[str | None] = [None] * p
    counts = dict.fromkeys(("send", "recv", "calc", "requires"), 0)

    def emit(r: int, label: str, op: str) -> None:
        body[r].append(f"{label}: {op}")
        counts[op.split(" ", 1)[0]] += 1
        if last[r] is not None:
            body[r].append(f"{label} requires {last[r]}")
            counts["requires"] += 1
        last[r] = label

    nch = s.nchannels

    def tag(k: int, channel: int) -> tuple[int, str]:  # a message's tag, its labels' suffix
        return (k, "") if nch == 1 else (k * nch + channel, f"c{channel}")

    for k, st in enumerate(s.steps()):
        s.check_step(st, k)
        msg = messages(st, s)
        rounds = [np.arange(len(msg.src))] if msg.unique_ports else matchings(msg.src, msg.dst, p)
        for idx in rounds:
            for j in idx.tolist():
                q, r = int(msg.src[j]), int(msg.dst[j])
                t, c = tag(k, int(msg.channel[j]))
                emit(q, f"s{k}t{r}{c}", f"send {_bytes(msg.units[j], per_unit)}b to {r} tag {t}")
            for j in idx.tolist():
                q, r = int(msg.src[j]), int(msg.dst[j])
                t, c = tag(k, int(msg.channel[j]))
                emit(r, f"r{k}f{q}{c}", f"recv {_bytes(msg.units[j], per_unit)}b from {q} tag {t}")
                if msg.reduce_units[j]:
                    calc = _round(msg.reduce_units[j] * per_unit * gamma)
                    emit(r, f"c{k}f{q}{c}", f"calc {calc}")
        local = np.bincount(msg.local_rank, msg.local_reduce_units, minlength=p)
        for r in np.flatnonzero(local).tolist():
            emit(r, f"l{k}", f"calc {_round(local[r] * per_unit * gamma)}")
    lines = [f"num_ranks {p}"]
    for r in range(p):
        lines += [f"rank {r} {{", *body[r], "}"]
    return GoalProgram(
        text="\n".join(lines) + "\n",
        nranks=p,
        nbytes=size,
        nsends=counts["send"],
        nrecvs=counts["recv"],
        ncalcs=counts["calc"],
        nrequires=counts["requires"],
    )


def _gamma(gamma: Any) -> float:
    if (
        isinstance(gamma, bool)
        or not isinstance(gamma, numbers.Real)
        or not (math.isfinite(gamma) and gamma >= 0)
    ):
        raise ParameterError(
            f"gamma must be a finite number >= 0 (seconds per byte), got {gamma!r}"
        )
    return float(gamma)


def _size(nbytes: int | str) -> int:
    if isinstance(nbytes, str):
        nbytes = units.parse_size(nbytes)
    if isinstance(nbytes, bool) or not isinstance(nbytes, numbers.Integral) or nbytes < 1:
        raise ParameterError(f"GOAL needs a whole number of bytes >= 1, got {nbytes!r}")
    return int(nbytes)


def _round(x: Any) -> int:
    return math.floor(float(x) + 0.5)


def _bytes(units_: Any, per_unit: float) -> int:
    return max(1, _round(units_ * per_unit))
