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
2. **One message per (step, src, dst, channel).** All transfers of a step with the same ``src``,
   ``dst`` and channel form one message: a model charges one latency for it, and an executor sends
   it as one buffer.
3. **Per-rank, per-channel program order.** A rank starts its step-``s`` work on a channel once it
   has finished its own earlier steps on that channel. A rank with nothing to do in a step does not
   wait for it: there are no global barriers.
4. Reading a slot that holds no data yet (an output slot not yet received, scratch never written)
   is an error, and so is reducing into one.
5. A transfer's source and destination ranges hold the same amount of data (equal
   ``slot_units`` sums); ranks and slot ranges lie inside ``[0, nranks)`` and ``[0, nslots)``.
   :meth:`Schedule.check_step` enforces this for every consumer.
6. **Channels are concurrency.** A transfer may name a **channel** ``c`` in ``[0, nchannels)``
   (``Step.channel``; absent means channel 0). A rank drives its channels at once, each as its own
   port with its own program order (rule 3): NCCL's channels, a torus chip's six links, NVLink
   beside a NIC and MSCCL thread blocks are all this one mechanism, and models and executors read
   it from here, never from an algorithm's name. The *meaning* of a schedule does not change (the
   verifier still runs the steps in order); what channels add is a promise the verifier checks:
   a ``(rank, slot)`` written on one channel is read or written on no other, so any interleaving
   of the channels that keeps each channel's order computes the same result.
7. **Helper ranks hold no data.** The last ``helpers`` ranks (``Schedule.helpers``, default 0)
   are helpers: dedicated parameter servers, a reducing switch. They start with every slot empty
   (rule 4 applies: they must receive before they send), take no part in the collective's
   inputs, and nothing is required of their buffers at the end; the collective is computed over
   the first ``nranks - helpers`` ranks, the **workers**
   (:meth:`commsim.CollectiveSpec.check_helpers` says which collectives allow them). With
   ``in_network`` (``Schedule.in_network``) the helpers are **reducing switches** (in-network
   reduction: NVLink SHARP on an NVSwitch, InfiniBand SHARP): a topology model places them on
   the network's reducing switches, not on hosts, and refuses a network that has none.

A schedule is immutable (a frozen dataclass): :func:`dataclasses.replace` makes changed copies,
which is how the combinators (:mod:`commsim.algorithms._combinators`) build new schedules.

Scale: a ring allreduce on ``p`` ranks has ``2p(p-1)`` transfers (537 M at ``p = 16,384``), so steps
are produced lazily by a function of the step index (:meth:`Schedule.step`), each ``O(p)`` arrays;
:meth:`Schedule.materialize` builds the list form for small schedules (executors, export).

Examples:
    >>> import numpy as np
    >>> from commsim._ir import Schedule, Step
    >>> # two ranks swap-and-add a one-slot vector: an allreduce in one step
    >>> step = Step.make(src=[0, 1], dst=[1, 0], src_slot=0, dst_slot=0, reduce=True)
    >>> s = Schedule.from_steps([step], collective="allreduce", nranks=2, nslots=1)
    >>> s.nsteps, s.ntransfers
    (1, 2)
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import numbers
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from commsim._collectives import CollectiveSpec, spec
from commsim._switch_tiers import switch_tier
from commsim.errors import ScheduleError

__all__ = ["MAX_NRANKS", "MAX_SLOTS", "Schedule", "Step", "is_shared", "share_between_steps"]

_I = np.int64
_MAX_UNITS = 2**62  # total slot units: offsets are int64, and sums of two must not overflow
#: Ranks a schedule may have: 16 M, past the largest machines; O(p) arrays stay around 128 MiB.
MAX_NRANKS = 2**24
#: Slots per rank a schedule may have: past it, the slot table alone takes over 0.5 GiB per copy.
MAX_SLOTS = 2**26


def _as_index(a: Any, n: int, name: str) -> np.ndarray:
    raw = np.asarray(a)
    whole = raw.dtype.kind in "iub" or (
        raw.dtype.kind == "f" and bool(np.all(np.isfinite(raw) & (raw == np.trunc(raw))))
    )
    if not whole:  # 0.5 must not silently become rank 0
        raise ScheduleError(f"step field {name!r} must hold integers, got {raw.dtype} {raw!r:.60}")
    out = raw.astype(_I, copy=False)
    return np.full(n, out, dtype=_I) if out.ndim == 0 else out


