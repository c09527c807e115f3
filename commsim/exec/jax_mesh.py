r"""The JAX mesh backend: a whole schedule as one jitted ``shard_map`` over ``p`` devices.

Rank ``r`` is device ``r`` of a 1-D mesh (axis ``"ranks"``); its buffer is row ``r`` of a
``[p, nelems]`` array sharded over the mesh. The schedule is unrolled at trace time into one
jitted function, so XLA sees (and schedules) every step at once.

Lowering of one step (the IR's semantics, made static):

1. The step's remote transfers are grouped into **messages** by ``(src, dst)`` and the messages
   split into **rounds** by :func:`commsim._messages.matchings` (each rank sends ≤ 1 and receives
   ≤ 1 message per round): **one** ``lax.ppermute`` **per round**. Local transfers
   (``src == dst``) form one extra round without a ``ppermute``.
2. A message's transfers, sorted and merged where contiguous on both sides, are its
   **segments**; segment ``k`` of every message of a round forms a segment column of static
   length ``L_k`` (the longest one). The sender's payload is the concatenation over ``k`` of
   ``lax.dynamic_slice(buf, start_k[me], L_k)``: windows of the buffer, no per-element index
   arrays. Where some device's segment is shorter than ``L_k`` (or absent), its window is shifted
   to stay inside the buffer and the receiver **masks** the write to the real range; only if no
   shift fits is the working buffer padded (one copy in, one out).
3. All payloads of a step are sliced from the pre-step buffer, then all writes are applied
   (the local round's first): ``lax.dynamic_update_slice`` of ``x`` (overwrite) or ``old + x``
   (reduce), so several reductions into one place add up and exchanges work.

Per-device values (window starts, mask bounds, reduce flags) live in one small static table
``[p, ncols]`` (int32) whose row is picked once with ``lax.axis_index``. Cost per round: one
slice (copy) of the payload on the sender, one ``ppermute``, and one read-modify-write of the
destination window on the receiver; masked or mixed segments add one select. The buffer itself
is updated in place: XLA is compiled with region-based copy insertion
(:func:`commsim._compat.compiler_options`), which proves that a step's reads precede its writes
even when the step has several rounds; without it such a step costs two copies of the buffer.

Compiled functions are cached on the backend per (schedule object, count, dtype): a second
``compile`` of the same schedule does not retrace. ``run`` donates its input buffer (the schedule
runs in place, like the reference interpreter: no copy of the buffer per run), so call it as
``buf = run(buf)``; the native collectives do not donate.

:meth:`JaxMeshBackend.native` gives JAX's own collectives on the same buffers: ``psum``
(allreduce), ``psum`` (reduce: every rank gets the sum, the root keeps it), ``psum`` of the root's
data masked to zero elsewhere (broadcast: what JAX programs write; it costs an allreduce),
``psum_scatter(tiled=True)`` (reduce-scatter), ``all_gather(tiled=True)`` (allgather) and
``all_to_all(tiled=True)`` (alltoall). Its ``put`` uploads only the collective's input and its
``get`` puts the result back where the schedule would leave it, so the timed ``run`` is the bare
collective and :func:`commsim.exec.check_outputs` checks both the same way.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import numpy as np

from commsim._compat import check_dtype, compiler_options, shard_map
from commsim._ir import Schedule, Step
from commsim._messages import group
from commsim.errors import CommsimError
from commsim.exec._backend import Compiled
from commsim.exec._layout import Layout
from commsim.exec._lowering import CompileCache, checked_steps, element_ranges, merge_segments

__all__ = ["AXIS", "JaxMeshBackend", "Plan", "plan"]

AXIS = "ranks"
_ZERO = np.int32(0)  # the row index of dynamic slices: int32 like the table, also under x64


# ---------------------------------------------------------------------------------------------
# validate


DTYPES = (
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "complex64",
    "complex128",
    *(f"{k}int{b}" for k in ("", "u") for b in (8, 16, 32, 64)),
)


def _check_dtype(dtype: Any) -> np.dtype:
    return check_dtype(dtype, "jax", DTYPES, jax=True)


# ---------------------------------------------------------------------------------------------
# lower: a static plan (numpy only)


class Segment(NamedTuple):
    """One segment column of a round: each device moves at most one window of ``length``.

    ``send``, ``recv``, ``lo``, ``hi``, ``red`` are columns of :attr:`Plan.table` (``-1``: unused):
    the window start in the sender's and the receiver's buffer, the receiver's mask bounds within
    the window, and its reduce flag (only for ``mode == "mixed"``).
    """

    length: int
    offset: int  # start of this segment in the round's payload
    mode: str  # "set" (overwrite), "add" (reduce) or "mixed" (per-device flag)
    masked: bool
    send: int
    recv: int
    lo: int
    hi: int
    red: int


class Round(NamedTuple):
    """One ``ppermute`` (``perm`` is its ``(src, dst)`` pairs) or the local round (``None``)."""

    perm: tuple[tuple[int, int], ...] | None
    segments: tuple[Segment, ...]
    size: int  # payload elements


@dataclasses.dataclass(frozen=True)
class Plan:
    """A schedule lowered to rounds of windows, for one layout."""

    nranks: int
    nelems: int
    pad: int  # extra elements appended to the working buffer (0 unless windows do not fit)
    steps: tuple[tuple[Round, ...], ...]
    table: np.ndarray  # [p, ncols] int32: per-device window starts, mask bounds, flags

    @property
    def nppermutes(self) -> int:
        return sum(r.perm is not None for st in self.steps for r in st)

    @property
    def nmasked(self) -> int:
        return sum(s.masked for st in self.steps for r in st for s in r.segments)

    def summary(self) -> dict[str, int]:
        return {
            "steps": len(self.steps),
            "ppermutes": self.nppermutes,
            "segments": sum(len(r.segments) for st in self.steps for r in st),
            "masked_segments": self.nmasked,
            "pad": self.pad,
            "table_cols": int(self.table.shape[1]),
        }


class _Raw(NamedTuple):
    """A segment column before windows are placed: one entry per participating message."""

    s: np.ndarray  # sender
    r: np.ndarray  # receiver
    off: np.ndarray  # source start (elements)
    doff: np.ndarray  # destination start
    ln: np.ndarray  # length
    red: np.ndarray  # reduce flag
    length: int  # L, the column's window length


def _columns(groups: list[tuple[int, int, list[tuple]]]) -> list[_Raw]:
    """Segment columns of one round from its messages ``(sender, receiver, segments)``."""
    ncols = max((len(g[2]) for g in groups), default=0)
    cols = []
    for k in range(ncols):
        rows = [(s, r, *segs[k]) for s, r, segs in groups if len(segs) > k]
        s, r, off, ln, doff, red = (np.array(c) for c in zip(*rows, strict=True))
        cols.append(_Raw(s, r, off, doff, ln, red.astype(bool), int(ln.max())))
    return cols


def _step_rounds(step: Step, off: np.ndarray, p: int) -> list[tuple[Any, list[_Raw]]]:
    src, dst, sa, ln, da, red = element_ranges(step, off)
    rounds: list[tuple[Any, list[_Raw]]] = []
    g = group(src, dst, p)
    for rnd in g.rounds:
        groups = [
            (int(g.src[m]), int(g.dst[m]), merge_segments(sa[t], ln[t], da[t], red[t]))
            for m in rnd.tolist()
            for t in [g.transfers[m]]
        ]
        perm = tuple((s, r) for s, r, _ in groups)
        rounds.append((perm, _columns(groups)))
    local = g.local
    if len(local):
        groups = []
        for d in np.unique(src[local]).tolist():
            t = local[src[local] == d]
            groups.append((d, d, merge_segments(sa[t], ln[t], da[t], red[t])))
        # first: its writes then come first, and XLA, which fuses a local payload's read into
        # its write, sees every read of the buffer before any write of the step
        rounds.insert(0, (None, _columns(groups)))
    return rounds


def _shifts(raw: _Raw, n: int) -> np.ndarray | None:
    """Per-entry window shifts keeping both windows inside ``[0, n)``, or ``None`` if impossible."""
    lo = np.maximum(0, np.maximum(raw.off, raw.doff) + raw.length - n)
    hi = np.minimum(raw.length - raw.ln, np.minimum(raw.off, raw.doff))
    return lo if (lo <= hi).all() else None


def plan(schedule: Schedule, layout: Layout) -> Plan:
    """Lower ``schedule`` for ``layout`` into rounds of windows (no JAX needed).

    Examples:
        >>> import commsim
        >>> from commsim.exec import layout
        >>> s = commsim.build("allreduce", "ring", nranks=4)
        >>> pl = plan(s, layout(s, 400))
        >>> pl.nppermutes, pl.nmasked, pl.pad  # one full-cycle ppermute per step, no masks
        (6, 0, 0)
    """
    p, n = schedule.nranks, layout.nelems
    raw_steps = [_step_rounds(st, layout.offsets, p) for _, st in checked_steps(schedule)]
    pad = 0
    for rounds in raw_steps:
        for _, cols in rounds:
            for c in cols:
                if _shifts(c, n) is None:
                    pad = max(pad, int((np.maximum(c.off, c.doff) + c.length - n).max()))
    table: list[np.ndarray] = []

    def column(values: np.ndarray, at: np.ndarray) -> int:
        col = np.zeros(p, dtype=np.int64)
        col[at] = values
        table.append(col)
        return len(table) - 1

    steps = []
    for rounds in raw_steps:
        out = []
        for perm, cols in rounds:
            receivers = {r for _, r in perm} if perm is not None else set(range(p))
            segs, offset = [], 0
            for c in cols:
                shift = _shifts(c, n + pad)
                assert shift is not None
                full = (c.ln == c.length).all()
                if c.red.all():
                    mode = "add"
                    # non-receivers of a ppermute get zeros: adding them is harmless
                    masked = not full or set(c.r.tolist()) != receivers
                else:
                    mode = "set" if not c.red.any() else "mixed"
                    masked = not full or len(c.r) < p
                lo = hi = red = -1
                if masked:
                    lo = column(shift, c.r)
                    hi = column(shift + c.ln, c.r)
                if mode == "mixed":
                    red = column(c.red.astype(np.int64), c.r)
                send = column(c.off - shift, c.s)
                recv = column(c.doff - shift, c.r)
                segs.append(Segment(c.length, offset, mode, masked, send, recv, lo, hi, red))
                offset += c.length
            out.append(Round(perm, tuple(segs), offset))
        steps.append(tuple(out))
    if n + pad >= 2**31:
        raise CommsimError(f"buffers of {n + pad} elements are too large for the jax backend")
    tab = np.stack(table, axis=1) if table else np.zeros((p, 1), dtype=np.int64)
    return Plan(p, n, pad, tuple(steps), tab.astype(np.int32))


# ---------------------------------------------------------------------------------------------
# run: the traced program


def _lower(pl: Plan, on_trace: Any) -> Any:
    """The per-device program of plan ``pl`` (called inside ``shard_map``)."""
    import jax.numpy as jnp
    from jax import lax

    def body(x: Any) -> Any:
        on_trace()
        b = x  # [1, nelems]: kept 2-D so that the output aliases the donated input
        if pl.pad:
            b = jnp.pad(b, ((0, 0), (0, pl.pad)))
        row = jnp.asarray(pl.table)[lax.axis_index(AXIS)]
        for rounds in pl.steps:
            if not rounds:
                continue
            # every payload of the step from the pre-step buffer ...
            payloads = []
            for rnd in rounds:
                parts = [
                    lax.dynamic_slice(b, (_ZERO, row[s.send]), (1, s.length)) for s in rnd.segments
                ]
                payload = parts[0] if len(parts) == 1 else jnp.concatenate(parts, axis=1)
                if rnd.perm is not None:
                    payload = lax.ppermute(payload, AXIS, list(rnd.perm))
                payloads.append(payload)
            payloads, b = lax.optimization_barrier((payloads, b))
            # ... then every write
            for rnd, payload in zip(rounds, payloads, strict=True):
                for s in rnd.segments:
                    v = (
                        payload
                        if len(rnd.segments) == 1
                        else payload[:, s.offset : s.offset + s.length]
                    )
                    start = row[s.recv]
                    if s.mode != "set" or s.masked:
                        old = lax.dynamic_slice(b, (_ZERO, start), (1, s.length))
                        if s.mode == "add":
                            v = old + v
                        elif s.mode == "mixed":
                            v = jnp.where(row[s.red] != 0, old + v, v)
                        if s.masked:
                            i = lax.broadcasted_iota(np.int32, (1, s.length), 1)
                            v = jnp.where((i >= row[s.lo]) & (i < row[s.hi]), v, old)
                    b = lax.dynamic_update_slice(b, v, (_ZERO, start))
        return b[:, : pl.nelems] if pl.pad else b

    return body


def _native_body(collective: str, root: int) -> Any:
    """The body of JAX's own collective on a ``[1, input length]`` shard (see ``_NATIVE``)."""
    import jax.numpy as jnp
    from jax import lax

    ops = {
        "allreduce": lambda v: lax.psum(v, AXIS),
        "reduce": lambda v: lax.psum(v, AXIS),
        "broadcast": lambda v: lax.psum(
            jnp.where(lax.axis_index(AXIS) == root, v, jnp.zeros_like(v)), AXIS
        ),
        "reduce_scatter": lambda v: lax.psum_scatter(v, AXIS, scatter_dimension=0, tiled=True),
        "allgather": lambda v: lax.all_gather(v, AXIS, axis=0, tiled=True),
        "alltoall": lambda v: lax.all_to_all(v, AXIS, 0, 0, tiled=True),
    }
    op = ops[collective]
    return lambda x: op(x.reshape(-1)).reshape(1, -1)


