r"""Drop-in collectives: a schedule as a function of a pytree, inside the caller's own program.

The JAX (:mod:`commsim.exec.jax._dropin`) and mpi4jax (:mod:`commsim.exec.mpi._dropin`)
drop-ins share everything but how one schedule call runs, which lives here once:

1. **Flatten** the pytree (``jax.tree_util``); every leaf becomes an array.
2. **Group** the leaves: by dtype (one schedule call moves one dtype; groups in the order of
   their first leaf), then, with ``bucket_bytes``, into **buckets** in pytree order (Horovod's
   tensor fusion, Sergeev & Del Balso 2018): a bucket takes leaves while it stays within
   ``bucket_bytes``; a larger leaf is a bucket of its own.
3. **Choose** the schedule of each group: the given one, or ``tuner.schedule(nbytes)`` with the
   group's size in the collective's ``nbytes`` convention (static under ``jit``; asked once per
   size).
4. **Pack** the group into the schedule's buffer (:mod:`commsim.exec._packing`), **run** the
   schedule (the backend's program), **unpack**, and divide by ``p`` when ``mean=True``.

**Compression** (``compression="fp16" | "bf16" | "int8"``, :mod:`commsim._wire`; reductions of
float leaves only): every message of the schedule travels in that format and is added in the
leaf's dtype after it arrives. With int8, the drop-in keeps an **error-feedback** residual by
default (1-bit SGD, Seide et al. 2014; EF-SGD, Karimireddy et al. 2019): each rank quantises its
own contribution ``x + e`` per chunk before the call, sends that, and keeps ``e = (x + e) -
Q(x + e)`` for its next call, so the part of the gradient quantisation dropped now is added
back later instead of being lost. (The conversions on later hops of the schedule round partial
sums; those errors are bounded, not fed back.) Eagerly the residual lives on the drop-in
(:attr:`TreeCollective.residual`, one per rank); under ``jit`` a traced value cannot be kept, so
thread it yourself: ``out, residual = f.feedback(tree, residual)`` (``residual=None`` the first
time: zeros).

No bucketing (the default) is one schedule call per dtype: the fewest messages and the largest
ones, the best bandwidth, but the call cannot start before the last leaf is computed. Buckets
let a program start reducing early leaves while later ones are still being computed (when the
surrounding program overlaps them, as in a backward pass) and bound the packing buffer, at the
cost of one schedule's latency per bucket; Horovod's default threshold was 64 MiB, 128 MiB since
its v0.21.

Plans (the schedule lowered for a packed count) and packings are cached per schedule and
shapes; the caller's ``jit`` caches the traced program, so a second call with the same shapes
neither traces nor plans again. Every check raises a one-line
:class:`~commsim.errors.ParameterError` at trace time, before any message is sent.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, Protocol

import numpy as np

from commsim._collectives import spec
from commsim._compat import check_dtype
from commsim._ir import Schedule
from commsim._wire import Wire, check_wire
from commsim._wire import wire as as_wire
from commsim.errors import ParameterError
from commsim.exec._layout import Layout
from commsim.exec._lowering import CompileCache
from commsim.exec._packing import Packing, pack, packing, place, take, unpack
from commsim.units import parse_size

__all__ = ["TreeCollective", "Tuner", "buckets"]


class Tuner(Protocol):
    """What a drop-in needs of a tuner table (:mod:`commsim.tuner` makes them)."""

    collective: str
    nranks: int

    def schedule(self, nbytes: int) -> Schedule:
        """The schedule to run for a collective of ``nbytes`` bytes."""
        ...


def buckets(dtypes: list[np.dtype], nbytes: list[int], limit: int | None) -> list[list[int]]:
    """Leaf indices per schedule call: by dtype (first-seen order), then in buckets of at most
    ``limit`` bytes in pytree order (a leaf larger than ``limit`` alone); ``None``: no buckets.

    Examples:
        >>> f4 = np.dtype("float32")
        >>> buckets([f4, f4, f4, f4], [40, 40, 100, 8], 64)
        [[0], [1], [2], [3]]
        >>> buckets([f4, f4, np.dtype("int32"), f4], [16, 16, 4, 16], 32)
        [[0, 1], [3], [2]]
    """
    groups: dict[np.dtype, list[int]] = {}
    for i, dt in enumerate(dtypes):
        groups.setdefault(dt, []).append(i)
    if limit is None:
        return list(groups.values())
    out: list[list[int]] = []
    for idx in groups.values():
        cur: list[int] = []
        size = 0
        for i in idx:
            if cur and size + nbytes[i] > limit:
                out.append(cur)
                cur, size = [], 0
            cur.append(i)
            size += nbytes[i]
        out.append(cur)
    return out


def _bucket_limit(bucket_bytes: int | str | None) -> int | None:
    if bucket_bytes is None:
        return None
    limit = parse_size(bucket_bytes)
    if limit <= 0:
        raise ParameterError(f"bucket_bytes must be positive, got {bucket_bytes!r}")
    return limit


class TreeCollective:
    """A collective on pytrees by a schedule (or a tuner's choice); a backend subclass runs it.

    Subclasses set :attr:`backend` and :attr:`dtypes` and implement :meth:`_size` (the
    communicating group's size, checked at every call), :meth:`_rank` (this rank: an int, or a
    traced index) and :meth:`_run` (the schedule on one rank's ``[nelems]`` buffer, its messages
    in :attr:`wire` format when one is set).
    """

    backend = ""
    dtypes: Collection[str] = ()
    #: pad so that every slot of the buffer is a multiple of this many bytes (1: no more
    #: padding than the schedule's units need; see :func:`commsim.exec._packing.packing`)
    align_bytes = 1

    def __init__(
        self,
        schedule: Schedule | str,
        *,
        collective: str | None = None,
        tuner: Tuner | None = None,
        mean: bool = False,
        tiled: bool = False,
        bucket_bytes: int | str | None = None,
        compression: str | Wire | None = None,
        error_feedback: bool | None = None,
    ) -> None:
        if isinstance(schedule, Schedule):
            if tuner is not None:
                raise ParameterError("give a schedule or schedule='auto' with a tuner, not both")
            name, nranks = schedule.collective, schedule.nranks
        elif isinstance(schedule, str) and schedule == "auto":
            if tuner is None:
                raise ParameterError("schedule='auto' needs tuner= (a commsim.tune table)")
            name, nranks = tuner.collective, int(tuner.nranks)
        else:
            raise ParameterError(
                f"schedule must be a commsim.Schedule or 'auto', got {type(schedule).__name__}"
            )
        if collective is not None and collective != name:
            what = "the tuner table is" if tuner is not None else "the schedule computes"
            raise ParameterError(f"asked for a {collective} but {what} {name}")
        self.collective = name
        self.spec = spec(name)
        self.nranks = nranks
        if mean and not self.spec.reduces:
            raise ParameterError(f"mean=True averages a sum; {name} does not reduce")
        self.schedule = schedule if isinstance(schedule, Schedule) else None
        self.tuner = tuner
        self.mean = bool(mean)
        self.tiled = bool(tiled)
        self.bucket_bytes = _bucket_limit(bucket_bytes)
        self.wire = as_wire(compression)
        check_wire(self.wire, name)
        if error_feedback and self.wire is None:
            raise ParameterError("error_feedback=True needs compression= (fp16, bf16 or int8)")
        #: keep an error-feedback residual (default: with int8 compression)
        self.error_feedback = (
            bool(self.wire.scaled) if error_feedback is None and self.wire else bool(error_feedback)
        )
        #: the eager error-feedback residual (a pytree like the last input; ``None``: zeros)
        self.residual: Any = None
        #: schedule calls traced so far (one per bucket per trace); the no-retrace tests read it
        self.traces = 0
        self._cache = CompileCache()
        self._chosen: dict[int, Schedule] = {}

    # -- the backend's part ------------------------------------------------------------------------
    def _size(self) -> int:
        raise NotImplementedError

    def _rank(self) -> Any:
        raise NotImplementedError

    def _run(self, schedule: Schedule, lay: Layout, buf: Any) -> Any:
        raise NotImplementedError

    # -- the shared part ---------------------------------------------------------------------------
    def __call__(self, tree: Any) -> Any:
        """The collective of every leaf of ``tree`` (see the backend's ``collective``); with
        error feedback, eagerly, the residual kept on the drop-in is added and updated."""
        if not self.error_feedback:
            return self._collective(tree)
        import jax

        if any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves(tree)):
            raise ParameterError(
                "error feedback under jit cannot keep its residual on the drop-in: thread it, "
                "out, residual = f.feedback(tree, residual), or pass error_feedback=False"
            )
        out, self.residual = self.feedback(tree, self.residual)
        return out

    def feedback(self, tree: Any, residual: Any = None) -> tuple[Any, Any]:
        """One call with error feedback (jittable): ``(collective of Q(tree + residual), new
        residual)``, ``Q`` this drop-in's wire format applied to each leaf by chunks and the
        new residual ``tree + residual - Q(tree + residual)`` (``residual=None``: zeros)."""
        import jax
        import jax.numpy as jnp

        if self.wire is None:
            raise ParameterError("feedback() needs compression= (fp16, bf16 or int8)")
        flat, treedef = jax.tree_util.tree_flatten_with_path(tree)
        leaves = [x for _, x in flat]
        for path, x in flat:
            self._dtype(jnp.asarray(x).dtype, jax.tree_util.keystr(path) or "(root)")
        olds = (
            [jnp.zeros_like(x) for x in leaves]
            if residual is None
            else treedef.flatten_up_to(residual)
        )
        wanted = [jnp.asarray(x) + e for x, e in zip(leaves, olds, strict=True)]
        sent = [self.wire.transmit(x.reshape(1, -1), jnp).reshape(x.shape) for x in wanted]
        new = [x - q for x, q in zip(wanted, sent, strict=True)]
        out = self._collective(jax.tree_util.tree_unflatten(treedef, sent))
        return out, jax.tree_util.tree_unflatten(treedef, new)

    def _collective(self, tree: Any) -> Any:
        import jax
        import jax.numpy as jnp

        size = self._size()
        if size != self.nranks:
            raise ParameterError(
                f"{self.collective} {self._what()} is for p={self.nranks} ranks but runs on "
                f"{self._where()} of {size}"
            )
        flat, treedef = jax.tree_util.tree_flatten_with_path(tree)
        names = [jax.tree_util.keystr(path) or "(root)" for path, _ in flat]
        leaves = [jnp.asarray(x) for _, x in flat]
        dtypes = [self._dtype(x.dtype, n) for x, n in zip(leaves, names, strict=True)]
        nbytes = [x.size * x.dtype.itemsize for x in leaves]
        out: list[Any] = list(leaves)
        for idx in buckets(dtypes, nbytes, self.bucket_bytes):
            results = self._group([leaves[i] for i in idx], [names[i] for i in idx])
            for i, r in zip(idx, results, strict=True):
                out[i] = r
        return jax.tree_util.tree_unflatten(treedef, out)

    def _what(self) -> str:
        return "(auto)" if self.schedule is None else repr(self.schedule.algorithm)

    def _where(self) -> str:
        return f"a {self.backend} group"

    def _dtype(self, dtype: Any, name: str) -> np.dtype:
        dt = check_dtype(dtype, f"{self.backend} drop-in", self.dtypes)  # (no x64 switch here)
        if self.wire is not None:
            try:
                check_wire(self.wire, self.collective, dt)
            except ParameterError as e:
                raise ParameterError(f"leaf {name}: {e}") from None
        if self.mean and dt.kind not in "fc" and dt.name != "bfloat16":
            raise ParameterError(
                f"mean=True averages floating-point values; leaf {name} is {dt.name} "
                "(use mean=False and divide yourself)"
            )
        return dt

    def _schedule_for(self, nbytes: int) -> Schedule:
        if self.schedule is not None:
            return self.schedule
        if nbytes not in self._chosen:
            assert self.tuner is not None
            s = self.tuner.schedule(nbytes)
            got = (getattr(s, "collective", None), getattr(s, "nranks", None))
            if not isinstance(s, Schedule) or got != (self.collective, self.nranks):
                raise ParameterError(
                    f"the tuner's schedule for {nbytes} bytes is not a {self.collective} on "
                    f"{self.nranks} ranks (got {type(s).__name__} {got[0]} on {got[1]})"
                )
            self._chosen[nbytes] = s
        return self._chosen[nbytes]

    def _packing(self, schedule: Schedule, leaves: list[Any], names: list[str]) -> Packing:
        shapes = tuple(tuple(x.shape) for x in leaves)
        align = max(1, self.align_bytes // leaves[0].dtype.itemsize)
        return self._cache.get(
            schedule,
            ("packing", shapes, self.tiled, align),
            lambda: packing(schedule, list(shapes), names, self.tiled, align),
        )

    def _group(self, leaves: list[Any], names: list[str]) -> list[Any]:
        """One schedule call on leaves of one dtype."""
        import jax.numpy as jnp

        elems = sum(x.size for x in leaves)
        dt = leaves[0].dtype
        nbytes = self.spec.count_from_input(self.nranks, elems) * dt.itemsize
        schedule = self._schedule_for(nbytes)
        pk = self._packing(schedule, leaves, names)
        if pk.used == 0:  # nothing to move
            return [jnp.zeros(s, dt) for s in pk.out_shapes]
        self.traces += 1
        rank = self._rank()
        buf = self._run(schedule, pk.layout, place(pack(leaves, pk), pk, rank))
        out = unpack(take(buf, pk, rank), pk)
        return [x / self.nranks for x in out] if self.mean else out