_zeros = np.zeros(1024, dtype=_I)
_zeros.flags.writeable = False


def _no_channel(n: int) -> np.ndarray:
    """``n`` zeros (channel 0), a read-only view of one shared buffer: free to make."""
    global _zeros
    if n > len(_zeros):
        _zeros = np.zeros(max(n, 2 * len(_zeros)), dtype=_I)
        _zeros.flags.writeable = False
    return _zeros[:n]


_shared: weakref.WeakValueDictionary[int, np.ndarray] = weakref.WeakValueDictionary()


def share_between_steps(*arrays: np.ndarray) -> None:
    """Declare arrays that a step function hands, unchanged, to many of its steps (a ring's
    ranks, neighbours, counts and flags). Steps are read-only, so a consumer may check what such
    an array holds once and trust it afterwards (:meth:`commsim.models.Hockney.predict` does).

    The arrays stay writeable: numpy's read-only flag would make numba compile every kernel
    again for each mix of read-only and writeable arguments.
    """
    for a in arrays:
        _shared[id(a)] = a
        _bounds.pop(id(a), None)


def is_shared(a: np.ndarray) -> bool:
    """Whether ``a`` itself was declared with :func:`share_between_steps`."""
    return _shared.get(id(a)) is a


_bounds: dict[int, tuple[int, int]] = {}  # (min, max) of declared arrays, keyed as _shared


def shared_bounds(a: np.ndarray) -> tuple[int, int] | None:
    """``(min, max)`` bounding the values of ``a`` where ``a`` is, or is a view of, a non-empty
    integer array declared with :func:`share_between_steps` (a ring's blocks are slices of one
    shared array): found once per declared array, then free; ``None`` for any other array."""
    base = a if is_shared(a) else a.base
    if not isinstance(base, np.ndarray) or not is_shared(base) or base.dtype.kind not in "iu":
        return None
    found = _bounds.get(id(base))
    if found is None:
        if base.size == 0:
            return None
        found = _bounds[id(base)] = (int(base.min()), int(base.max()))
    return found


class _StepFields(NamedTuple):
    src: np.ndarray
    dst: np.ndarray
    src_slot: np.ndarray
    dst_slot: np.ndarray
    count: np.ndarray
    reduce: np.ndarray
    channel: np.ndarray


class Step(_StepFields):
    """The transfers of one step, struct-of-arrays; all fields have one entry per transfer.

    ``channel`` (IR rule 6) may be left out: every transfer is then on channel 0.
    ``docs/writing-schedules.md`` builds a schedule from steps by hand, rule by rule.
    """

    __slots__ = ()

    #: The fields every step file holds (``channel`` is written only when a schedule has several).
    ARRAYS = ("src", "dst", "src_slot", "dst_slot", "count", "reduce")

    def __new__(
        cls,
        src: np.ndarray,
        dst: np.ndarray,
        src_slot: np.ndarray,
        dst_slot: np.ndarray,
        count: np.ndarray,
        reduce: np.ndarray,
        channel: np.ndarray | None = None,
    ) -> Step:
        if channel is None:
            channel = _no_channel(len(src))
        return super().__new__(cls, src, dst, src_slot, dst_slot, count, reduce, channel)

    @property
    def nchannels(self) -> int:
        """One more than the largest channel a transfer names (1 for none)."""
        return int(self.channel.max()) + 1 if len(self.channel) else 1

    def on_channel(self, channel: Any) -> Step:
        """The same transfers on ``channel`` (a number, or one per transfer)."""
        n = len(self.src)
        ch = _as_index(channel, n, "channel")
        if ch.shape != (n,):
            raise ScheduleError(f"step field 'channel' has shape {ch.shape}, expected ({n},)")
        return self._replace(channel=ch)

    @classmethod
    def make(
        cls,
        src: Any,
        dst: Any,
        src_slot: Any,
        dst_slot: Any,
        count: Any = 1,
        reduce: Any = False,
        channel: Any = None,
    ) -> Step:
        """Build a step from arrays or scalars (scalars are broadcast to the transfer count)."""
        arrays = [
            x for x in (src, dst, src_slot, dst_slot, count, reduce, channel) if np.ndim(x) > 0
        ]
        n = max((np.size(x) for x in arrays), default=1)
        names = cls._fields
        fields = [_as_index(x, n, f) for f, x in zip(names, (src, dst, src_slot, dst_slot, count))]
        red = np.asarray(reduce, dtype=bool)
        if red.ndim == 0:
            red = np.full(n, bool(red))
        for name, f in zip(cls.ARRAYS, [*fields, red], strict=True):
            if f.shape != (n,):
                raise ScheduleError(f"step field {name!r} has shape {f.shape}, expected ({n},)")
        step = cls(*fields, red)
        return step if channel is None else step.on_channel(channel)

    @classmethod
    def empty(cls) -> Step:
        z = np.zeros(0, dtype=_I)
        return cls(z, z, z, z, z, np.zeros(0, dtype=bool), z)

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


