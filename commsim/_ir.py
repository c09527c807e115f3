r"""The schedule IR: steps of transfers, as arrays.

A :class:`Schedule` is what every algorithm produces and what every consumer (the verifier, the cost
models, the executors) reads. It is deliberately small:

* Every rank owns one buffer of ``nslots`` **slots**. The first ``ndata`` slots are the collective's
  data buffer (laid out as its :mod:`spec <commsim._collectives>` says); any further slots are
  **scratch**. Slot ``j`` holds ``slot_units[j]`` units of data; :meth:`Schedule.slot_bytes` turns a
  message size ``nbytes`` into bytes per slot, so sizes need not divide evenly by the slot count.
* A schedule is a sequence of **steps**; a step is a set of **transfers**, stored struct-of-arrays
  (:class:`Step`). Transfer ``i`` moves the slot range ``[src_slot[i], src_slot[i] + count[i])`` of
  rank ``src[i]`` into ``[dst_slot[i], dst_slot[i] + count[i])`` of rank ``dst[i]``, either
  overwriting (``reduce[i] == False``: ``dst = src``) or reducing (``dst ⊕= src``). ``src == dst``
  is a local copy or reduction.

Semantics (enforced by :func:`commsim.verify`):

1. **Reads before writes.** Within a step every transfer reads the state as it was before the step,
   so an exchange (``a → b`` and ``b → a`` in one step) is expressible. Two writes to the same
   ``(rank, slot)`` in one step are an error unless both reduce.
2. **One message per (step, src, dst).** All transfers of a step with the same ``src`` and ``dst``
   form one message: a model charges one latency for it, and an executor sends it as one buffer.
3. **Per-rank program order.** A rank starts its step-``s`` work once it has finished its own earlier
   steps. A rank with nothing to do in a step does not wait for it: there are no global barriers.
4. Reading a slot that holds no data yet (an output slot not yet received, scratch never written)
   is an error, and so is reducing into one.
5. A transfer's source and destination ranges hold the same amount of data (equal
   ``slot_units`` sums); ranks and slot ranges lie inside ``[0, nranks)`` and ``[0, nslots)``.
   :meth:`Schedule.check_step` enforces this for every consumer.

Scale: a ring allreduce on ``p`` ranks has ``2p(p-1)`` transfers (537 M at ``p = 16,384``), so steps
are produced lazily by a function of the step index (:meth:`Schedule.step`), each ``O(p)`` arrays;
:meth:`Schedule.materialize` builds the list form for small schedules (executors, export).

Examples:
    >>> import numpy as np
    >>> from commsim._ir import Collective, Schedule, Step
    >>> # two ranks swap-and-add a one-slot vector: an allreduce in one step
    >>> step = Step.make(src=[0, 1], dst=[1, 0], src_slot=0, dst_slot=0, reduce=True)
    >>> s = Schedule.from_steps([step], collective=Collective("allreduce"), nranks=2, nslots=1)
    >>> s.nsteps, s.ntransfers
    (1, 2)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np

from commsim.errors import ScheduleError

__all__ = ["COLLECTIVES", "Collective", "Schedule", "Step"]

COLLECTIVES: tuple[str, ...] = (
    "allreduce",
    "reduce_scatter",
    "allgather",
    "broadcast",
    "reduce",
    "alltoall",
)
_ROOTED = ("broadcast", "reduce")


@dataclasses.dataclass(frozen=True)
class Collective:
    """Which collective a schedule computes: its ``kind`` and, for broadcast and reduce, the ``root``."""

    kind: str
    root: int = 0

    def __post_init__(self) -> None:
        if self.kind not in COLLECTIVES:
            raise ScheduleError(
                f"unknown collective {self.kind!r}; known: {', '.join(COLLECTIVES)}"
            )
        if self.root != 0 and self.kind not in _ROOTED:
            raise ScheduleError(f"{self.kind} has no root (got root={self.root})")

    @property
    def rooted(self) -> bool:
        return self.kind in _ROOTED

    def __str__(self) -> str:
        return f"{self.kind}(root={self.root})" if self.rooted else self.kind


_I = np.int64


def _as_index(a: Any, n: int) -> np.ndarray:
    out = np.asarray(a, dtype=_I)
    if out.ndim == 0:
        out = np.full(n, out, dtype=_I)
    return out


class Step(NamedTuple):
    """The transfers of one step, struct-of-arrays; all fields have one entry per transfer."""

    src: np.ndarray
    dst: np.ndarray
    src_slot: np.ndarray
    dst_slot: np.ndarray
    count: np.ndarray
    reduce: np.ndarray

    @classmethod
    def make(
        cls,
        src: Any,
        dst: Any,
        src_slot: Any,
        dst_slot: Any,
        count: Any = 1,
        reduce: Any = False,
    ) -> Step:
        """Build a step from arrays or scalars (scalars are broadcast to the transfer count)."""
        arrays = [x for x in (src, dst, src_slot, dst_slot, count, reduce) if np.ndim(x) > 0]
        n = max((np.size(x) for x in arrays), default=1)
        fields = [_as_index(x, n) for x in (src, dst, src_slot, dst_slot, count)]
        red = np.asarray(reduce, dtype=bool)
        if red.ndim == 0:
            red = np.full(n, bool(red))
        for name, f in zip(cls._fields, [*fields, red], strict=True):
            if f.shape != (n,):
                raise ScheduleError(f"step field {name!r} has shape {f.shape}, expected ({n},)")
        return cls(*fields, red)

    @classmethod
    def empty(cls) -> Step:
        z = np.zeros(0, dtype=_I)
        return cls(z, z, z, z, z, np.zeros(0, dtype=bool))

    @classmethod
    def cat(cls, steps: Sequence[Step]) -> Step:
        """Concatenate the transfers of several pieces that run in the same step."""
        steps = [s for s in steps if len(s.src)]
        if not steps:
            return cls.empty()
        if len(steps) == 1:
            return steps[0]
        return cls(*(np.concatenate(cols) for cols in zip(*steps, strict=True)))

    @property
    def ntransfers(self) -> int:
        return len(self.src)

    def relabel(self, rank_map: np.ndarray) -> Step:
        """The same transfers with every rank ``r`` renamed ``rank_map[r]``."""
        return self._replace(src=rank_map[self.src], dst=rank_map[self.dst])

    def shift_slots(self, offset: int) -> Step:
        return self._replace(src_slot=self.src_slot + offset, dst_slot=self.dst_slot + offset)


class Schedule:
    """A collective-communication schedule: metadata plus a (lazy) sequence of :class:`Step`.

    Args:
        collective: the collective it computes.
        nranks: number of ranks ``p``.
        slot_units: units of data per slot, length ``nslots`` (an ``int`` means that many slots of
            one unit each).
        ndata: how many leading slots are the collective's data buffer; the rest are scratch.
            Defaults to all slots.
        nsteps: number of steps.
        step_fn: ``step_fn(i)`` returns step ``i``; called lazily and possibly more than once.
        name: display name (the algorithm).
        params: the algorithm's parameters, for display only.
        ntransfers: total transfer count, when the builder knows it without iterating.
        max_step_transfers: largest transfer count of any step, when known (memory estimates).
    """

    def __init__(
        self,
        *,
        collective: Collective,
        nranks: int,
        slot_units: int | Sequence[int] | np.ndarray,
        nsteps: int,
        step_fn: Callable[[int], Step],
        ndata: int | None = None,
        name: str = "schedule",
        params: dict[str, Any] | None = None,
        ntransfers: int | None = None,
        max_step_transfers: int | None = None,
    ) -> None:
        if isinstance(slot_units, (int, np.integer)):
            units = np.ones(int(slot_units), dtype=_I)
        else:
            units = np.asarray(slot_units, dtype=_I)
        if units.ndim != 1 or len(units) == 0 or (units <= 0).any():
            raise ScheduleError("slot_units must be a non-empty 1-D array of positive integers")
        if nranks < 1:
            raise ScheduleError(f"nranks must be >= 1, got {nranks}")
        if not 0 <= collective.root < nranks:
            raise ScheduleError(f"root {collective.root} is not a rank of {nranks}")
        self.collective = collective
        self.nranks = int(nranks)
        self.slot_units = units
        self.ndata = len(units) if ndata is None else int(ndata)
        if not 1 <= self.ndata <= len(units):
            raise ScheduleError(f"ndata={self.ndata} out of range for {len(units)} slots")
        self.nsteps = int(nsteps)
        self._step_fn = step_fn
        self.name = name
        self.params = dict(params or {})
        self._ntransfers = ntransfers
        self._max_step_transfers = max_step_transfers
        self._slot_offsets = np.concatenate([[0], np.cumsum(units)]).astype(_I)
        self.uniform_slots = bool((units == units[0]).all())

    # -- construction -----------------------------------------------------------------------
    @classmethod
    def from_steps(
        cls,
        steps: Sequence[Step],
        *,
        collective: Collective,
        nranks: int,
        nslots: int | None = None,
        slot_units: Sequence[int] | np.ndarray | None = None,
        **kwargs: Any,
    ) -> Schedule:
        """A materialized schedule from a list of steps."""
        steps = list(steps)
        units = slot_units if slot_units is not None else nslots
        if units is None:
            raise ScheduleError("give nslots or slot_units")
        return cls(
            collective=collective,
            nranks=nranks,
            slot_units=units,
            nsteps=len(steps),
            step_fn=steps.__getitem__,
            ntransfers=sum(s.ntransfers for s in steps),
            max_step_transfers=max((s.ntransfers for s in steps), default=0),
            **kwargs,
        )

    def replace(self, **changes: Any) -> Schedule:
        """A copy with some constructor arguments changed (steps shared unless ``step_fn`` given)."""
        args: dict[str, Any] = {
            "collective": self.collective,
            "nranks": self.nranks,
            "slot_units": self.slot_units,
            "nsteps": self.nsteps,
            "step_fn": self._step_fn,
            "ndata": self.ndata,
            "name": self.name,
            "params": self.params,
            "ntransfers": self._ntransfers,
            "max_step_transfers": self._max_step_transfers,
        }
        args.update(changes)
        return Schedule(**args)

    def materialize(self) -> Schedule:
        """The same schedule with every step computed once and kept (for small schedules)."""
        return Schedule.from_steps(
            list(self.steps()),
            collective=self.collective,
            nranks=self.nranks,
            slot_units=self.slot_units,
            ndata=self.ndata,
            name=self.name,
            params=self.params,
        )

    # -- access -------------------------------------------------------------------------------
    @property
    def nslots(self) -> int:
        return len(self.slot_units)

    @property
    def kind(self) -> str:
        return self.collective.kind

    @property
    def root(self) -> int:
        return self.collective.root

    def step(self, i: int) -> Step:
        if not 0 <= i < self.nsteps:
            raise IndexError(f"step {i} out of range for a schedule of {self.nsteps} steps")
        return self._step_fn(i)

    def steps(self) -> Iterator[Step]:
        for i in range(self.nsteps):
            yield self._step_fn(i)

    @property
    def ntransfers(self) -> int:
        """Total number of transfers (iterates the steps once if the builder did not say)."""
        if self._ntransfers is None:
            self._count()
        assert self._ntransfers is not None
        return self._ntransfers

    @property
    def max_step_transfers(self) -> int:
        if self._max_step_transfers is None:
            self._count()
        assert self._max_step_transfers is not None
        return self._max_step_transfers

    def _count(self) -> None:
        sizes = [s.ntransfers for s in self.steps()]
        self._ntransfers, self._max_step_transfers = sum(sizes), max(sizes, default=0)

    @property
    def nbytes_units(self) -> int:
        """Units of data that make up the collective's ``nbytes`` (its size convention).

        ``nbytes`` is the vector length for allreduce, broadcast and reduce, the whole gathered
        output for allgather, the whole input for reduce-scatter (as in nccl-tests and Thakur et
        al.), and the per-rank send buffer for alltoall, whose data slots hold input then output.
        """
        data = int(self._slot_offsets[self.ndata])
        return data // 2 if self.kind == "alltoall" else data

    def slot_bytes(self, nbytes: float | np.ndarray) -> np.ndarray:
        """Bytes in each slot for a collective of size ``nbytes``; shape ``(nslots, *shape(nbytes))``."""
        per_unit = np.asarray(nbytes, dtype=np.float64) / self.nbytes_units
        return np.multiply.outer(self.slot_units.astype(np.float64), per_unit)

    def range_units(self, slot: np.ndarray, count: np.ndarray) -> np.ndarray:
        """Units in the slot ranges ``[slot, slot + count)`` (vectorized)."""
        return self._slot_offsets[slot + count] - self._slot_offsets[slot]

    def check_step(self, st: Step, i: int) -> None:
        """Raise :class:`ScheduleError` naming step ``i`` and the transfer if ``st`` is malformed.

        Checks field shapes, ranks in ``[0, p)``, ``count >= 1``, slot ranges inside
        ``[0, nslots)`` (written ``slot <= nslots - count``, so huge values cannot overflow),
        and equal data in each transfer's source and destination ranges. ``O(transfers)``.
        """
        n = len(st.src)
        for name, f in zip(Step._fields, st, strict=True):
            if np.shape(f) != (n,):
                raise ScheduleError(
                    f"step {i}: field {name!r} has shape {np.shape(f)}, expected ({n},)", step=i
                )
        if n == 0:
            return
        p, S = self.nranks, self.nslots
        c = st.count
        if (  # fast path: everything in range (reductions only; the culprit is found below)
            min(st.src.min(), st.dst.min(), st.src_slot.min(), st.dst_slot.min()) >= 0
            and max(st.src.max(), st.dst.max()) < p
            and c.min() >= 1
            and c.max() <= S
            and (st.src_slot <= S - c).all()
            and (st.dst_slot <= S - c).all()
        ):
            if self.uniform_slots:
                return
            bad = self.range_units(st.src_slot, c) != self.range_units(st.dst_slot, c)
            if not bad.any():
                return
            t = int(np.argmax(bad))
            raise ScheduleError(
                f"step {i}: transfer {t}: source slots [{int(st.src_slot[t])}, "
                f"{int(st.src_slot[t] + c[t])}) and destination slots [{int(st.dst_slot[t])}, "
                f"{int(st.dst_slot[t] + c[t])}) hold different amounts of data",
                step=i,
            )
        for name, f in (("src", st.src), ("dst", st.dst)):
            bad = (f < 0) | (f >= p)
            if bad.any():
                t = int(np.argmax(bad))
                raise ScheduleError(
                    f"step {i}: transfer {t}: {name} rank {int(f[t])} out of range [0, {p})", step=i
                )
        bad = (c < 1) | (c > S)
        if bad.any():
            t = int(np.argmax(bad))
            raise ScheduleError(
                f"step {i}: transfer {t}: count {int(c[t])} not in [1, {S}]", step=i
            )
        for name, f in (("src_slot", st.src_slot), ("dst_slot", st.dst_slot)):
            bad = (f < 0) | (f > S - c)
            if bad.any():
                t = int(np.argmax(bad))
                raise ScheduleError(
                    f"step {i}: transfer {t}: {name} range [{int(f[t])}, {int(f[t]) + int(c[t])}) "
                    f"out of range [0, {S})",
                    step=i,
                )

    @property
    def known_max_step_transfers(self) -> int | None:
        """The largest step's transfer count if known without iterating the steps, else None."""
        return self._max_step_transfers

    def estimate_bytes(self) -> dict[str, int]:
        """Peak memory estimates in bytes, without iterating the steps.

        ``verify``: the verifier's state (per slot: a ``uint64`` value, a defined flag and an
        ``int64`` write stamp; per data slot: the input, its mask and the expected result) plus
        one step's transfer arrays; ``step``: one step's transfer arrays (0 when the builder did
        not say how large its steps get). :func:`commsim.verify` and the CLI use this one figure.
        """
        p, S, D = self.nranks, self.nslots, self.ndata
        per_step = (self._max_step_transfers or 0) * 8 * 12
        state = p * S * (8 + 1 + 8) + p * D * (8 + 1 + 8 + 1 + 1)
        return {"verify": state + per_step, "step": per_step}

    def __repr__(self) -> str:
        return (
            f"Schedule({self.name!r}, {self.collective}, nranks={self.nranks}, "
            f"nslots={self.nslots}, nsteps={self.nsteps})"
        )

    def summary(self) -> dict[str, Any]:
        """Plain-data description (for tables and ``--json``)."""
        return {
            "name": self.name,
            "collective": self.kind,
            "root": self.root,
            "nranks": self.nranks,
            "nslots": self.nslots,
            "ndata": self.ndata,
            "nsteps": self.nsteps,
            "ntransfers": self.ntransfers,
            "params": self.params,
        }
