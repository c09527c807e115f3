"""The verifier's inner loop, compiled (numba): apply one step to a flat ``uint64`` state.

It walks slot ranges directly instead of building per-slot index arrays, which is what makes
``verify`` fast at thousands of ranks. It only *detects* faults: on any fault it returns a
nonzero code before the state is touched by the faulty write, and the caller re-runs the step
through the numpy interpreter, which produces the message (one code path owns the wording).

The state is two arrays of ``p · nslots`` entries: the values (``uint64``) and a ``uint16``
**stamp** per slot that says both whether the slot holds data and which step last wrote it
(for the write-race check), so a transfer touches two arrays, not three, and the bookkeeping
costs 2 bytes per slot instead of 9:

* ``0``: the slot holds no data;
* ``2·tag + r`` (``tag >= 1``): written in the step numbered ``tag``, by a reduction if ``r``;
* ``1``: holds data written before the current window of tags (an input, or an old write).

Where the state lies is the caller's choice (``skew``, :func:`at`): rank order (row ``rank``),
or **skewed**, rank ``r``'s slot ``j`` in row ``r - j mod p`` (:func:`skew_rows` moves a state
between the two), in which a ring's step (rank ``r`` sends block ``r - k`` to ``r + 1``) reads one
row and writes the next from end to end instead of touching two rows far apart per transfer.

Tags run ``1 .. MAX_TAG``; when they run out, :func:`retag` turns every nonzero stamp into
``1`` (``O(p · nslots)`` once per ``MAX_TAG`` steps) and numbering starts again.
"""

from __future__ import annotations

import contextlib
import functools
import mmap

import numba
import numpy as np

__all__ = [
    "FAIL",
    "MAX_TAG",
    "OK",
    "RANGE",
    "apply_step",
    "apply_step_fused",
    "at",
    "channel_owners_step",
    "defined",
    "fill_inputs",
    "input_key",
    "retag",
    "scratch",
    "skew_rows",
    "warm_up",
    "zeros",
]

OK = 0
FAIL = -1  # apply_step_fused: the step needs apply_step
RANGE = 4  # a rank, slot or count out of range (the caller's ``check_step`` words it)
MAX_TAG = 2**15 - 1  # 2·tag + 1 fits a uint16


@numba.njit(cache=True, nogil=True, inline="always")
def at(rank, slot, nranks, nslots, skew):  # pragma: no cover
    """The flat index of ``(rank, slot)``: row ``rank - skew·slot mod p`` (:func:`skew_rows`)."""
    row = rank - skew * slot
    if row < 0:
        row += nranks  # a ring's slots are below p: no division
        if row < 0:
            row %= nranks
    return row * nslots + slot


@numba.njit(cache=True, nogil=True)
def apply_step(  # pragma: no cover
    values, stamp, src, dst, src_slot, dst_slot, count, reduce, nranks, nslots, tag, buf, old,
    skew,
):  # fmt: skip
    """Check the step's ranges, then its reads (into ``buf``), then its writes; returns 0, a
    fault code, or ``-moved`` when ``buf`` and ``old`` are shorter than the step's moved slots.

    Codes: 1 read of a slot holding no data, 2 reduce into such a slot, 3 write race,
    :data:`RANGE` a field out of range (as :meth:`commsim.Schedule.check_step` defines it).
    On a fault the state is as before the step (the stamps set by the check are put back from
    ``old``). numpy equivalent: ``_Interpreter.apply`` in ``_verify.py``.
    """
    n = src.shape[0]
    moved = 0
    for t in range(n):
        c = count[t]
        if (
            src[t] < 0 or src[t] >= nranks or dst[t] < 0 or dst[t] >= nranks
            or c < 1 or c > nslots
            or src_slot[t] < 0 or src_slot[t] > nslots - c
            or dst_slot[t] < 0 or dst_slot[t] > nslots - c
        ):  # fmt: skip
            return RANGE
        moved += c
    if moved > buf.shape[0] or moved > old.shape[0]:
        return -moved
    pos = 0
    for t in range(n):
        for o in range(count[t]):
            k = at(src[t], src_slot[t] + o, nranks, nslots, skew)
            if stamp[k] == 0:
                return 1
            buf[pos] = values[k]
            pos += 1
    # detect every fault before writing anything
    mark = np.uint16(tag << 1)
    pos = 0
    code = 0
    for t in range(n):
        r = reduce[t]
        for o in range(count[t]):
            k = at(dst[t], dst_slot[t] + o, nranks, nslots, skew)
            st = stamp[k]
            old[pos] = st
            pos += 1
            if st >> 1 == tag:
                if not (r and st & 1):
                    code = 3
                    break
            elif r and st == 0:
                code = 2
                break
            else:
                stamp[k] = mark | np.uint16(1) if r else mark
        if code:
            break
    if code:  # put the stamps back, latest first (a slot written twice gets its first old one)
        keys = np.empty(pos, dtype=np.int64)
        q = 0
        for t in range(n):
            for o in range(count[t]):
                if q < pos:
                    keys[q] = at(dst[t], dst_slot[t] + o, nranks, nslots, skew)
                    q += 1
        for q in range(pos - 1, -1, -1):
            stamp[keys[q]] = old[q]
        return code
    pos = 0
    for t in range(n):
        if reduce[t]:
            for o in range(count[t]):
                values[at(dst[t], dst_slot[t] + o, nranks, nslots, skew)] += buf[pos]
                pos += 1
        else:
            for o in range(count[t]):
                values[at(dst[t], dst_slot[t] + o, nranks, nslots, skew)] = buf[pos]
                pos += 1
    return 0