def _units(slot_units: Any) -> np.ndarray:
    if isinstance(slot_units, (numbers.Integral, np.integer)) and not isinstance(slot_units, bool):
        if not 1 <= slot_units <= MAX_SLOTS:
            raise ScheduleError(
                f"a schedule needs 1 to {MAX_SLOTS:,} slots per rank, got {int(slot_units):,}"
            )
        return np.ones(int(slot_units), dtype=_I)
    units = np.asarray(slot_units)
    if units.dtype.kind not in "iu" and units.size:
        raise ScheduleError("slot_units must be a non-empty 1-D array of positive integers")
    units = units.astype(_I, copy=False)
    if units.ndim != 1 or len(units) == 0 or (units <= 0).any():
        raise ScheduleError("slot_units must be a non-empty 1-D array of positive integers")
    if len(units) > MAX_SLOTS:
        raise ScheduleError(
            f"a schedule needs 1 to {MAX_SLOTS:,} slots per rank, got {len(units):,}"
        )
    if int(units.max()) * len(units) > _MAX_UNITS and sum(map(int, units)) > _MAX_UNITS:
        raise ScheduleError("slot_units add up to more than 2**62 units (their offsets overflow)")
    return units


def _whole_number(name: str, value: Any, lo: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (numbers.Integral, np.integer)):
        raise ScheduleError(f"{name} must be an integer >= {lo}, got {value!r}")
    if value < lo:
        raise ScheduleError(f"{name} must be an integer >= {lo}, got {value}")
    return int(value)


