"""The verifier: run a schedule on random integers and prove it computes its collective.

Every rank's data slots start with independent random ``uint64`` values; a reducing transfer adds
(wrapping modulo ``2**64``). No rounding is involved, so a chunk reduced twice, a contribution
missed, or a block delivered to the wrong slot all change the result (a false pass needs a
``2**-64`` coincidence). The same pass rejects structural faults: ranks or slots out of range,
two writes to one ``(rank, slot)`` in a step (unless both reduce), and reads of, or reductions into,
a slot that holds no data yet. A schedule with several channels must also keep them independent
(IR rule 6): a ``(rank, slot)`` written on one channel is read or written on no other
(:class:`_ChannelOwners`), so every interleaving of its channels computes the one result checked.
Helper ranks (IR rule 7) start with no data and are held to nothing: the result is checked on the
workers, against the collective over the workers' inputs alone.

When the final state is wrong, the error names the first wrong ``(rank, slot)``, the step that
last wrote it and, for reductions on small schedules, whose contribution is missing or counted
twice (a second pass with one counter per origin rank) and the earliest step where it was first
counted twice or lost, traced back along the transfers that wrote the slot
(:mod:`commsim._verify_trace`).

Cost: one pass over the steps, which are made one at a time and never kept; memory
``10 · p · nslots`` bytes for the state (a ``uint64`` value and a ``uint16`` stamp per slot:
:mod:`commsim._verify_kernel`), one flag per data slot, plus ``O(transfers in a step)``. The
inputs are drawn straight into the state and the expected result is kept as one row where the
collective gives every rank the same (allreduce, allgather, broadcast, ...), so nothing of size
``p · nslots`` exists twice; the input array is drawn again (same seed) only to word an error.
A ring's state is kept skewed (:func:`_layout`), so that its steps walk memory in order. The
inputs are a function of seed, rank and slot (SplitMix64, :func:`commsim._verify_kernel.fill_inputs`),
so a skewed state has them drawn where the layout puts them rather than moved there.
"""

from __future__ import annotations

import dataclasses
import functools
import time

import numpy as np

from commsim._collectives import spec
from commsim._ir import Schedule, Step
from commsim._verify_trace import first_fault
from commsim._verify_trace import per_slot as _per_slot
from commsim.errors import ParameterError, ResourceError, ScheduleError

__all__ = ["MEMORY_LIMIT", "Verified", "memory_estimate", "verify"]

_DIAGNOSE_LIMIT = 20_000_000  # p * nslots * p counters for the contribution-count pass
MEMORY_LIMIT = 12 * 2**30  # bytes of verifier state beyond which verify() refuses
# what the verifier holds, in bytes: per slot a uint64 value and a uint16 stamp (holds data,
# last written when: _verify_kernel); per data slot the pre-condition or the post-condition's
# mask (one at a time) and, at most, an expected value (most collectives' is one row for all
# ranks); per transfer of the largest step its six fields and the kernel's scratch (12 words)
_BYTES_PER_SLOT = 8 + 2
_BYTES_PER_DATA_SLOT = 1  # plus 8 where the expected result is not one shared row
_BYTES_PER_TRANSFER = 12 * 8
_BYTES_PER_CHANNEL_SLOT = 4 + 1  # the channel check's owner and written flag, per slot


def memory_estimate(schedule: Schedule) -> int:
    """Peak bytes :func:`verify` needs for ``schedule``, without iterating its steps.

    ``p · (10 · nslots + ndata)`` bytes of state (``9 · ndata`` more where the collective's
    expected result differs between ranks: alltoall) plus 96 bytes per transfer of the largest
    step (taken as ``p`` when the builder did not say).
    """
    p = schedule.nranks
    step = schedule.max_step_transfers_hint
    per_step = (p if step is None else max(step, p)) * _BYTES_PER_TRANSFER
    per_slot = _BYTES_PER_SLOT + (_BYTES_PER_CHANNEL_SLOT if schedule.nchannels > 1 else 0)
    per_data = _BYTES_PER_DATA_SLOT + (0 if _shared_result(schedule.collective) else 8)
    return p * (schedule.nslots * per_slot + schedule.ndata * per_data) + per_step