@numba.njit(cache=True, nogil=True)
def apply_step_fused(  # pragma: no cover
    values, stamp, src, dst, src_slot, dst_slot, count, reduce, nranks, nslots, tag, oldv, olds,
    skew,
):  # fmt: skip
    """:func:`apply_step` in one pass (read, check and write each slot in turn), for steps whose
    transfers read no slot that the step writes earlier (a ring's do not): returns 0, or -1
    with the state as before the step when the step needs :func:`apply_step` (any fault, such
    a read, a range out of bounds, or scratch ``oldv``/``olds`` shorter than its moved slots).

    One pass keeps a transfer's source and destination lines in cache for the next transfer,
    which on a ring reads beside where this one wrote.
    """
    n = src.shape[0]
    cap = oldv.shape[0]
    mark = np.uint16(tag << 1)
    pos = 0
    ok = True
    for t in range(n):
        c = count[t]
        if (
            src[t] < 0 or src[t] >= nranks or dst[t] < 0 or dst[t] >= nranks
            or c < 1 or c > nslots
            or src_slot[t] < 0 or src_slot[t] > nslots - c
            or dst_slot[t] < 0 or dst_slot[t] > nslots - c
            or pos + c > cap
        ):  # fmt: skip
            ok = False
            break
        r = reduce[t]
        for o in range(c):
            sk = at(src[t], src_slot[t] + o, nranks, nslots, skew)
            ss = stamp[sk]
            if ss == 0 or ss >> 1 == tag:  # no data, or written earlier in this step
                ok = False
                break
            k = at(dst[t], dst_slot[t] + o, nranks, nslots, skew)
            st = stamp[k]
            if st >> 1 == tag:
                if not (r and st & 1):
                    ok = False
                    break
            elif r and st == 0:
                ok = False
                break
            olds[pos] = st
            oldv[pos] = values[k]
            pos += 1
            v = values[sk]
            if r:
                values[k] += v
                stamp[k] = mark | np.uint16(1)
            else:
                values[k] = v
                stamp[k] = mark
        if not ok:
            break
    if ok:
        return 0
    # put the state back, latest write first (a slot written twice gets its first old one)
    keys = np.empty(pos, dtype=np.int64)
    q = 0
    for t in range(n):
        if q >= pos:
            break
        for o in range(count[t]):
            if q >= pos:
                break
            keys[q] = at(dst[t], dst_slot[t] + o, nranks, nslots, skew)
            q += 1
    for q in range(pos - 1, -1, -1):
        values[keys[q]] = oldv[q]
        stamp[keys[q]] = olds[q]
    return FAIL