@dataclasses.dataclass(frozen=True, eq=False)
class Schedule:
    """A collective-communication schedule: metadata plus a (lazy) sequence of :class:`Step`.

    To write one by hand (slots, steps, ``reduce``, channels), see ``docs/writing-schedules.md``.

    Immutable: :func:`dataclasses.replace` gives a changed copy (steps shared unless ``step_fn``
    is replaced; then also pass ``ntransfers_hint=None, max_step_transfers_hint=None`` unless the
    transfer counts are unchanged: memory estimates trust the hints).

    Args:
        collective: the collective it computes (a name from :data:`commsim.COLLECTIVES`).
        nranks: number of ranks ``p``.
        slot_units: units of data per slot, length ``nslots`` (an ``int`` means that many slots of
            one unit each).
        nsteps: number of steps.
        step_fn: ``step_fn(i)`` returns step ``i``; called lazily and possibly more than once.
            A schedule read from another format may give it an ``origin(step, rank, slot)``
            attribute returning where in the source that step's transfer on ``rank``'s ``slot``
            came from (or ``None``); :func:`commsim.verify` adds it to its errors. Replacing
            ``step_fn`` drops it, as it should.
        root: the root rank of broadcast and reduce (0 otherwise).
        ndata: how many leading slots are the collective's data buffer; the rest are scratch.
            Defaults to all slots.
        nchannels: how many channels its transfers use (IR rule 6); each transfer's channel is
            in ``[0, nchannels)``.
        algorithm: display name (the registry's algorithm name, or the file's).
        params: the algorithm's parameters, for display only.
        ntransfers_hint: total transfer count, when the builder knows it without iterating.
        max_step_transfers_hint: the largest step's transfer count, when known (memory estimates).
        helpers: how many of the last ranks are helper ranks that hold no data (IR rule 7);
            ``nranks - helpers`` ranks are the workers the collective is computed over.
        in_network: the helper ranks are reducing switches (IR rule 7), not hosts: a topology
            model places them on the network's switches that reduce (node attribute
            ``reduce``, :mod:`commsim.topology`). ``True`` (or ``"server"``): each server's own
            switch (an NVSwitch, NVLink SHARP); ``"fabric"``: the switches between servers (an
            InfiniBand leaf, SHARP). Needs ``helpers > 0``.
    """

    collective: str
    nranks: int
    slot_units: np.ndarray
    nsteps: int
    step_fn: Callable[[int], Step] = dataclasses.field(repr=False)
    root: int = 0
    ndata: int | None = None
    nchannels: int = 1
    algorithm: str = "schedule"
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    ntransfers_hint: int | None = None
    max_step_transfers_hint: int | None = None
    helpers: int = 0
    in_network: bool | str = False

    def __post_init__(self) -> None:
        sp = spec(self.collective)  # UnknownNameError for a bad name
        units = _units(self.slot_units)
        p = _whole_number("nranks", self.nranks, 1)
        if p > MAX_NRANKS:
            raise ScheduleError(f"nranks must be at most {MAX_NRANKS:,}, got {p:,}")
        root = _whole_number("root", self.root, 0)
        if root and not sp.rooted:
            raise ScheduleError(f"{self.collective} has no root (got root={root})")
        if root >= p:
            raise ScheduleError(f"root {root} is not a rank of {p}")
        ndata = len(units) if self.ndata is None else _whole_number("ndata", self.ndata, 1)
        if ndata > len(units):
            raise ScheduleError(f"ndata={ndata} out of range for {len(units)} slots")
        helpers = _whole_number("helpers", self.helpers, 0)
        sp.check_helpers(p, helpers, root)
        set_ = functools.partial(object.__setattr__, self)
        set_("helpers", helpers)
        try:
            tier = switch_tier(self.in_network)
        except ValueError as e:
            raise ScheduleError(f"in_network {e}") from None
        if self.in_network and not helpers:
            raise ScheduleError("in_network needs helper ranks (the reducing switches)")
        set_("in_network", "fabric" if tier == "fabric" else tier == "server")
        set_("slot_units", units)
        set_("nranks", p)
        set_("root", root)
        set_("ndata", ndata)
        set_("nsteps", _whole_number("nsteps", self.nsteps, 0))
        set_("nchannels", _whole_number("nchannels", self.nchannels, 1))
        set_("params", dict(self.params))

    # -- construction -----------------------------------------------------------------------
    @classmethod
    def from_steps(
        cls,
        steps: Sequence[Step],
        *,
        collective: str,
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
            ntransfers_hint=sum(s.ntransfers for s in steps),
            max_step_transfers_hint=max((s.ntransfers for s in steps), default=0),
            **kwargs,
        )

    def materialize(self) -> Schedule:
        """The same schedule with every step computed once and kept (for small schedules)."""
        steps = list(self.steps())
        return dataclasses.replace(
            self,
            step_fn=steps.__getitem__,
            ntransfers_hint=sum(s.ntransfers for s in steps),
            max_step_transfers_hint=max((s.ntransfers for s in steps), default=0),
        )

    # -- access -------------------------------------------------------------------------------
    @property
    def spec(self) -> CollectiveSpec:
        """What the collective means (:class:`commsim.CollectiveSpec`)."""
        return spec(self.collective)

    @property
    def switch_tier(self) -> str | None:
        """Where the in-network helpers sit: ``"server"`` (a server's own switch), ``"fabric"``
        (the switches between servers), ``None`` (no in-network helpers)."""
        if not self.in_network:
            return None
        return "fabric" if self.in_network == "fabric" else "server"

    @property
    def workers(self) -> int:
        """Ranks that hold the collective's data: all but the helper ranks (IR rule 7)."""
        return self.nranks - self.helpers

    @property
    def nslots(self) -> int:
        return len(self.slot_units)

    @functools.cached_property
    def slot_offsets(self) -> np.ndarray:
        """``slot_offsets[j]``: units before slot ``j`` (length ``nslots + 1``)."""
        return np.concatenate([[0], np.cumsum(self.slot_units)]).astype(_I)

    @functools.cached_property
    def uniform_slots(self) -> bool:
        """Whether every slot holds the same number of units."""
        return bool((self.slot_units == self.slot_units[0]).all())

    def step(self, i: int) -> Step:
        if not 0 <= i < self.nsteps:
            raise IndexError(f"step {i} out of range for a schedule of {self.nsteps} steps")
        return self.step_fn(i)

    def steps(self) -> Iterator[Step]:
        for i in range(self.nsteps):
            yield self.step_fn(i)

    @functools.cached_property
    def _counts(self) -> tuple[int, int]:
        if self.ntransfers_hint is not None and self.max_step_transfers_hint is not None:
            return self.ntransfers_hint, self.max_step_transfers_hint
        sizes = [s.ntransfers for s in self.steps()]
        return sum(sizes), max(sizes, default=0)

    @property
    def ntransfers(self) -> int:
        """Total number of transfers (iterates the steps once if the builder did not say)."""
        return self._counts[0]

    @property
    def max_step_transfers(self) -> int:
        """The largest step's transfer count (iterates the steps once if the builder did not say)."""
        return self._counts[1]

    @property
    def nbytes_units(self) -> int:
        """Units of data that make up the collective's ``nbytes`` (its size convention).

        ``nbytes`` is the vector length for allreduce, broadcast and reduce, the whole gathered
        output for allgather, the whole input for reduce-scatter (as in nccl-tests and Thakur et
        al.), and the per-rank send buffer for alltoall (:class:`commsim.CollectiveSpec`).
        """
        return self.spec.nbytes_units(int(self.slot_offsets[self.ndata]))

    def slot_bytes(self, nbytes: float | np.ndarray) -> np.ndarray:
        """Bytes in each slot for a collective of size ``nbytes``; shape ``(nslots, *shape(nbytes))``."""
        per_unit = np.asarray(nbytes, dtype=np.float64) / self.nbytes_units
        return np.multiply.outer(self.slot_units.astype(np.float64), per_unit)

    def range_units(self, slot: np.ndarray, count: np.ndarray) -> np.ndarray:
        """Units in the slot ranges ``[slot, slot + count)`` (vectorized)."""
        return self.slot_offsets[slot + count] - self.slot_offsets[slot]

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
        if self.nchannels > 1 or st.channel.any():
            bad = (st.channel < 0) | (st.channel >= self.nchannels)
            if bad.any():
                t = int(np.argmax(bad))
                raise ScheduleError(
                    f"step {i}: transfer {t}: channel {int(st.channel[t])} out of range "
                    f"[0, {self.nchannels})",
                    step=i,
                )
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

    def __repr__(self) -> str:
        root = f", root={self.root}" if self.spec.rooted else ""
        root += f", helpers={self.helpers}" if self.helpers else ""
        root += f", in_network={self.switch_tier}" if self.in_network else ""
        return (
            f"Schedule({self.algorithm!r}, {self.collective}{root}, nranks={self.nranks}, "
            f"nslots={self.nslots}, nsteps={self.nsteps})"
        )

    @functools.cached_property
    def fingerprint(self) -> str:
        """A digest of what the schedule does: collective, root, ranks, slots and every step's
        transfers in a canonical order (not its name or parameters). Two schedules with the same
        fingerprint are the same program: ring and Rabenseifner allreduce on 2 ranks are.
        ``O(transfers)``: it iterates every step once.

        Examples:
            >>> import commsim
            >>> ring, rab = (
            ...     commsim.build("allreduce", a, nranks=2) for a in ("ring", "rabenseifner")
            ... )
            >>> ring.fingerprint == rab.fingerprint
            True
            >>> ring.fingerprint == commsim.build("allreduce", "ring", nranks=4).fingerprint
            False
        """
        h = hashlib.sha256()
        head = (self.collective, self.root, self.nranks, self.ndata, self.nsteps)
        if self.helpers:  # schedules without helper ranks keep the fingerprint they always had
            head += (self.helpers,)
        if self.in_network:  # where the helpers sit is part of the program
            head += ("in_network",) if self.in_network is True else ("in_network", "fabric")
        h.update(repr(head).encode())
        h.update(self.slot_units.tobytes())
        for st in self.steps():
            ch = st.channel
            order = np.lexsort((st.reduce, st.count, st.dst_slot, st.src_slot, st.dst, st.src, ch))
            h.update(np.int64(len(order)).tobytes())
            cols = [getattr(st, f) for f in Step.ARRAYS]
            if ch.any():  # single-channel schedules keep the fingerprint they always had
                cols.append(ch)
            for f in cols:
                h.update(np.ascontiguousarray(np.asarray(f)[order], dtype=np.int64).tobytes())
        return h.hexdigest()

    def summary(self) -> dict[str, Any]:
        """Plain-data description (for tables and ``--json``)."""
        return {
            "algorithm": self.algorithm,
            "collective": self.collective,
            "root": self.root,
            "nranks": self.nranks,
            "nslots": self.nslots,
            "ndata": self.ndata,
            "nchannels": self.nchannels,
            **({"helpers": self.helpers} if self.helpers else {}),
            **({"in_network": self.in_network} if self.in_network else {}),
            "nsteps": self.nsteps,
            "ntransfers": self.ntransfers,
            "params": self.params,
        }