@functools.cache
def _shared_result(collective: str) -> bool:
    """Whether the spec's expected result is one row for every rank (a broadcast view), asked
    of the spec on the smallest layout it accepts."""
    sp = spec(collective)
    ndata = 2 * max(sp.block_multiple, 1)
    want, _ = sp.expected(np.zeros((2, ndata), dtype=np.uint64), 0)
    return want.ndim == 2 and want.strides[0] == 0


@dataclasses.dataclass(frozen=True)
class Verified:
    """What a successful verification checked."""

    algorithm: str
    collective: str
    nranks: int
    nsteps: int
    ntransfers: int
    seconds: float


def _where(schedule: Schedule) -> str:
    return f"{schedule.collective} {schedule.algorithm!r} (p={schedule.nranks})"


class _Interpreter:
    """Applies steps to a flat ``[p * nslots, *extra]`` state with the IR's semantics."""

    def __init__(
        self, schedule: Schedule, values: np.ndarray, defined: np.ndarray, track: bool = False
    ) -> None:
        self.s = schedule
        self.S = schedule.nslots
        self.values = values
        self.defined = defined
        self.track = track  # remember the last writer of every slot (for error messages)
        if track:
            self.last_step = np.full(len(defined), -1, dtype=np.int32)
            self.last_src = np.full(len(defined), -1, dtype=np.int32)
        self.writer = np.zeros(len(defined), dtype=np.int64)  # scratch for the race check

    def _fail(self, msg: str, step: int, rank: int | None = None, slot: int | None = None) -> None:
        raise ScheduleError(
            f"{_where(self.s)}: step {step}: {msg}", step=step, rank=rank, slot=slot
        )

    def apply(self, st: Step, i: int, check: bool = True) -> None:
        if len(st.src) == 0:
            return
        if check:
            _check_fields(self.s, st, i)
        src, dst, s_idx, d_idx, red = _per_slot(st)
        sk = src * self.S + s_idx
        dk = dst * self.S + d_idx
        if check:
            self._check_reads(i, sk, dk, src, dst, s_idx, d_idx, red)
        vals = self.values[sk]
        # write-race check in O(writes): every write stamps its index; a write whose stamp was
        # overwritten shares its (rank, slot) with a later write (the stamp's "winner")
        idx = np.arange(len(dk))
        self.writer[dk] = idx
        winner = self.writer[dk]
        lost = winner != idx
        has_dup = bool(lost.any())
        if has_dup and check:
            race = lost & ~(red & red[winner])
            if race.any():
                e = int(np.argmax(race))
                r, sl = int(dst[e]), int(d_idx[e])
                msg = f"two transfers write rank {r} slot {sl} and not both reduce (a write race)"
                self._fail(msg, i, r, sl)
        ow = ~red
        self.values[dk[ow]] = vals[ow]
        if red.any():
            if has_dup:
                np.add.at(self.values, dk[red], vals[red])
            else:
                self.values[dk[red]] += vals[red]
        self.defined[dk] = True
        if self.track:
            self.last_step[dk] = i
            self.last_src[dk] = src

    def _check_reads(self, i: int, sk, dk, src, dst, s_idx, d_idx, red) -> None:
        """Reads of, and reductions into, slots that hold no data yet."""
        ok = self.defined[sk]
        if not ok.all():
            e = int(np.argmin(ok))
            msg = (
                f"rank {int(src[e])} sends slot {int(s_idx[e])}, which holds no data yet "
                f"(to rank {int(dst[e])})"
            )
            self._fail(msg, i, int(src[e]), int(s_idx[e]))
        if red.any():
            ok = self.defined[dk[red]]
            if not ok.all():
                e = int(np.flatnonzero(red)[np.argmin(ok)])
                msg = (
                    f"rank {int(dst[e])} reduces into slot {int(d_idx[e])}, which holds no data yet"
                )
                self._fail(msg, i, int(dst[e]), int(d_idx[e]))


