r"""The JAX mesh backend's device program: a :class:`~commsim.exec.jax._plan.Plan` as one jitted
``shard_map``.

The schedule is unrolled at trace time into one function of the device's row ``[..., nelems]``
(``[1, nelems]`` in the mesh backend, ``[nelems]`` in the drop-in), so
XLA sees (and schedules) every step at once. Per step, :func:`program` slices every payload from
the pre-step buffer (``lax.dynamic_slice`` windows, concatenated per round), sends each with one
``lax.ppermute``, then applies every write with ``lax.dynamic_update_slice``: overwrite, add, or a
select where a window is masked or its reduce flag differs per device. Cost per round: one slice
(copy) of the payload on the sender, one ``ppermute``, and one read-modify-write of the
destination window on the receiver; masked or mixed segments add one select.

The buffer is updated in place: :func:`compiled` compiles with region-based copy insertion
(:func:`commsim._compat.compiler_options`), which proves that a step's reads precede its writes
even when the step has several rounds (without it such a step costs two copies of the buffer),
and donates its input when asked. :func:`native_program` is JAX's own collective on the
collective's input, for the same mesh. ``repeat(buf, k)`` runs a program ``k`` times in one call
(a ``fori_loop`` around the ``shard_map``: one dispatch for ``k`` runs), and :func:`idle` is a
run that moves nothing through the same path (the executor's own cost per call).

**Windows stay dynamic, and the buffer keeps its shape** (measured on XLA CPU, jaxlib 0.10.2;
``docs/benchmarks.md``, "Static windows"). Every window start is read from the table at run time,
even where it is the same on every device: XLA then emits each reduce (a ``dynamic_slice`` of
the old window, an add, a ``dynamic_update_slice`` at the same start, fused) in place, as a loop
over the window only. With a start known at compile time the old window's read becomes a static
``slice``, which XLA's in-place check does not match with the update's window, and the fusion is
emitted as a loop over the whole buffer: a pass over all of it per write (a ring rotated so that
every window is static ran 5× slower than this program). The body works
on the last axis of whatever shape it is given and returns that shape: a reshape of the result
(``[1, n]`` to ``[n]``) would fuse into the last write, which then cannot run in place, and XLA
adds a temporary buffer and a copy of it.

With a wire format (:mod:`commsim._wire`), each round's payload is encoded before its
``ppermute`` (cast to fp16/bf16, or int8 with a float32 scale per chunk, sent as a second
``ppermute``) and decoded after it, so the receiver adds in the buffer's dtype; the local round
(no ``ppermute``) is not converted.

This module imports JAX; the backend imports it only when it builds a program.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from commsim._compat import compile_ahead, shard_map
from commsim._wire import Wire
from commsim.exec._backend import Compiled, blocking, uploaded
from commsim.exec.jax._plan import Plan, Round

__all__ = ["compiled", "idle", "mesh", "native_program", "program"]

_ZERO = np.int32(0)  # the row index of dynamic slices: int32 like the table, also under x64

Body = Callable[[Any], Any]


def _window(b: Any, start: Any, length: int) -> Any:
    """Elements ``[start, start + length)`` of buffer ``b``'s last axis."""
    lead = (_ZERO,) * (b.ndim - 1)
    return lax.dynamic_slice(b, (*lead, start), (*b.shape[:-1], length))


def _put(b: Any, v: Any, start: Any) -> Any:
    """Buffer ``b`` with ``v`` written at ``start`` of its last axis."""
    return lax.dynamic_update_slice(b, v, (*(_ZERO,) * (b.ndim - 1), start))


def _payloads(
    b: Any, row: Any, rounds: tuple[Round, ...], axis: str, wire: Wire | None = None
) -> list[Any]:
    """Every round's payload, sliced from buffer ``b`` and sent (the local round's is not), in
    wire format ``wire`` when given (encoded, sent, decoded)."""
    out = []
    for rnd in rounds:
        parts = [_window(b, row[s.send], s.length) for s in rnd.segments]
        payload = parts[0] if len(parts) == 1 else jnp.concatenate(parts, axis=-1)
        if rnd.perm is not None and wire is not None:
            sent = [lax.ppermute(x, axis, list(rnd.perm)) for x in wire.encode(payload, jnp)]
            payload = wire.decode(tuple(sent), payload.dtype, jnp)
        elif rnd.perm is not None:
            payload = lax.ppermute(payload, axis, list(rnd.perm))
        out.append(payload)
    return out


def _write(b: Any, row: Any, rnd: Round, payload: Any) -> Any:
    """Buffer ``b`` with round ``rnd``'s received ``payload`` written (overwrite, add, masked)."""
    for s in rnd.segments:
        v = payload if len(rnd.segments) == 1 else payload[..., s.offset : s.offset + s.length]
        start = row[s.recv]
        if s.mode != "set" or s.masked:
            old = _window(b, start, s.length)
            if s.mode == "add":
                v = old + v
            elif s.mode == "mixed":
                v = jnp.where(row[s.red] != 0, old + v, v)
            if s.masked:
                i = lax.broadcasted_iota(np.int32, v.shape, v.ndim - 1)
                v = jnp.where((i >= row[s.lo]) & (i < row[s.hi]), v, old)
        b = _put(b, v, start)
    return b


def _step(b: Any, row: Any, rounds: tuple[Round, ...], axis: str, wire: Wire | None = None) -> Any:
    """Buffer ``b`` after ``rounds``: every payload sliced and sent, then every write."""
    payloads = _payloads(b, row, rounds, axis, wire)  # every read of the step ...
    payloads, b = lax.optimization_barrier((payloads, b))
    for rnd, payload in zip(rounds, payloads, strict=True):  # ... then every write
        b = _write(b, row, rnd, payload)
    return b