_NATIVE_NAMES = {
    "allreduce": "lax.psum",
    "reduce": "lax.psum",
    "broadcast": "lax.psum (masked)",
    "reduce_scatter": "lax.psum_scatter",
    "allgather": "lax.all_gather",
    "alltoall": "lax.all_to_all",
}


# ---------------------------------------------------------------------------------------------
# register: the backend object


class JaxMeshBackend:
    """Runs schedules on ``p`` JAX devices (the first ``p`` of ``devices``, default all).

    Args:
        devices: the devices to use, in rank order; ``None``: ``jax.devices()``.
        donate: donate the input buffer to ``run`` (in place, no copy of the buffer per run).
    """

    name = "jax"

    check_dtype = staticmethod(_check_dtype)

    def __init__(self, devices: Any = None, donate: bool = True) -> None:
        self._devices = None if devices is None else list(devices)
        self.donate = donate
        self.traces = 0  # how many times a program was traced (the no-recompile tests read it)
        self._cache = CompileCache()
        self._meshes: dict[int, Any] = {}

    # -- validate --------------------------------------------------------------------------
    def unavailable(self) -> str | None:
        try:
            import jax  # noqa: F401
        except ImportError as e:
            return f"JAX cannot be imported ({e}); install it with `pip install jax`"
        return None

    def _mesh(self, p: int) -> Any:
        if p in self._meshes:
            return self._meshes[p]
        import jax
        from jax.sharding import Mesh

        devs = self._devices if self._devices is not None else jax.devices()
        if self._devices is not None and len(devs) != p:
            raise CommsimError(
                f"schedule has p={p} ranks but the jax backend was given {len(devs)} devices"
            )
        if len(devs) < p:
            raise CommsimError(
                f"schedule has p={p} ranks but only {len(devs)} JAX devices are visible "
                f"(on CPU, set XLA_FLAGS=--xla_force_host_platform_device_count={p} "
                "before JAX starts)"
            )
        self._meshes[p] = Mesh(np.array(devs[:p]), (AXIS,))
        return self._meshes[p]

    # -- lower and run ---------------------------------------------------------------------
    def _build(
        self, mesh: Any, body: Any, shape: tuple[int, int], dtype: np.dtype, donate: bool
    ) -> Compiled:
        import jax
        from jax.sharding import NamedSharding
        from jax.sharding import PartitionSpec as P

        sharding = NamedSharding(mesh, P(AXIS))
        fn = jax.jit(
            shard_map(body, mesh=mesh, in_specs=P(AXIS), out_specs=P(AXIS)),
            donate_argnums=0 if donate else (),
        )
        lowered = fn.lower(jax.ShapeDtypeStruct(shape, dtype, sharding=sharding))
        options = compiler_options(mesh.devices.flat[0].platform)
        try:
            exe = lowered.compile(compiler_options=options)
        except Exception:  # an XLA without the option: compile as is
            if not options:
                raise
            exe = lowered.compile()

        def put(host: np.ndarray) -> Any:  # returns once the data is on the devices
            return jax.device_put(
                np.ascontiguousarray(host, dtype=dtype), sharding
            ).block_until_ready()

        def run(buf: Any) -> Any:
            out = exe(buf)
            out.block_until_ready()
            return out

        return Compiled(put=put, run=run, get=lambda buf: np.asarray(jax.device_get(buf)))

    def compile(self, schedule: Schedule, layout: Layout, dtype: Any) -> Compiled:
        """Lower ``schedule`` to one jitted ``shard_map`` (cached per schedule, count, dtype)."""
        dt = _check_dtype(dtype)
        mesh = self._mesh(schedule.nranks)

        def make() -> Compiled:
            pl = plan(schedule, layout)
            body = _lower(pl, self._count_trace)
            return self._build(mesh, body, (schedule.nranks, layout.nelems), dt, self.donate)

        return self._cache.get(schedule, ("schedule", layout.count, dt.str), make)

    def native(self, schedule: Schedule, layout: Layout, dtype: Any) -> Compiled | None:
        """JAX's own collective for ``schedule``'s kind on the same ``[p, nelems]`` buffers."""
        dt = _check_dtype(dtype)
        mesh = self._mesh(schedule.nranks)

        def make() -> Compiled:
            body = _native_body(schedule.collective, schedule.root)
            inner = self._build(mesh, body, layout.input_shape(), dt, donate=False)
            return Compiled(
                put=lambda host: inner.put(layout.take_input(np.asarray(host))),
                run=inner.run,
                get=lambda buf: layout.place_output(inner.get(buf)),
            )

        return self._cache.get(schedule, ("native", layout.count, dt.str), make)

    def host_workers(self, nranks: int) -> int:
        """CPU devices are host threads, one per rank; accelerators run beside one process."""
        import jax

        devices = self._devices if self._devices is not None else jax.devices()
        return nranks if devices[0].platform == "cpu" else 1

    def native_name(self, collective: str) -> str:
        """The JAX collective :meth:`native` uses for ``collective``."""
        return _NATIVE_NAMES[collective]

    def _count_trace(self) -> None:
        self.traces += 1
