r"""The JAX mesh backend's device program: a :class:`~commsim.exec.jax._plan.Plan` as one jitted
``shard_map``.

The schedule is unrolled at trace time into one function of the device's row ``[1, nelems]``, so
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
collective's input, for the same mesh.

This module imports JAX; the backend imports it only when it builds a program.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from commsim._compat import compiler_options, shard_map
from commsim.exec._backend import Compiled, blocking, uploaded
from commsim.exec.jax._plan import Plan, Round

__all__ = ["compiled", "mesh", "native_program", "program"]

_ZERO = np.int32(0)  # the row index of dynamic slices: int32 like the table, also under x64

Body = Callable[[Any], Any]


def _payloads(b: Any, row: Any, rounds: tuple[Round, ...], axis: str) -> list[Any]:
    """Every round's payload, sliced from buffer ``b`` and sent (the local round's is not)."""
    out = []
    for rnd in rounds:
        parts = [lax.dynamic_slice(b, (_ZERO, row[s.send]), (1, s.length)) for s in rnd.segments]
        payload = parts[0] if len(parts) == 1 else jnp.concatenate(parts, axis=1)
        if rnd.perm is not None:
            payload = lax.ppermute(payload, axis, list(rnd.perm))
        out.append(payload)
    return out


def _write(b: Any, row: Any, rnd: Round, payload: Any) -> Any:
    """Buffer ``b`` with round ``rnd``'s received ``payload`` written (overwrite, add, masked)."""
    for s in rnd.segments:
        v = payload if len(rnd.segments) == 1 else payload[:, s.offset : s.offset + s.length]
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
    return b


def program(pl: Plan, axis: str, on_trace: Callable[[], None]) -> Body:
    """The per-device function of plan ``pl`` over mesh axis ``axis`` (called in ``shard_map``);
    ``on_trace()`` is called each time JAX traces it."""

    def body(x: Any) -> Any:
        on_trace()
        b = x  # [1, nelems]: kept 2-D so that the output aliases the donated input
        if pl.pad:
            b = jnp.pad(b, ((0, 0), (0, pl.pad)))
        row = jnp.asarray(pl.table)[lax.axis_index(axis)]
        for rounds in pl.steps:
            if not rounds:
                continue
            payloads = _payloads(b, row, rounds, axis)  # every read of the step ...
            payloads, b = lax.optimization_barrier((payloads, b))
            for rnd, payload in zip(rounds, payloads, strict=True):  # ... then every write
                b = _write(b, row, rnd, payload)
        return b[:, : pl.nelems] if pl.pad else b

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
    """``body`` jitted over ``m`` for a ``shape`` array sharded along ``axis``, compiled now."""
    sharding = NamedSharding(m, P(axis))
    fn = jax.jit(
        shard_map(body, mesh=m, in_specs=P(axis), out_specs=P(axis)),
        donate_argnums=0 if donate else (),
    )
    lowered = fn.lower(jax.ShapeDtypeStruct(shape, dtype, sharding=sharding))
    options = compiler_options(m.devices.flat[0].platform)
    try:
        exe = lowered.compile(compiler_options=options)
    except Exception:  # an XLA without the option: compile as is
        if not options:
            raise
        exe = lowered.compile()

    def put(host: np.ndarray) -> Any:
        return uploaded(jax.device_put(np.ascontiguousarray(host, dtype=dtype), sharding))

    return Compiled(put=put, run=blocking(exe), get=lambda buf: np.asarray(jax.device_get(buf)))
