"""From transfers to messages to matchings: the one decomposition every consumer shares.

* :func:`messages` groups a step's transfers by ``(src, dst, channel)`` (the IR's "one message
  per ``(step, src, dst, channel)``" rule) and sums their data units; local transfers
  (``src == dst``) are kept apart, since they are memory operations, not messages.
* :func:`port_ranks` names the **port** each message leaves and enters by (IR rule 6): with ``k``
  ports per rank, channel ``c`` of rank ``r`` is the virtual rank ``r·k + c mod k``. A model with
  ``k`` ports keeps one clock per virtual rank, so a rank's channels progress independently and
  its messages on different ports are in flight together; ``k = 1`` is the single-port machine.
* :func:`matchings` splits a step's messages into rounds in which every rank sends at most one
  and receives at most one message. The cost models charge each rank's messages in that order,
  the JAX backend issues one ``ppermute`` per round, and the MPI backend one ``sendrecv`` per
  round, so all three agree on what a step means.
* :func:`link_matchings` is :func:`matchings` for the topology model's link-port rule
  (``port_rule="link"``), whose ports are each port's link queues: a queue sends one message and
  receives one per round (:func:`commsim.models._link_ports.link_queue_messages`).
* :func:`group` is the same grouping for the executors: per message the indices of its
  transfers, and the message rounds from :func:`matchings`.

Rounds are built from **shift classes**: messages with the same ``(dst - src) mod p`` never share
a sender or a receiver, so each class is a matching (two messages of one pair, on two channels
that share a port, go to the class's first and second occurrence: two classes). Classes are taken in increasing shift and
merged into an earlier round when their senders and receivers are disjoint from it (a butterfly
exchange ``r <-> r xor 2^k`` is two shift classes but one round). Only the last
``MERGE_WINDOW`` rounds are tried, which keeps the split ``O(classes)`` for many-to-one steps.
Where that leaves more rounds than the step's degree (the most messages one rank sends or
receives: no split has fewer), and classes × degree is at most :data:`FULL_FIT_WORK`, every
earlier round is tried instead (first fit), and the split with fewer rounds is kept: a switch
that receives a slice from each of ``L`` GPUs in one step (``nvls_tree``) has ``2(L - 1)``
classes whose complements lie ``L - 1`` classes apart, which the window misses for ``L > 9``.
"""

from __future__ import annotations

import itertools
import weakref
from typing import NamedTuple

import numpy as np

from commsim._ir import Schedule, Step

__all__ = [
    "FIRST_FIT_CELLS",
    "FULL_FIT_WORK",
    "MEMO_MESSAGES",
    "MERGE_WINDOW",
    "Grouping",
    "Messages",
    "group",
    "link_matchings",
    "matchings",
    "messages",
    "on_ports",
    "port_messages",
    "port_ranks",
    "remembered",
]

MERGE_WINDOW = 8
#: Most (classes × degree) for which a split above the step's degree is tried again over every
#: round (first fit): each class is checked against at most about ``degree`` rounds.
FULL_FIT_WORK = 2**20
_COMPILED_MIN = 2**16  # keys from which a radix sort (numba) replaces numpy's argsort
_RADIX_MAX_BITS = 32  # ... when they fit in this many bits (four passes)


class Messages(NamedTuple):
    """The messages of one step (``M`` of them) and its local work.

    Attributes:
        src, dst: sender and receiver per message.
        units: data units per message (all its transfers).
        reduce_units: units of its transfers that reduce at the receiver.
        local_rank, local_reduce_units: ranks with local reducing transfers, and their units.
        unique_ports: every rank sends at most one and receives at most one message (on any
            channel), so the step is one round whatever the port count.
        channel: the channel per message.
        local_channel: the channel of each ``local_rank`` entry.
    """

    src: np.ndarray
    dst: np.ndarray
    units: np.ndarray
    reduce_units: np.ndarray
    local_rank: np.ndarray
    local_reduce_units: np.ndarray
    unique_ports: bool
    channel: np.ndarray
    local_channel: np.ndarray


def _max_count(a: np.ndarray) -> int:
    return int(np.bincount(a, minlength=1).max()) if len(a) else 0


def _dense(key: np.ndarray) -> int:
    """The key range ``max + 1`` where a radix sort of ``key`` pays (many keys, none negative,
    at most :data:`_RADIX_MAX_BITS` bits); else 0."""
    if len(key) < _COMPILED_MIN or key.min() < 0:
        return 0
    top = int(key.max()) + 1
    return top if top <= 2**_RADIX_MAX_BITS else 0