@numba.njit(cache=True, nogil=True)
def channel_owners_step(  # pragma: no cover
    owner, written, src, dst, src_slot, dst_slot, count, reduce, channel, nslots, undo_k,
    undo_o, undo_w,
):  # fmt: skip
    """IR rule 6 for one step, compiled: ``_ChannelOwners.apply`` in ``_verify.py`` (``owner``:
    ``0`` untouched, ``c + 1`` touched by channel ``c`` only, ``-1`` read by several;
    ``written``: some step wrote it). Every read first (a reduction reads its destination too),
    then every write, in the step's order, as the numpy version does with its arrays. Returns
    0, 1 on a fault with ``owner`` and ``written`` as before the step (the caller words it with
    the numpy version), or ``-slots`` when the undo log (``undo_*``) is shorter than the step's
    ``2 · moved slots`` (3 for a reduction). The caller has checked the fields' ranges."""
    n = src.shape[0]
    need = 0
    for t in range(n):
        need += count[t] * (3 if reduce[t] else 2)
    if need > undo_k.shape[0]:
        return -need
    pos = 0
    bad = False
    for side in range(2):  # reads: the sources, then the destinations of reductions
        for t in range(n):
            if side == 1 and not reduce[t]:
                continue
            mine = channel[t] + 1
            base = src[t] * nslots + src_slot[t] if side == 0 else dst[t] * nslots + dst_slot[t]
            for k in range(base, base + count[t]):
                prev = owner[k]
                if prev == mine:
                    continue  # nothing changes: no undo entry
                if written[k]:
                    bad = True
                    break
                undo_k[pos] = k
                undo_o[pos] = prev
                undo_w[pos] = False
                pos += 1
                owner[k] = mine if prev == 0 else -1
            if bad:
                break
        if bad:
            break
    if not bad:
        for t in range(n):  # the writes
            mine = channel[t] + 1
            base = dst[t] * nslots + dst_slot[t]
            for k in range(base, base + count[t]):
                prev = owner[k]
                if prev != 0 and prev != mine:
                    bad = True
                    break
                undo_k[pos] = k
                undo_o[pos] = prev
                undo_w[pos] = written[k]
                pos += 1
                owner[k] = mine
                written[k] = True
            if bad:
                break
    if not bad:
        return 0
    for q in range(pos - 1, -1, -1):  # put back, latest first
        owner[undo_k[q]] = undo_o[q]
        written[undo_k[q]] = undo_w[q]
    return 1


