r"""What each collective means, in one place: a :class:`CollectiveSpec` per collective.

A spec owns every convention that depends on *which* collective a schedule computes, so no other
module compares collective names:

* **slots** (the verifier's view): which data slots hold input before (``initial``) and what must
  hold after (``expected``), as arrays ``[nranks, ndata]`` — msccl-tools' pre/post-conditions, as
  arrays, so the verifier scales to thousands of ranks;
* **sizes**: how many of the data slots' units make up ``nbytes`` (``nbytes_divisor``: alltoall's
  data slots hold the input, then the output);
* **elements** (the executors' view): where each rank's user input and output sit in its flat
  buffer (``input_region``, ``output_region``), the direct numpy ``reference``, which ranks'
  outputs the collective defines (``checked_ranks``);
* **numbers**: nccl-tests' bus-bandwidth factor and the Chan et al. 2007 lower-bound factors.

``m`` below is the number of slots per rank-block, ``c`` the collective's element count (its
``nbytes`` in elements).

=============== ======================= ======================== ============== ================
collective      data slots (``ndata``)  before                   input per rank output per rank
=============== ======================= ======================== ============== ================
allreduce       any                     every rank: its vector   ``c``          ``c``: the sum
reduce_scatter  ``p·m``                 every rank: its vector   ``c``          ``c/p``: block r
allgather       ``p·m``                 rank ``r``: block ``r``  ``c/p``        ``c``: all blocks
broadcast       any                     the root: its vector     ``c`` (root's) ``c``
reduce          any                     every rank: its vector   ``c``          ``c`` (root: sum)
alltoall        ``2·p·m``: input, then  input blocks             ``c``          ``c``: block q =
                output                                                          rank q's block r
=============== ======================= ======================== ============== ================

Examples:
    >>> spec("allgather").input_region(4, 8)  # rank r's input: elements [2r, 2r + 2)
    (array([0, 2, 4, 6]), 2)
    >>> spec("allreduce").busbw_factor(8)
    1.75
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable

import numpy as np

from commsim.errors import ScheduleError, UnknownNameError

__all__ = ["COLLECTIVES", "SPECS", "CollectiveSpec", "spec"]

Region = Callable[[int, int], tuple[np.ndarray, int]]  # (nranks, count) -> (offsets[p], length)


@dataclasses.dataclass(frozen=True)
class CollectiveSpec:
    """The conventions of one collective (see the module docstring for the table).

    Attributes:
        name: the collective's name, e.g. ``"allreduce"``.
        summary: one line, for tables.
        rooted: whether it has a root (broadcast, reduce).
        reduces: whether it combines data (the γ term applies).
        block_multiple: ``ndata`` must be a multiple of ``block_multiple · p`` (0: any ``ndata``).
        nbytes_divisor: the data slots hold ``nbytes_divisor × nbytes`` (2 for alltoall).
        busbw_factor: nccl-tests' ``busbw = algbw × busbw_factor(p)``.
        bound_beta, bound_gamma: the Chan et al. 2007 lower bound is
            ``⌈lg p⌉α + bound_beta(p)·nβ + bound_gamma(p)·nγ``.
        input_region, output_region: ``(nranks, count) -> (offsets, length)``: rank ``r``'s user
            input (output) is elements ``[offsets[r], offsets[r] + length)`` of its buffer.
    """

    name: str
    summary: str
    rooted: bool
    reduces: bool
    block_multiple: int
    nbytes_divisor: int
    busbw_factor: Callable[[int], float]
    bound_beta: Callable[[int], float]
    bound_gamma: Callable[[int], float]
    input_region: Region
    output_region: Region
    _initial: Callable[[np.ndarray, int, int], None]  # fills `defined` in place: (defined, m, root)
    _expected: Callable[[np.ndarray, int, int], tuple[np.ndarray, np.ndarray]]  # (init, m, root)
    _reference: Callable[[np.ndarray, int], np.ndarray]  # (inputs [p, in_len], root) -> outputs

    # -- slots: the verifier's pre/post-conditions ---------------------------------------------
    def check_layout(self, nranks: int, ndata: int) -> int:
        """Validate the data-slot count; return ``m``, slots per block (1 where blocks don't apply)."""
        if self.block_multiple == 0:
            return 1
        unit = self.block_multiple * nranks
        if ndata % unit:
            raise ScheduleError(
                f"{self.name} needs a multiple of {unit} data slots "
                f"({self.block_multiple} x {nranks} ranks), the schedule has {ndata}"
            )
        return ndata // unit

    def check_helpers(self, nranks: int, helpers: int, root: int = 0) -> None:
        """Raise :class:`ScheduleError` unless ``helpers`` helper ranks fit this collective.

        Helper ranks (the last ``helpers`` of ``nranks``: dedicated parameter servers, a switch
        that reduces) hold no data: the collective is the same collective over the first
        ``nranks - helpers`` ranks, its **workers**. At least one worker is needed, the root of a
        rooted collective is a worker, and only collectives without per-rank blocks (allreduce,
        broadcast, reduce) take helpers: a block per rank would have to say whose block a helper
        holds.
        """
        if not 0 <= helpers < nranks:
            raise ScheduleError(
                f"helpers must be in [0, {nranks - 1}] (at least one of the {nranks} ranks "
                f"holds data), got {helpers}"
            )
        if helpers and self.block_multiple:
            raise ScheduleError(
                f"{self.name} has a block per rank, so it cannot have helper ranks (ranks that "
                "hold no data); allreduce, broadcast and reduce can"
            )
        if helpers and self.rooted and root >= nranks - helpers:
            raise ScheduleError(
                f"the root {root} of {self.name} must be a worker (a rank below "
                f"{nranks - helpers}), not a helper rank"
            )

    def initial(self, nranks: int, ndata: int, root: int, helpers: int = 0) -> np.ndarray:
        """Boolean ``[nranks, ndata]``: which data slots hold input before the collective
        (on helper ranks, none: see :meth:`check_helpers`)."""
        m = self.check_layout(nranks, ndata)
        defined = np.zeros((nranks, ndata), dtype=bool)
        self._initial(defined[: nranks - helpers], m, root)
        return defined

    def expected(
        self, init: np.ndarray, root: int, helpers: int = 0
    ) -> tuple[np.ndarray, np.ndarray]:
        """Given the input values ``init`` (``[p, ndata]``), the required result and its mask.

        Reductions are sums in ``uint64`` (wrapping), matching the verifier's interpreter. With
        ``helpers``, the result is the collective over the workers' rows alone, and the mask
        requires nothing of the helpers' rows.
        """
        m = self.check_layout(*init.shape)
        if not helpers:
            return self._expected(init, m, root)
        w = init.shape[0] - helpers
        want, mask = np.zeros_like(init), np.zeros(init.shape, dtype=bool)
        want[:w], mask[:w] = self._expected(init[:w], m, root)
        return want, mask

    # -- elements: user arrays in and out of per-rank buffers ----------------------------------
    def nbytes_units(self, data_units: int) -> int:
        """Units of the data slots that make up the collective's ``nbytes``."""
        return data_units // self.nbytes_divisor

    def count_from_input(self, nranks: int, input_length: int) -> int:
        """The collective's element count when each rank's input holds ``input_length``."""
        return input_length * nranks if self.input_region is _own_block else input_length

    def reference(self, inputs: np.ndarray, root: int = 0, helpers: int = 0) -> np.ndarray:
        """The collective computed directly with numpy (never looking at a schedule).

        ``inputs`` is ``[p, input length]``; rows the collective leaves undefined (non-roots of
        reduce, helper ranks, whose inputs take no part) come back as their input.
        Floating-point overflow gives ``inf``, silently.
        """
        with np.errstate(over="ignore", invalid="ignore"):
            if not helpers:
                return self._reference(inputs, root)
            out = np.array(inputs, copy=True)
            w = len(inputs) - helpers
            out[:w] = self._reference(inputs[:w], root)
            return out

    def checked_ranks(self, nranks: int, root: int = 0, helpers: int = 0) -> np.ndarray:
        """Ranks whose output the collective defines (all but reduce's non-roots and helper
        ranks)."""
        return np.array([root]) if self.rooted and self.reduces else np.arange(nranks - helpers)


# ---------------------------------------------------------------------------------------------
# the regions of user data in a rank's buffer of `count` elements (and more, for scratch)


def _whole(p: int, c: int) -> tuple[np.ndarray, int]:
    return np.zeros(p, dtype=np.int64), c


def _own_block(p: int, c: int) -> tuple[np.ndarray, int]:
    return np.arange(p, dtype=np.int64) * (c // p), c // p


def _second_half(p: int, c: int) -> tuple[np.ndarray, int]:
    return np.full(p, c, dtype=np.int64), c


# ---------------------------------------------------------------------------------------------
# pre-conditions (which data slots hold input), post-conditions and direct references


def _all_defined(defined: np.ndarray, m: int, root: int) -> None:
    defined[:] = True


def _root_defined(defined: np.ndarray, m: int, root: int) -> None:
    defined[root] = True


def _own_block_defined(defined: np.ndarray, m: int, root: int) -> None:
    j = np.arange(defined.shape[1])
    defined[j // m, j] = True


def _input_half_defined(defined: np.ndarray, m: int, root: int) -> None:
    defined[:, : defined.shape[0] * m] = True


def _sum(init: np.ndarray) -> np.ndarray:
    return np.broadcast_to(init.sum(axis=0, dtype=np.uint64), init.shape)


def _expect_allreduce(init: np.ndarray, m: int, root: int) -> tuple[np.ndarray, np.ndarray]:
    return _sum(init), np.ones(init.shape, dtype=bool)


def _expect_reduce(init: np.ndarray, m: int, root: int) -> tuple[np.ndarray, np.ndarray]:
    mask = np.zeros(init.shape, dtype=bool)
    mask[root] = True
    return _sum(init), mask


def _expect_reduce_scatter(init: np.ndarray, m: int, root: int) -> tuple[np.ndarray, np.ndarray]:
    mask = np.zeros(init.shape, dtype=bool)
    _own_block_defined(mask, m, root)
    return _sum(init), mask


def _expect_broadcast(init: np.ndarray, m: int, root: int) -> tuple[np.ndarray, np.ndarray]:
    return np.broadcast_to(init[root], init.shape), np.ones(init.shape, dtype=bool)


def _expect_allgather(init: np.ndarray, m: int, root: int) -> tuple[np.ndarray, np.ndarray]:
    j = np.arange(init.shape[1])
    return np.broadcast_to(init[j // m, j], init.shape), np.ones(init.shape, dtype=bool)


def _expect_alltoall(init: np.ndarray, m: int, root: int) -> tuple[np.ndarray, np.ndarray]:
    # output block q of rank r (slots p*m + q*m ...) = input block r of rank q
    p = init.shape[0]
    want = np.zeros_like(init)
    want[:, p * m :] = init[:, : p * m].reshape(p, p, m).transpose(1, 0, 2).reshape(p, p * m)
    mask = np.zeros(init.shape, dtype=bool)
    mask[:, p * m :] = True
    return want, mask


def _ref_allreduce(x: np.ndarray, root: int) -> np.ndarray:
    return np.broadcast_to(x.sum(axis=0, dtype=x.dtype), x.shape).copy()


def _ref_reduce(x: np.ndarray, root: int) -> np.ndarray:
    out = x.copy()
    out[root] = x.sum(axis=0, dtype=x.dtype)
    return out


def _ref_reduce_scatter(x: np.ndarray, root: int) -> np.ndarray:
    p, c = x.shape
    return x.sum(axis=0, dtype=x.dtype).reshape(p, c // p)


def _ref_broadcast(x: np.ndarray, root: int) -> np.ndarray:
    return np.broadcast_to(x[root], x.shape).copy()


def _ref_allgather(x: np.ndarray, root: int) -> np.ndarray:
    p = x.shape[0]
    return np.broadcast_to(x.reshape(-1), (p, x.size)).copy()


def _ref_alltoall(x: np.ndarray, root: int) -> np.ndarray:
    p, c = x.shape
    return x.reshape(p, p, c // p).transpose(1, 0, 2).reshape(p, c).copy()


# ---------------------------------------------------------------------------------------------
# factors: nccl-tests' bus bandwidth, Chan et al.'s lower bounds


def _twice_gather(p: int) -> float:
    return 2.0 * (p - 1) / p


def _gather(p: int) -> float:
    return (p - 1) / p


def _one(p: int) -> float:
    return 1.0


def _zero(p: int) -> float:
    return 0.0


SPECS: dict[str, CollectiveSpec] = {
    s.name: s
    for s in (
        CollectiveSpec(
            "allreduce", "every rank gets the sum", False, True, 0, 1,
            _twice_gather, _twice_gather, _gather, _whole, _whole,
            _all_defined, _expect_allreduce, _ref_allreduce,
        ),
        CollectiveSpec(
            "reduce_scatter", "rank r gets block r of the sum", False, True, 1, 1,
            _gather, _gather, _gather, _whole, _own_block,
            _all_defined, _expect_reduce_scatter, _ref_reduce_scatter,
        ),
        CollectiveSpec(
            "allgather", "every rank gets every block", False, False, 1, 1,
            _gather, _gather, _zero, _own_block, _whole,
            _own_block_defined, _expect_allgather, _ref_allgather,
        ),
        CollectiveSpec(
            "broadcast", "every rank gets the root's vector", True, False, 0, 1,
            _one, _one, _zero, _whole, _whole,
            _root_defined, _expect_broadcast, _ref_broadcast,
        ),
        CollectiveSpec(
            "reduce", "the root gets the sum", True, True, 0, 1,
            _one, _one, _gather, _whole, _whole,
            _all_defined, _expect_reduce, _ref_reduce,
        ),
        CollectiveSpec(
            "alltoall", "rank r's block q goes to rank q", False, False, 2, 2,
            _gather, _gather, _zero, _whole, _second_half,
            _input_half_defined, _expect_alltoall, _ref_alltoall,
        ),
    )
}  # fmt: skip

#: The collectives' names, in the order tables list them.
COLLECTIVES: tuple[str, ...] = tuple(SPECS)


def spec(collective: str) -> CollectiveSpec:
    """The spec of ``collective``, or :class:`UnknownNameError` suggesting the closest names."""
    try:
        return SPECS[collective]
    except (KeyError, TypeError):
        close = difflib.get_close_matches(str(collective), COLLECTIVES, n=3, cutoff=0.5)
        hint = f"did you mean {', '.join(close)}? " if close else ""
        raise UnknownNameError(
            f"unknown collective {collective!r}; {hint}known: {', '.join(COLLECTIVES)}"
        ) from None