def _merged(bufs: list[Any], pl: Plan, axis: str) -> Any:
    """Each ``(rank, slot)`` from the buffer of the channel that owns it (:attr:`Plan.owner`)."""
    assert pl.owner is not None and pl.slot_elems is not None
    owner = jnp.asarray(pl.owner)[lax.axis_index(axis)]
    per_elem = jnp.repeat(owner, pl.slot_elems, total_repeat_length=pl.nelems)
    out = bufs[0][..., : pl.nelems]
    for c in range(1, len(bufs)):
        out = jnp.where(per_elem == c, bufs[c][..., : pl.nelems], out)
    return out


def program(pl: Plan, axis: str, on_trace: Callable[[], None], wire: Wire | None = None) -> Body:
    """The per-device function of plan ``pl`` over mesh axis ``axis`` (called in ``shard_map``);
    ``on_trace()`` is called each time JAX traces it; messages in wire format ``wire``.

    With one buffer, a step's rounds (every channel's) read the pre-step buffer and are sent
    together, then written. With a buffer per channel (:attr:`Plan.owner`), each channel's
    rounds of a step read and write its own buffer only, so nothing orders one channel's steps
    after another's; the buffers are merged at the end."""

    def body(x: Any) -> Any:
        on_trace()
        b = x  # [..., nelems]: the output keeps the input's shape (see the module's docstring)
        if pl.pad:
            b = jnp.pad(b, [(0, 0)] * (b.ndim - 1) + [(0, pl.pad)])
        row = jnp.asarray(pl.table)[lax.axis_index(axis)]
        if pl.owner is None:
            for rounds in pl.steps:
                if rounds:
                    b = _step(b, row, rounds, axis, wire)
            return b[..., : pl.nelems] if pl.pad else b
        bufs = [b] * pl.nbuffers
        for rounds in pl.steps:
            for c in sorted({r.channel for r in rounds}):
                own = tuple(r for r in rounds if r.channel == c)
                bufs[c] = _step(bufs[c], row, own, axis, wire)
        return _merged(bufs, pl, axis)

    return body


def native_program(collective: str, root: int, axis: str) -> Body:
    """JAX's own ``collective`` on a ``[1, input length]`` shard (the backend's ``native``)."""
    ops: dict[str, Callable[[Any], Any]] = {
        "allreduce": lambda v: lax.psum(v, axis),
        "reduce": lambda v: lax.psum(v, axis),
        "broadcast": lambda v: lax.psum(
            jnp.where(lax.axis_index(axis) == root, v, jnp.zeros_like(v)), axis
        ),
        "reduce_scatter": lambda v: lax.psum_scatter(v, axis, scatter_dimension=0, tiled=True),
        "allgather": lambda v: lax.all_gather(v, axis, axis=0, tiled=True),
        "alltoall": lambda v: lax.all_to_all(v, axis, 0, 0, tiled=True),
    }
    op = ops[collective]
    return lambda x: op(x.reshape(-1)).reshape(1, -1)


def mesh(devices: Sequence[Any], axis: str) -> Mesh:
    """A 1-D mesh of ``devices`` (rank order) along ``axis``."""
    return Mesh(np.array(devices), (axis,))


def compiled(
    m: Mesh, axis: str, body: Body, shape: tuple[int, int], dtype: np.dtype, donate: bool
) -> Compiled:
    """``body`` jitted over ``m`` for a ``shape`` array sharded along ``axis``, compiled now.

    ``repeat(buf, k)`` (when ``body`` keeps the shard's shape) runs it ``k`` times in one call,
    a ``fori_loop`` around the ``shard_map``; it compiles on its first call."""
    sharding = NamedSharding(m, P(axis))
    platform = m.devices.flat[0].platform
    inner = shard_map(body, mesh=m, in_specs=P(axis), out_specs=P(axis))
    donated = 0 if donate else ()
    arg = jax.ShapeDtypeStruct(shape, dtype, sharding=sharding)
    exe = compile_ahead(jax.jit(inner, donate_argnums=donated), (arg,), platform)
    chains = jax.eval_shape(inner, arg).shape == tuple(shape)
    loops: list[Callable[..., Any]] = []

    def repeat(buf: Any, k: int) -> Any:
        if not loops:
            many = jax.jit(
                lambda x, n: lax.fori_loop(0, n, lambda _, y: inner(y), x), donate_argnums=donated
            )
            loops.append(compile_ahead(many, (arg, jax.ShapeDtypeStruct((), np.int32)), platform))
        return jax.block_until_ready(loops[0](buf, np.int32(k)))

    def put(host: np.ndarray) -> Any:
        return uploaded(jax.device_put(np.ascontiguousarray(host, dtype=dtype), sharding))

    return Compiled(
        put=put,
        run=blocking(exe),
        get=lambda buf: np.asarray(jax.device_get(buf)),
        repeat=repeat if chains else None,
    )


def idle(m: Mesh, axis: str, dtype: np.dtype, donate: bool) -> Compiled:
    """A run that moves nothing through the same path as :func:`compiled`'s programs: the same
    jitted ``shard_map`` over the same mesh, of the identity on a one-element row."""
    p = m.devices.size
    inner = compiled(m, axis, lambda x: x, (p, 1), dtype, donate)
    zeros = np.zeros((p, 1), dtype)
    return dataclasses.replace(inner, put=lambda host: inner.put(zeros))