def _runs(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A stable sort of ``key`` and the start of each run of equal keys in the sorted order.

    Small integer keys in large numbers are sorted by their digits, not compared
    (:func:`commsim._messages_kernel.counting_order`): the same order, in linear time.
    """
    nkeys = _dense(key)
    if nkeys:
        from commsim import _messages_kernel as kern  # numba: imported on first use

        return kern.counting_order(key, nkeys)
    order = np.argsort(key, kind="stable")
    skey = key[order]
    return order, np.flatnonzero(np.concatenate([[True], skey[1:] != skey[:-1]]))


def messages(step: Step, schedule: Schedule) -> Messages:
    """Group ``step``'s transfers into messages, with their sizes in slot units."""
    src, dst, chan = step.src, step.dst, step.channel
    if schedule.uniform_slots and (step.count == 1).all():
        units = np.full(len(src), schedule.slot_units[0], dtype=np.int64)
    else:
        units = schedule.range_units(step.src_slot, step.count)
    red_units = np.where(step.reduce, units, 0)
    local = src == dst
    if local.any():
        lr = src[local]
        lred = red_units[local]
        keep = lred > 0
        local_rank, local_red, local_chan = lr[keep], lred[keep], chan[local][keep]
        remote = ~local
        src, dst, units, red_units = src[remote], dst[remote], units[remote], red_units[remote]
        chan = chan[remote]
    else:
        local_rank = local_red = local_chan = np.zeros(0, dtype=np.int64)
    p = schedule.nranks
    if _max_count(src) <= 1:  # one transfer per sender: transfers are the messages
        unique = _max_count(dst) <= 1
        return Messages(src, dst, units, red_units, local_rank, local_red, unique, chan, local_chan)
    key = src * p + dst
    if chan.any():
        key = key + chan * (p * p)
    order, starts = _runs(key)
    if len(starts) < len(key):  # some messages of several transfers
        first = order[starts]
        munits = np.add.reduceat(units[order], starts)
        mred = np.add.reduceat(red_units[order], starts)
    else:  # one transfer per message: the sums are the transfers' own units
        first = order
        munits, mred = units[order], red_units[order]
    msrc, mdst, mchan = src[first], dst[first], chan[first]
    unique = _max_count(msrc) <= 1 and _max_count(mdst) <= 1
    return Messages(msrc, mdst, munits, mred, local_rank, local_red, unique, mchan, local_chan)


def port_messages(
    step: Step, schedule: Schedule, ports: int, index: int | None = None
) -> tuple[Messages, list[np.ndarray]]:
    """``step``'s :func:`messages` on ``ports`` ports per rank, and their rounds: senders,
    receivers and local reducers renamed to their ports (:func:`port_ranks`), the rounds the
    :func:`matchings` of those ports (one round when no port is used twice). What every model
    that keeps a clock per port runs on.

    With ``index`` (the step's number in ``schedule``) the answer is remembered for the
    schedule's life, up to :data:`MEMO_MESSAGES` messages per schedule: a schedule predicted
    again (under another model, the same model at other sizes, a what-if sweep) skips the
    grouping and the matching, and its caller may skip checking the step again (a remembered
    step was checked when first seen; ``step_fn`` gives the same step each time). The arrays
    are shared between calls: callers must not write to them.

    Examples:
        >>> import commsim
        >>> s = commsim.algorithms.channels(commsim.build("allreduce", "ring", nranks=4), 2)
        >>> msg, rounds = port_messages(s.step(0), s, 2)
        >>> sorted(msg.src.tolist()), len(rounds)  # rank r's channels are ports 2r and 2r + 1
        ([0, 1, 2, 3, 4, 5, 6, 7], 1)
    """
    memo = _MEMO.setdefault(schedule, _Memo()) if index is not None else None
    if memo is not None:
        hit = memo.steps.get((index, ports))
        if hit is not None:
            return hit
    msg = on_ports(messages(step, schedule), ports)
    if msg.unique_ports:
        out = msg, [np.arange(len(msg.src))]
    else:
        out = msg, matchings(msg.src, msg.dst, schedule.nranks * ports)
    if memo is not None and memo.messages + len(msg.src) <= MEMO_MESSAGES:
        memo.steps[(index, ports)] = out
        memo.messages += len(msg.src)
    return out


def remembered(schedule: Schedule, index: int, ports: int) -> bool:
    """Whether :func:`port_messages` remembers step ``index`` of ``schedule`` on ``ports``
    ports (the step was grouped, matched and checked before)."""
    memo = _MEMO.get(schedule)
    return memo is not None and (index, ports) in memo.steps


class _Memo:
    """One schedule's remembered :func:`port_messages` answers, by ``(step, ports)``."""

    def __init__(self) -> None:
        self.steps: dict[tuple[int, int], tuple[Messages, list[np.ndarray]]] = {}
        self.messages = 0


#: messages remembered per schedule (about 100 bytes each with their rounds): small and medium
#: schedules are predicted again for free; a large one is recomputed, as before
MEMO_MESSAGES = 1 << 20
_MEMO: weakref.WeakKeyDictionary[Schedule, _Memo] = weakref.WeakKeyDictionary()


def on_ports(msg: Messages, ports: int) -> Messages:
    """``msg`` with its senders, receivers and local reducers renamed to their ports
    (:func:`port_ranks`; ``ports = 1``: unchanged)."""
    if ports == 1:
        return msg
    src, dst = port_ranks(msg, ports)
    local = msg.local_rank * ports + msg.local_channel % ports
    return msg._replace(src=src, dst=dst, local_rank=local)


def port_ranks(msg: Messages, ports: int) -> tuple[np.ndarray, np.ndarray]:
    """Each message's sending and receiving port as a virtual rank ``rank·ports + channel mod
    ports`` (``ports = 1``: the ranks themselves).

    Examples:
        >>> import numpy as np
        >>> z = np.zeros(0, dtype=int)
        >>> m = Messages(
        ...     np.array([0, 0]),
        ...     np.array([1, 1]),
        ...     np.ones(2),
        ...     np.zeros(2),
        ...     z,
        ...     z,
        ...     False,
        ...     np.array([0, 1]),
        ...     z,
        ... )
        >>> [v.tolist() for v in port_ranks(m, 2)]  # rank 0's two channels leave by two ports
        [[0, 1], [2, 3]]
    """
    if ports == 1:
        return msg.src, msg.dst
    port = msg.channel % ports
    return msg.src * ports + port, msg.dst * ports + port


class Grouping(NamedTuple):
    """A step's transfers grouped into messages, as the executors lower them.

    Attributes:
        src, dst: sender and receiver per message, messages in ``(src, dst)`` order (as in
            :func:`messages`' general case).
        transfers: per message, the indices of its transfers, in their order in the step (one
            message per ``(src, dst, channel)``).
        rounds: :func:`matchings` of the messages: per round, the indices of its messages.
        local: indices of the local transfers (``src == dst``), in their order in the step.
    """

    src: np.ndarray
    dst: np.ndarray
    transfers: list[np.ndarray]
    rounds: list[np.ndarray]
    local: np.ndarray


def group(
    src: np.ndarray, dst: np.ndarray, nranks: int, channel: np.ndarray | None = None
) -> Grouping:
    """Group transfers ``(src[i], dst[i])`` into messages by ``(src, dst, channel)`` and split
    the rounds (each a matching of ranks, whatever the channels).

    Examples:
        >>> import numpy as np
        >>> g = group(np.array([0, 1, 0, 2]), np.array([1, 0, 1, 2]), 4)
        >>> [t.tolist() for t in g.transfers], [r.tolist() for r in g.rounds], g.local.tolist()
        ([[0, 2], [1]], [[0, 1]], [3])
    """
    remote = np.flatnonzero(src != dst)
    local = np.flatnonzero(src == dst)
    if not len(remote):
        none = np.zeros(0, dtype=np.int64)
        return Grouping(none, none, [], [], local)
    key = src[remote] * nranks + dst[remote]
    if channel is not None and channel.any():
        key = key + channel[remote] * (nranks * nranks)
    order, starts = _runs(key)
    idx = remote[order]
    msrc, mdst = src[idx[starts]], dst[idx[starts]]
    transfers = np.split(idx, starts[1:])
    return Grouping(msrc, mdst, transfers, matchings(msrc, mdst, nranks), local)


def matchings(src: np.ndarray, dst: np.ndarray, nranks: int) -> list[np.ndarray]:
    """Split messages ``(src[i], dst[i])`` into rounds of index arrays.

    In each round every rank sends at most one and receives at most one message. A pair may
    repeat (one message per channel): its ``j``-th occurrence goes to its shift's ``j``-th class.

    Examples:
        >>> import numpy as np
        >>> r = np.arange(4)
        >>> [len(m) for m in matchings(r, r ^ 1, 4)]  # butterfly exchange: one round
        [4]
        >>> [m.tolist() for m in matchings(np.array([1, 2, 3]), np.array([0, 0, 0]), 4)]
        [[2], [1], [0]]
    """
    n = len(src)
    if n == 0:
        return []
    degree = max(_max_count(src), _max_count(dst))  # no split has fewer rounds
    if degree <= 1:
        return [np.arange(n)]
    shift = (dst - src) % nranks
    shift = _occurrence_classes(src, shift, nranks)
    order, starts = _runs(shift)
    classes = [order[a:b] for a, b in itertools.pairwise(np.append(starts, n))]
    rounds = _merge_classes(classes, src, dst, nranks, MERGE_WINDOW)
    if len(rounds) > degree and len(classes) * degree <= FULL_FIT_WORK:
        first_fit = _merge_classes(classes, src, dst, nranks, len(classes))
        rounds = first_fit if len(first_fit) < len(rounds) else rounds
    return rounds


def _merge_classes(
    classes: list[np.ndarray], src: np.ndarray, dst: np.ndarray, nranks: int, window: int
) -> list[np.ndarray]:
    """Rounds of the shift ``classes`` (index arrays), each merged into the latest of the last
    ``window`` rounds whose senders and receivers it does not use (``window`` at least the
    number of classes: the first such round), else a round of its own."""
    rounds: list[list[np.ndarray]] = []
    used: list[tuple[np.ndarray, np.ndarray]] = []
    full = window >= len(classes)
    for group in classes:
        gs, gd = src[group], dst[group]
        placed = False
        if len(group) < nranks:
            tried = (
                range(len(rounds))
                if full
                else range(len(rounds) - 1, max(-1, len(rounds) - 1 - window), -1)
            )
            for k in tried:
                send_used, recv_used = used[k]
                if not send_used[gs].any() and not recv_used[gd].any():
                    rounds[k].append(group)
                    send_used[gs] = True
                    recv_used[gd] = True
                    placed = True
                    break
        if not placed:
            send_used = np.zeros(nranks, dtype=bool)
            recv_used = np.zeros(nranks, dtype=bool)
            send_used[gs] = True
            recv_used[gd] = True
            rounds.append([group])
            used.append((send_used, recv_used))
    return [np.sort(np.concatenate(r)) for r in rounds]


def _occurrence_classes(src: np.ndarray, shift: np.ndarray, nranks: int) -> np.ndarray:
    """``shift`` where every ``(src, shift)`` pair is distinct; else ``shift + j·nranks`` for a
    pair's ``j``-th occurrence (repeats of a pair go to separate classes, in order)."""
    if len(src) > 1:
        pair = src * nranks + (shift + src) % nranks  # (src, dst), as :func:`messages` sorts
        if (pair[1:] > pair[:-1]).all():  # sorted and distinct: no pair repeats
            return shift
    key = shift * nranks + src
    order = np.argsort(key, kind="stable")
    skey = key[order]
    dup = skey[1:] == skey[:-1]
    if not dup.any():
        return shift
    starts = np.flatnonzero(np.concatenate([[True], ~dup]))
    run_start = np.repeat(starts, np.diff(np.concatenate([starts, [len(key)]])))
    occurrence = np.empty(len(key), dtype=np.int64)
    occurrence[order] = np.arange(len(key)) - run_start
    return shift + occurrence * nranks


def link_matchings(
    src: np.ndarray,
    dst: np.ndarray,
    nports: int,
    out_slot: np.ndarray,
    in_slot: np.ndarray,
) -> list[np.ndarray]:
    r"""Split messages into rounds where a port sends at most one message **per link** it
    leaves by and receives at most one per link it enters by.

    Message :math:`i` leaves port ``src[i]`` by the port's host link number ``out_slot[i]`` and
    enters ``dst[i]`` by link number ``in_slot[i]`` (numbers local to the host: ``0 .. D-1``).
    Each (port, link) pair is a virtual port :math:`v = \text{port} \cdot D + \text{slot}`.
    The messages of one ``(out_slot, in_slot)`` pair keep the shift structure of the ports, so
    each such group is split by :func:`matchings`; all groups' rounds, largest first, are then
    merged first fit, each whole, into the first round of all whose virtual ports they do not
    use (compiled: :func:`commsim._messages_kernel.first_fit_rounds`, where its tables fit
    :data:`FIRST_FIT_CELLS`); beyond that, into one of the last ``MERGE_WINDOW`` rounds (as
    :func:`matchings` merges shift classes), else a new round, and where that leaves more rounds
    than the busiest virtual port's messages (and groups × that count is at most
    :data:`FULL_FIT_WORK`), into the first such round of all. Messages that leave
    by distinct links share a round; those that share a link still go one round after another.
    With one link per host (``D = 1``) these are :func:`matchings` exactly.

    Examples:
        >>> import numpy as np
        >>> src, dst = np.array([0, 0]), np.array([1, 2])  # rank 0 sends to ranks 1 and 2
        >>> [len(r) for r in link_matchings(src, dst, 3, np.array([0, 1]), np.zeros(2, int))]
        [2]
        >>> [len(r) for r in link_matchings(src, dst, 3, np.array([0, 0]), np.zeros(2, int))]
        [1, 1]
    """
    if len(src) == 0:
        return []
    width = int(max(out_slot.max(), in_slot.max())) + 1
    if width == 1:
        return matchings(src, dst, nports)
    vsrc, vdst, n = src * width + out_slot, dst * width + in_slot, nports * width
    order, starts = _runs(out_slot * width + in_slot)
    groups = sorted(np.split(order, starts[1:]), key=len, reverse=True)
    if len(groups) == 1:
        return matchings(vsrc, vdst, n)
    pool = [g[r] for g in groups for r in matchings(vsrc[g], vdst[g], n)]
    pool.sort(key=len, reverse=True)  # stable: equal sizes keep their group's order
    compiled = _compiled_first_fit(pool, vsrc, vdst)
    if compiled is not None:
        return compiled
    rounds: list[list[np.ndarray]] = []
    mark = np.zeros((2, n), dtype=bool)
    for idx in pool:
        k = _first_fit(rounds, vsrc, vdst, idx, max(0, len(rounds) - MERGE_WINDOW), mark)
        if k == len(rounds):
            rounds.append([idx])
        else:
            rounds[k].append(idx)
    degree = max(_max_count(vsrc), _max_count(vdst))
    split = [np.sort(np.concatenate(r)) for r in rounds]
    if len(split) > degree and len(pool) * degree <= FULL_FIT_WORK:  # as matchings: all rounds
        first_fit = _merge_classes(pool, vsrc, vdst, n, len(pool))
        split = first_fit if len(first_fit) < len(split) else split
    return split


#: the most cells (virtual ports × rounds, two tables) the compiled first fit of
#: :func:`link_matchings` may start with (twice the busiest port's messages in rounds; the
#: tables grow past it only where first fit needs more rounds); larger steps take the windowed
#: merge
FIRST_FIT_CELLS = 1 << 26


def _compiled_first_fit(
    pool: list[np.ndarray], vsrc: np.ndarray, vdst: np.ndarray
) -> list[np.ndarray] | None:
    """``pool``'s groups of messages merged first fit over **every** round, each group whole
    (:func:`commsim._messages_kernel.first_fit_rounds`), or ``None`` where its tables would
    exceed :data:`FIRST_FIT_CELLS`."""
    idx = np.concatenate(pool)
    ports, compact = np.unique(np.concatenate([vsrc[idx], vdst[idx]]), return_inverse=True)
    degree = max(_max_count(vsrc[idx]), _max_count(vdst[idx]))
    if 2 * len(ports) * 2 * degree > FIRST_FIT_CELLS:
        return None
    from commsim import _messages_kernel as kern  # numba: imported on first use

    ptr = np.concatenate([[0], np.cumsum([len(g) for g in pool])]).astype(np.int64)
    m = len(idx)
    rnd = kern.first_fit_rounds(compact[:m], compact[m:], ptr, len(ports), max(degree, 1))
    order, starts = _runs(rnd)
    return [np.sort(idx[part]) for part in np.split(order, starts[1:])]


def _first_fit(
    rounds: list[list[np.ndarray]],
    vsrc: np.ndarray,
    vdst: np.ndarray,
    idx: np.ndarray,
    start: int,
    mark: np.ndarray,
) -> int:
    """The first of rounds ``start .. start + MERGE_WINDOW - 1`` that uses none of the virtual
    ports of messages ``idx``, else ``len(rounds)`` (a new round)."""
    mark[0, vsrc[idx]] = True
    mark[1, vdst[idx]] = True
    found = len(rounds)
    for k in range(start, min(len(rounds), start + MERGE_WINDOW)):
        if not any(mark[0, vsrc[m]].any() or mark[1, vdst[m]].any() for m in rounds[k]):
            found = k
            break
    mark[0, vsrc[idx]] = False
    mark[1, vdst[idx]] = False
    return found
