r"""Compiled (numba) kernels for :mod:`commsim._messages`: stable orders of small integer keys,
and first-fit rounds (:func:`first_fit_rounds`, the link-port rule's queues).

A step's transfers are grouped into messages by the key ``(src, dst, channel)`` and its
messages into rounds by their shift class; both keys are small non-negative integers (below
``p²·channels`` and ``p·occurrences``). Where the key range is about the size of the array
(``direct``'s ``p·(p-1)`` transfers, keys below ``p²``), a **counting sort** gives the stable
order in linear passes instead of ``numpy``'s ``O(n log n)`` merge sort (at p = 4096 a step of
16.7 M transfers). One counter per key would not stay in cache at ``p²`` keys, so the sort
counts :data:`DIGIT_BITS` bits of the key at a time, least significant first (LSD radix sort:
every pass a stable counting sort). A stable sort's permutation is unique, so the order is the one
``np.argsort(key, kind="stable")`` gives, element for element.

.. math::

    \text{start}(k) = \sum_{j < k} \#\{i : \text{key}_i = j\}, \qquad
    \text{order}[\text{start}(\text{key}_i) + \text{occ}_i] = i

where :math:`\text{occ}_i` is the number of earlier elements with the same key.

References:
    Knuth, *The Art of Computer Programming*, vol. 3, §5.2 ("distribution counting") and
    §5.2.5 (radix sorting).

See Also:
    :func:`commsim._messages.matchings`, :func:`commsim._messages.messages`.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["DIGIT_BITS", "DIGIT_MASK", "counting_order", "first_fit_rounds"]

DIGIT_BITS = 8  # bits sorted per pass: 256 buckets, few enough write streams for the cache
DIGIT_MASK = (1 << DIGIT_BITS) - 1


@numba.njit(cache=True, nogil=True)
def counting_order(key, nkeys):  # pragma: no cover
    """The stable order of ``key`` (values in ``[0, nkeys)``) and the start of each run of
    equal keys in that order: ``(order, starts)``, as ``np.argsort(key, kind="stable")`` and
    the positions where its sorted keys change.

    Least significant digit first, :data:`DIGIT_BITS` bits a pass, each pass a stable counting
    sort whose counters stay in cache (one pass for keys below ``2**DIGIT_BITS``; 8 bits measured faster than 12 on 24-bit keys).
    """
    n = key.shape[0]
    order, skey = np.arange(n), key.astype(np.int64)
    out_order, out_key = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    shift = 0
    while (nkeys - 1) >> shift or shift == 0:
        count = np.zeros((1 << DIGIT_BITS) + 1, dtype=np.int64)
        for i in range(n):
            count[((skey[i] >> shift) & DIGIT_MASK) + 1] += 1
        for d in range(1, count.shape[0]):
            count[d] += count[d - 1]
        for i in range(n):
            d = (skey[i] >> shift) & DIGIT_MASK
            j = count[d]
            out_order[j] = order[i]
            out_key[j] = skey[i]
            count[d] = j + 1
        order, out_order = out_order, order
        skey, out_key = out_key, skey
        shift += DIGIT_BITS
    runs = 1 if n else 0
    for i in range(1, n):
        if skey[i] != skey[i - 1]:
            runs += 1
    starts = np.empty(runs, dtype=np.int64)
    j = 0
    for i in range(n):
        if i == 0 or skey[i] != skey[i - 1]:
            starts[j] = i
            j += 1
    return order, starts


@numba.njit(cache=True, nogil=True)
def first_fit_rounds(vsrc, vdst, ptr, nports, cap):  # pragma: no cover
    """Rounds for groups of messages, each group kept whole: group ``g`` (messages
    ``ptr[g] .. ptr[g+1] - 1``, senders ``vsrc`` and receivers ``vdst`` numbered
    ``0 .. nports - 1``) goes to the first round in which none of its senders sends and none
    of its receivers receives (first fit, groups in the given order; ``cap``: the rounds a
    table starts with, grown as needed). Returns each message's round."""
    ngroups = ptr.shape[0] - 1
    sends = np.zeros((nports, cap), dtype=np.bool_)
    recvs = np.zeros((nports, cap), dtype=np.bool_)
    out = np.empty(vsrc.shape[0], dtype=np.int64)
    for g in range(ngroups):
        r = 0
        while True:
            if r == sends.shape[1]:
                grown_s = np.zeros((nports, 2 * r), dtype=np.bool_)
                grown_r = np.zeros((nports, 2 * r), dtype=np.bool_)
                grown_s[:, :r] = sends
                grown_r[:, :r] = recvs
                sends, recvs = grown_s, grown_r
            free = True
            for i in range(ptr[g], ptr[g + 1]):
                if sends[vsrc[i], r] or recvs[vdst[i], r]:
                    free = False
                    break
            if free:
                break
            r += 1
        for i in range(ptr[g], ptr[g + 1]):
            sends[vsrc[i], r] = True
            recvs[vdst[i], r] = True
            out[i] = r
    return out