def _initial_state(
    schedule: Schedule, init: np.ndarray, pre: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``(values, defined)``, ``[p, nslots]``: the inputs where the pre-condition puts them."""
    p, S, D = schedule.nranks, schedule.nslots, schedule.ndata
    values = np.zeros((p, S), dtype=np.uint64)
    defined = np.zeros((p, S), dtype=bool)
    values[:, :D][pre] = init[pre]
    defined[:, :D] = pre
    return values, defined


class _ChannelOwners:
    """Which channel owns each ``(rank, slot)``, stored as ``0`` untouched, ``c + 1`` touched by
    channel ``c`` only, ``-1`` read (never written) by several. A write needs the slot untouched
    or its own; a read needs the slot unwritten or written by its own channel. ``O(moved
    slots)`` per step. The tables are zeroed in huge pages where the OS gives them
    (:func:`commsim._verify_kernel.zeros`): a channel's transfer touches one slot per rank, a
    page apart at thousands of slots per rank."""

    def __init__(self, schedule: Schedule) -> None:
        from commsim import _verify_kernel as kern

        self.s = schedule
        size = schedule.nranks * schedule.nslots
        self.owner = kern.zeros((size,), np.int32)
        self.written = kern.zeros((size,), np.bool_)
        self._undo = (np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, bool))

    def check(self, st: Step, i: int, fields: tuple[np.ndarray, ...] | None = None) -> None:
        """:meth:`apply` through the compiled kernel
        (:func:`commsim._verify_kernel.channel_owners_step`, same rules, one pass over the
        moved slots); a fault is worded by :meth:`apply` on the state as before the step.
        The step's ranges must have been checked; ``fields``: its first six fields already
        made writeable for the kernels (:func:`_writeable`), if the caller has them."""
        from commsim import _verify_kernel as kern

        if len(st.src) == 0:
            return
        six = fields if fields is not None else tuple(_writeable(f) for f in st[:6])
        fields = (*six, _writeable(st.channel))
        code = kern.channel_owners_step(
            self.owner, self.written, *fields, self.s.nslots, *self._undo
        )
        if code < 0:
            n = -code
            self._undo = (np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, bool))
            code = kern.channel_owners_step(
                self.owner, self.written, *fields, self.s.nslots, *self._undo
            )
        if code:
            self.apply(st, i)  # raises the error with its message
            raise AssertionError("channel kernel reported a fault the numpy check missed")

    def _fail(self, i: int, key: int, ch: int, stored: int, what: str) -> None:
        r, sl = divmod(int(key), self.s.nslots)
        several = stored == -1
        others = "several other channels" if several else f"channel {stored - 1}"
        raise ScheduleError(
            f"{_where(self.s)}: step {i}: channel {ch} {what} rank {r} slot {sl}, which "
            f"{others} also use{'' if several else 's'}: channels must work on separate "
            f"data (IR rule 6: a slot written on one channel is touched by no other)",
            step=i, rank=r, slot=sl,
        )  # fmt: skip

    def apply(self, st: Step, i: int) -> None:
        """The step's reads, then its writes, with numpy arrays (the kernel's rules; raises
        the error of the first fault)."""
        if len(st.src) == 0:
            return
        n = len(st.count)
        rep = np.repeat(np.arange(n), st.count) if (st.count != 1).any() else np.arange(n)
        offs = np.arange(len(rep)) - (np.cumsum(st.count) - st.count)[rep]
        S, ch = self.s.nslots, st.channel[rep]
        reads = st.src[rep] * S + st.src_slot[rep] + offs
        writes = st.dst[rep] * S + st.dst_slot[rep] + offs
        red = st.reduce[rep]
        keys = np.concatenate([reads, writes[red]])  # a reduction reads its destination too
        kch = np.concatenate([ch, ch[red]]) + 1  # stored form
        owner, written = self.owner, self.written
        prev = owner[keys]
        bad = written[keys] & (prev != kch)
        if bad.any():
            e = int(np.argmax(bad))
            self._fail(i, keys[e], int(kch[e]) - 1, int(prev[e]), "reads")
        new = np.where((prev == 0) | (prev == kch), kch, -1)
        owner[keys] = new
        mixed = owner[keys] != new
        owner[keys[mixed]] = -1
        prev = owner[writes]
        mine = ch + 1
        bad = (prev != 0) & (prev != mine)
        if bad.any():
            e = int(np.argmax(bad))
            self._fail(i, writes[e], int(ch[e]), int(prev[e]), "writes")
        owner[writes] = mine
        mixed = owner[writes] != mine
        if mixed.any():
            e = int(np.argmax(mixed))
            self._fail(i, writes[e], int(ch[e]), int(owner[writes[e]]), "writes")
        written[writes] = True


def _check_fields(schedule: Schedule, st: Step, i: int) -> None:
    """:meth:`Schedule.check_step`, its error prefixed with the schedule."""
    try:
        schedule.check_step(st, i)
    except ScheduleError as e:
        raise ScheduleError(f"{_where(schedule)}: {e}", step=i) from None


def _run_compiled(schedule: Schedule, values: np.ndarray, stamp: np.ndarray, skew: int) -> int:
    """Every step through the compiled kernels; a fault is worded by the numpy interpreter.

    A step goes through the one-pass kernel first and, when it cannot take it (a transfer
    reads what an earlier one of the step wrote, or a fault), through the three-pass one. The
    state is in the layout ``skew`` names (:func:`_layout`); a fault puts it back in rank
    order before the interpreter words it. The kernels check the ranges themselves; :meth:`Schedule.check_step` runs in numpy only where
    it checks more (field shapes, channels, slots of different sizes) or to word a fault.
    """
    from commsim import _verify_kernel as kern

    flat_values, flat_stamp = values.reshape(-1), stamp.reshape(-1)
    buf, old = np.empty(0, dtype=np.uint64), np.empty(0, dtype=np.uint16)
    owners = _ChannelOwners(schedule) if schedule.nchannels > 1 else None
    numpy_check = owners is not None or not schedule.uniform_slots
    p, S = schedule.nranks, schedule.nslots
    ntransfers = tag = 0
    one_pass = 0  # one-pass failures in a row; past _ONE_PASS_TRIES the schedule stops trying
    for i, st in enumerate(schedule.steps()):
        n = len(st.src)
        if n == 0:
            continue
        if numpy_check or any(len(f) != n for f in st) or st.channel.any():
            _check_fields(schedule, st, i)
        fields = tuple(_writeable(f) for f in st[:6])  # one kernel signature, not one per mix
        if owners is not None:
            owners.check(st, i, fields)
        tag += 1
        if tag > kern.MAX_TAG:
            kern.retag(flat_stamp)
            tag = 1
        args = (*fields, p, S, tag)
        code = kern.FAIL
        if one_pass < _ONE_PASS_TRIES:
            code = kern.apply_step_fused(flat_values, flat_stamp, *args, buf, old, skew)
            one_pass = 0 if code == kern.OK else one_pass + 1
        if code != kern.OK:
            code = kern.apply_step(flat_values, flat_stamp, *args, buf, old, skew)
        if code < 0:  # more slots than ever before: grow the scratch and apply
            buf, old = np.empty(-code, dtype=np.uint64), np.empty(-code, dtype=np.uint16)
            code = kern.apply_step(flat_values, flat_stamp, *args, buf, old, skew)
        if code != kern.OK:
            _check_fields(schedule, st, i)  # a range fault is worded here
            _relayout(values, stamp, skew, -1)
            it = _Interpreter(schedule, flat_values, kern.defined(flat_stamp))
            it.apply(st, i)  # the numpy interpreter raises the error with its message
            raise AssertionError(f"verifier kernel reported fault {code} the interpreter missed")
        ntransfers += n
    return ntransfers


def _writeable(a: np.ndarray) -> np.ndarray:
    """``a``, or a writeable copy of a read-only array: numba compiles a kernel anew for every
    mix of read-only and writeable arguments (seconds each in a fresh checkout)."""
    return a if a.flags.writeable else a.copy()


def _check_memory(schedule: Schedule) -> None:
    need = memory_estimate(schedule)
    if need > MEMORY_LIMIT:
        raise ResourceError(
            f"{_where(schedule)}: verifying needs about {need / 2**30:.1f} GiB "
            f"({schedule.nranks} ranks x {schedule.nslots} slots), over the "
            f"{MEMORY_LIMIT / 2**30:.0f} GiB limit"
        )


def verify(schedule: Schedule, *, seed: int = 0, wire: str | None = None) -> Verified:
    """Prove that ``schedule`` computes its collective, or raise :class:`ScheduleError`.

    Args:
        schedule: any schedule.
        seed: seed of the random input data.
        wire: a wire format (``"fp16"``, ``"bf16"``, ``"int8"``): after the exact proof, also
            run the schedule over that wire on random floats and check every result within
            the format's documented error bound (:mod:`commsim._wire_run`).

    Returns:
        A :class:`Verified` record (steps, transfers, time taken); with ``wire``, the
        :class:`commsim._wire_run.WireVerified` record of the compressed check.

    Raises:
        ScheduleError: naming the step, rank and slot at fault (and, for a schedule imported
            from another format, the place in that file: see ``step_fn`` in :class:`Schedule`).
            For a wrong result: the first wrong slot and the step that last wrote it (the
            error's ``step``) and, for a reduction, the earliest step where a contribution was
            counted twice or lost (:mod:`commsim._verify_trace`).

    Examples:
        >>> import commsim
        >>> commsim.verify(commsim.build("allreduce", "ring", nranks=5)).nsteps
        8
    """
    if not isinstance(schedule, Schedule):
        raise ParameterError(
            f"verify expects a commsim.Schedule (e.g. commsim.build(...)), got "
            f"{type(schedule).__name__}"
        )
    try:
        done = _verify(schedule, seed)
        if wire is None:
            return done
        from commsim import _wire, _wire_run

        w = _wire.wire(wire)
        _wire.check_wire(w, schedule.collective)
        return _wire_run.verify(schedule, w, seed=seed)  # type: ignore[return-value]
    except ScheduleError as e:
        where = _origin(schedule, e)
        if where is None:
            raise
        raise ScheduleError(f"{e} ({where})", step=e.step, rank=e.rank, slot=e.slot) from None


def _origin(schedule: Schedule, e: ScheduleError) -> str | None:
    """Where the faulty transfer came from, if the schedule's ``step_fn`` can say (an imported
    file's steps carry ``origin(step, rank, slot) -> str | None``; see :class:`Schedule`)."""
    origin = getattr(schedule.step_fn, "origin", None)
    return origin(e.step, e.rank, e.slot) if callable(origin) else None


def _verify(schedule: Schedule, seed: int) -> Verified:
    from commsim import _verify_kernel as kern  # numba: imported on first use

    kern.warm_up()  # kernel loading is not part of any schedule's verification time
    t0 = time.perf_counter()
    _check_memory(schedule)
    p, D = schedule.nranks, schedule.ndata
    try:
        pre = schedule.spec.initial(p, D, schedule.root, schedule.helpers)
    except ScheduleError as e:
        raise ScheduleError(f"{_where(schedule)}: {e}") from None
    values, stamp = _start_state(schedule, pre, seed)
    del pre
    want, mask = _expected(schedule, values)
    skew = _layout(schedule)
    if skew:
        _skew_start(schedule, values, stamp, seed)
    ntransfers = _run_compiled(schedule, values, stamp, skew)
    bad_at = _final_check(values, stamp, want, mask, skew)
    if bad_at is not None:
        del values, stamp
        r, j = bad_at
        init = _inputs(schedule, seed)
        pre = schedule.spec.initial(p, D, schedule.root, schedule.helpers)
        # a second pass that remembers who last wrote each slot, for the error message
        values, defined = _initial_state(schedule, init, pre)
        it = _Interpreter(schedule, values.reshape(-1), defined.reshape(-1), track=True)
        for i, st in enumerate(schedule.steps()):
            it.apply(st, i, check=False)
        _report(schedule, it, init, pre, mask, r, j)
    seconds = time.perf_counter() - t0
    return Verified(
        schedule.algorithm, schedule.collective, p, schedule.nsteps, ntransfers, seconds
    )


_ONE_PASS_TRIES = 16  # one-pass attempts that fail in a row before a schedule stops trying
# rows of the state handled at once when filling or comparing it: small enough that the
# temporaries come from reused heap memory (64 MiB blocks were mapped and faulted in anew each
# time: 4x slower to draw the inputs on the benchmark machine)
_ROWS_BYTES = 2 * 2**20


def _row_blocks(p: int, ncols: int):
    """Slices of rows of about :data:`_ROWS_BYTES` of ``uint64`` each (bounded temporaries)."""
    rows = max(1, _ROWS_BYTES // (8 * max(ncols, 1)))
    return (slice(r, min(r + rows, p)) for r in range(0, p, rows))


def _inputs(schedule: Schedule, seed: int, out: np.ndarray | None = None) -> np.ndarray:
    """The random input of every data slot, ``[p, ndata]`` ``uint64`` (into ``out`` if given),
    in rank order: a function of seed, rank and slot
    (:func:`commsim._verify_kernel.fill_inputs`)."""
    from commsim import _verify_kernel as kern

    p, D = schedule.nranks, schedule.ndata
    out = np.empty((p, D), dtype=np.uint64) if out is None else out
    kern.fill_inputs(out, np.uint64(kern.input_key(seed)), 0)
    return out


def _start_state(schedule: Schedule, pre: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``(values, stamp)``, ``[p, nslots]``: the inputs where the pre-condition puts them, and
    the kernel's stamps (nonzero: the slot holds data; :mod:`commsim._verify_kernel`)."""
    from commsim import _verify_kernel as kern

    p, S, D = schedule.nranks, schedule.nslots, schedule.ndata
    values = kern.zeros((p, S), np.uint64)
    _inputs(schedule, seed, out=values[:, :D])
    stamp = kern.zeros((p, S), np.uint16)
    for rows in _row_blocks(p, D):
        stamp[rows, :D] = pre[rows]
        if not pre[rows].all():
            values[rows, :D][~pre[rows]] = 0
    return values, stamp


def _skew_start(schedule: Schedule, values: np.ndarray, stamp: np.ndarray, seed: int) -> None:
    """The start state (:func:`_start_state`) put in the skewed layout: the stamps rotated
    (:func:`commsim._verify_kernel.skew_rows`, unless every row is alike), the inputs drawn
    again where the layout puts them (a function of the slot: cheaper than moving them), and
    zeroed where no data is."""
    from commsim import _verify_kernel as kern

    p, D = schedule.nranks, schedule.ndata
    if not _rows_equal(stamp):
        kern.skew_rows(stamp, 1)
    kern.fill_inputs(values[:, :D], np.uint64(kern.input_key(seed)), 1)
    for rows in _row_blocks(p, D):
        empty = stamp[rows, :D] == 0
        if empty.any():
            values[rows, :D][empty] = 0


def _expected(schedule: Schedule, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The spec's post-condition for the inputs now in ``values``, kept apart from them.

    Most collectives' result is one row broadcast to every rank (a view): its row is copied,
    not the ``[p, ndata]`` array; a result that is a view of ``values`` is copied.
    """
    want, mask = schedule.spec.expected(
        values[:, : schedule.ndata], schedule.root, schedule.helpers
    )
    if want.ndim == 2 and want.strides[0] == 0:
        return np.broadcast_to(want[0].copy(), want.shape), mask
    if np.may_share_memory(want, values):
        want = want.copy()
    return want, mask


def _layout(schedule: Schedule) -> int:
    """``1`` where the state is kept **skewed** (rank ``r``'s slot ``j`` in row ``r - j mod p``),
    ``0`` for rank order; asked of the first step.

    A ring's step moves block ``r - k`` from rank ``r`` to ``r + 1``: in rank order every
    transfer touches two rows far apart (a cache miss each, 537 M of them at p = 16,384); skewed,
    the step reads row ``k`` and writes row ``k + 1`` from end to end. The skew pays when the
    first step moves single slots and most of its transfers lie on one diagonal
    (``rank - slot mod p`` the same) on both sides; a transfer of many slots, skewed, would touch
    one row per slot instead, so rank order stays for everything else. Either layout gives the
    same verdict and the same errors (the state is put back in rank order to word one).
    """
    p = schedule.nranks
    if p < 2 or schedule.nsteps == 0:
        return 0
    st = schedule.step(0)
    n = len(st.src)
    if n == 0 or (st.count != 1).any() or min(st.src.min(), st.dst.min()) < 0:
        return 0
    sides = ((st.src, st.src_slot), (st.dst, st.dst_slot))
    on_diagonal = min(int(np.bincount((rank - slot) % p).max()) for rank, slot in sides)
    return int(2 * on_diagonal >= n)


def _relayout(values: np.ndarray, stamp: np.ndarray, skew: int, direction: int) -> None:
    """Into the skewed layout (``direction = 1``) or back to rank order (``-1``), in place;
    nothing when ``skew`` is 0 (:func:`commsim._verify_kernel.skew_rows`)."""
    if not skew:
        return
    from commsim import _verify_kernel as kern

    for state in (values, stamp):
        if not _rows_equal(state):  # equal rows: every rotation of a column leaves it alone
            kern.skew_rows(state, direction)


def _rows_equal(state: np.ndarray) -> bool:
    """Whether every row of ``state`` equals the first (e.g. the stamps of an allreduce's
    start: every rank holds every data slot), compared a block of rows at a time."""
    return all((state[rows] == state[0]).all() for rows in _row_blocks(*state.shape))


def _final_check(
    values: np.ndarray, stamp: np.ndarray, want: np.ndarray, mask: np.ndarray, skew: int
) -> tuple[int, int] | None:
    """:func:`_first_wrong` of the state in its layout. Skewed, a post-condition that is one
    row for every rank and holds on every slot is checked where the state lies (rotating a
    column changes nothing there); otherwise, or to name the first wrong slot, the state goes
    back to rank order first."""
    shared = skew and want.strides[0] == 0 and mask.all()
    if shared and _first_wrong(values, stamp, want, mask) is None:
        return None
    _relayout(values, stamp, skew, -1)
    return _first_wrong(values, stamp, want, mask)


def _first_wrong(
    values: np.ndarray, stamp: np.ndarray, want: np.ndarray, mask: np.ndarray
) -> tuple[int, int] | None:
    """The first ``(rank, slot)`` (row-major) whose final state breaks the post-condition."""
    p, D = mask.shape
    for rows in _row_blocks(p, D):
        bad = mask[rows] & ((values[rows, :D] != want[rows]) | (stamp[rows, :D] == 0))
        if bad.any():
            r, j = (int(x) for x in np.argwhere(bad)[0])
            return rows.start + r, j
    return None


def _report(
    schedule: Schedule,
    it: _Interpreter,
    init: np.ndarray,
    pre: np.ndarray,
    mask: np.ndarray,
    r: int,
    j: int,
) -> None:
    """Raise the error for the wrong result at rank ``r`` slot ``j``, with a diagnosis.

    The error names the final symptom (the step that last wrote the slot, kept as the error's
    ``step``) and, for a reduction small enough (``p · nslots · p <= _DIAGNOSE_LIMIT``), whose
    contribution is missing or counted twice and the earliest step where that went wrong
    (:func:`commsim._verify_trace.first_fault`).
    """
    p, S = schedule.nranks, schedule.nslots
    k = r * S + j
    last = int(it.last_step[k])
    final = schedule.nsteps - 1
    if last < 0:
        raise ScheduleError(
            f"{_where(schedule)}: after the last step, rank {r} slot {j} never received its "
            "result (no transfer ever wrote it)",
            step=final,
            rank=r,
            slot=j,
        )
    where = f"last written at step {last} by a transfer from rank {int(it.last_src[k])}"
    detail = "holds the wrong value"
    spec = schedule.spec
    first = ""
    if spec.reduces and p * S * p <= _DIAGNOSE_LIMIT:
        detail = _count_diagnosis(schedule, pre, r, j) or detail
        fault = first_fault(schedule, pre, mask, r, j)
        if fault is not None:
            first = f"; it first went wrong {fault.when()}: {fault.sentence()}"
    elif not spec.reduces and p * schedule.ndata <= 1_000_000:
        origin = {int(v): (q, s) for (q, s), v in np.ndenumerate(init) if pre[q, s]}
        got = int(it.values[k])
        if got in origin:
            q, s = origin[got]
            detail = f"holds rank {q}'s input slot {s}"
        else:
            detail = "holds a value that is no rank's input (reduced where it should be copied?)"
    raise ScheduleError(
        f"{_where(schedule)}: after the last step, rank {r} slot {j} {detail} ({where}){first}",
        step=last,
        rank=r,
        slot=j,
    )


def _count_diagnosis(schedule: Schedule, pre: np.ndarray, r: int, j: int) -> str | None:
    """Re-run with one counter per origin rank; say whose contribution is missing or doubled."""
    p, S, D = schedule.nranks, schedule.nslots, schedule.ndata
    counts = np.zeros((p, S, p), dtype=np.int64)
    rows, cols = np.nonzero(pre)
    counts[rows, cols, rows] = 1
    defined = np.zeros((p, S), dtype=bool)
    defined[:, :D] = pre
    it = _Interpreter(schedule, counts.reshape(p * S, p), defined.reshape(-1))
    for i, st in enumerate(schedule.steps()):
        it.apply(st, i, check=False)
    c = counts[r, j]
    missing = np.flatnonzero(c == 0)
    extra = np.flatnonzero(c > 1)
    parts = []
    if len(missing):
        parts.append(f"is missing the contribution of rank(s) {_ranks(missing)}")
    if len(extra):
        parts.append(
            "counts the contribution of rank(s) "
            + ", ".join(f"{q} ({int(c[q])} times)" for q in extra[:8])
        )
    return " and ".join(parts) or None


def _ranks(a: np.ndarray) -> str:
    shown = ", ".join(str(int(x)) for x in a[:8])
    return shown + (f" and {len(a) - 8} more" if len(a) > 8 else "")