@numba.njit(cache=True, nogil=True)
def skew_rows(state, direction):  # pragma: no cover
    """Rotate column ``j`` of the ``[p, nslots]`` array ``state`` by ``direction·j`` rows, in
    place: ``direction = 1`` moves ``(rank, j)`` to row ``rank - j mod p`` (the skewed layout,
    :func:`at` with ``skew = 1``), ``-1`` moves it back. Columns go 256 bytes of a row at a
    time through a ``[p, 256 bytes]`` buffer, so every row is read and written whole cache
    lines at a time.
    """
    p, ncols = state.shape
    width = max(16, 256 // state.itemsize)  # 4 cache lines of each row at a time
    buf = np.empty((p, width), dtype=state.dtype)
    first = np.empty(width, dtype=np.int64)
    for j0 in range(0, ncols, width):
        w = min(width, ncols - j0)
        for r in range(p):
            for c in range(w):
                buf[r, c] = state[r, j0 + c]
        for c in range(w):
            first[c] = (direction * (j0 + c)) % p  # row r takes the buffer's row r + first
        for r in range(p):
            for c in range(w):
                src = r + first[c]
                if src >= p:
                    src -= p
                state[r, j0 + c] = buf[src, c]


@numba.njit(cache=True, nogil=True)
def retag(stamp):  # pragma: no cover
    """Forget which step wrote each slot, keep whether it holds data (before tags restart)."""
    one = np.uint16(1)
    for k in range(stamp.shape[0]):
        if stamp[k] != 0:
            stamp[k] = one


def zeros(shape: tuple[int, ...], dtype: type) -> np.ndarray:
    """A zeroed array for the state, in huge pages where the OS gives them on request.

    The kernels touch one row per transfer (a ring's transfer ``r`` writes rank ``r + 1``'s
    row): with 4 KiB pages every access is a TLB miss; 2 MiB pages cover the whole state of
    p = 16,384 (measured: about a quarter less time per transfer). Linux's transparent huge
    pages in ``madvise`` mode need the ``MADV_HUGEPAGE`` hint; elsewhere this is ``np.zeros``.

    The pages are then populated at once (``MADV_POPULATE_WRITE``, Linux 5.14+; ignored where
    refused): the state is written whole anyway, and one call maps it far faster than a fault
    per page as the kernels first touch it (2 GiB on the benchmark VM: 0.34 s, against 4.2 s
    faulted in page by page).
    """
    dt = np.dtype(dtype)
    nbytes = int(np.prod(shape)) * dt.itemsize
    hint = getattr(mmap, "MADV_HUGEPAGE", None)
    if hint is None or nbytes < 2**26:
        return np.zeros(shape, dtype=dt)
    try:
        buf = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        buf.madvise(hint)
    except (OSError, ValueError, AttributeError):
        return np.zeros(shape, dtype=dt)
    with contextlib.suppress(OSError, ValueError):  # older kernels: faulted in when touched
        buf.madvise(_MADV_POPULATE_WRITE)
    return np.frombuffer(buf, dtype=dt).reshape(shape)  # anonymous memory starts zeroed


_MADV_POPULATE_WRITE = getattr(mmap, "MADV_POPULATE_WRITE", 23)  # <linux/mman.h>


def scratch(defined: np.ndarray) -> np.ndarray:
    """The ``stamp`` array of a state whose slots hold data where ``defined`` (any shape)."""
    return defined.astype(np.uint16)


def defined(stamp: np.ndarray) -> np.ndarray:
    """Which slots hold data, from the stamps (for the numpy interpreter's error messages)."""
    return stamp != 0


@functools.cache
def warm_up() -> None:
    """Load (or compile) the kernels once per process, so no verification is charged for it."""
    one = np.ones(1, dtype=np.int64)
    zero = np.zeros(1, dtype=np.int64)
    values, stamp = np.zeros(2, dtype=np.uint64), scratch(np.ones(2, dtype=bool))
    buf, old = np.empty(1, dtype=np.uint64), np.empty(1, dtype=np.uint16)
    no = np.zeros(1, bool)
    apply_step(values, stamp, zero, one, zero, zero, one, no, 2, 1, 1, buf, old, 0)
    apply_step_fused(values, stamp, zero, one, zero, zero, one, no, 2, 1, 2, buf, old, 0)
    retag(stamp)
    owner, written = np.zeros(2, dtype=np.int32), np.zeros(2, dtype=bool)
    undo = np.empty(3, dtype=np.int64), np.empty(3, dtype=np.int64), np.empty(3, dtype=bool)
    channel_owners_step(owner, written, zero, one, zero, zero, one, no, zero, 1, *undo)
    skew_rows(values.reshape(2, 1), 1)
    skew_rows(stamp.reshape(2, 1), 1)
    fill_inputs(np.zeros((2, 2), dtype=np.uint64)[:, :1], np.uint64(1), 1)  # a state's view


_MASK64 = 2**64 - 1


def input_key(seed: int) -> int:
    """The key of seed ``seed``'s inputs: ``seed`` through SplitMix64's output function
    (Steele, Lea & Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014)."""
    z = (int(seed) + 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


@numba.njit(cache=True, nogil=True)
def fill_inputs(out, key, skew):  # pragma: no cover
    """Every rank's random inputs into ``out`` (``[p, ndata]``, a view of the state's data
    slots), in the layout ``skew`` names: row ``row``, column ``j`` holds the input of rank
    ``row + skew·j mod p``, slot ``j``.

    The input of ``(rank, j)`` is SplitMix64's output function of ``key XOR (rank·ndata + j)``
    (:func:`input_key`): a bijection of 64-bit words, so distinct slots get distinct
    pseudo-random words, and a function of the slot alone, so either layout is filled directly
    (no rotation of the state) and the same slot gets the same word in both.
    """
    p, d = out.shape
    k = np.uint64(key)
    golden = np.uint64(0x9E3779B97F4A7C15)
    m1 = np.uint64(0xBF58476D1CE4E5B9)
    m2 = np.uint64(0x94D049BB133111EB)
    s30, s27, s31 = np.uint64(30), np.uint64(27), np.uint64(31)
    step = skew % p if p else 0
    for row in range(p):
        rank = row  # row + skew·j mod p, kept in range by one subtraction (no division)
        for j in range(d):
            z = (k ^ np.uint64(rank * d + j)) + golden
            z = (z ^ (z >> s30)) * m1
            z = (z ^ (z >> s27)) * m2
            out[row, j] = z ^ (z >> s31)
            rank += step
            if rank >= p:
                rank -= p
