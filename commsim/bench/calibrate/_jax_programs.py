r"""The JAX microbenchmarks' device programs: one jitted ``shard_map`` per kind and size.

Every program takes the buffer (donated) and a trip count ``k`` and runs a ``lax.fori_loop`` of
``k`` iterations carrying the buffer, so each iteration consumes the previous one's result
(:mod:`commsim.bench.calibrate._jax_bench` says what is timed). One iteration, on each device of
a mesh along :data:`AXIS`:

* a **transfer** (:func:`transfer_program`): for each permutation of the kind (the ping-pong's
  there and back; the exchange's cyclic shift), the bare ``lax.ppermute`` of the buffer; or, as
  the executor runs a round (:mod:`commsim.exec.jax._program`), the payload sliced from one of
  two windows, sent, an ``optimization_barrier``, and written into the other window;
* a **reduction** (:func:`reduce_program`): ``y + b``; or, as the executor's reducing write, the
  read-modify-write ``dynamic_update_slice(y, dynamic_slice(y, w) + b, w)``.

The programs are compiled with the executor's options (:func:`commsim._compat.compiler_options`).
Importing this module imports JAX.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np
from jax import lax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from commsim._compat import compile_ahead, shard_map

__all__ = ["AXIS", "Donated", "call_program", "reduce_program", "transfer_program"]

AXIS = "devices"
_ZERO = np.int32(0)
Perm = list[tuple[int, int]]
Iteration = Callable[[Any, Any], Any]


class Donated:
    """Calls of a compiled function whose first argument is donated: each call's result is the
    next call's input, as the executor runs (``buf = run(buf)``), so no call allocates it anew."""

    def __init__(self, exe: Callable[..., Any], buf: Any, *rest: Any) -> None:
        self.exe, self.buf, self.rest = exe, buf, rest

    def __call__(self, *extra: Any) -> float:
        """Seconds of one call (host clock, up to ``block_until_ready``)."""
        t0 = time.perf_counter()
        self.buf = self.exe(self.buf, *self.rest, *extra)
        self.buf.block_until_ready()
        return time.perf_counter() - t0


def _windows(length: int) -> tuple[Callable[[Any, int], Any], Callable[[Any, Any, int], Any]]:
    """``read(y, w)`` and ``write(y, v, w)`` of window ``w`` (0 or 1) of ``length`` elements."""
    starts = (np.int32(0), np.int32(length))

    def read(y: Any, w: int) -> Any:
        return lax.dynamic_slice(y, (_ZERO, starts[w]), (1, length))

    def write(y: Any, v: Any, w: int) -> Any:
        return lax.dynamic_update_slice(y, v, (_ZERO, starts[w]))

    return read, write


def _transfers(perms: Sequence[Perm], length: int, as_executor: bool) -> tuple[Iteration, int]:
    """One iteration of ``perms``' transfers of ``length`` elements, and the buffer's length."""
    if not as_executor:

        def bare(i: Any, y: Any) -> Any:
            for perm in perms:
                y = lax.ppermute(y, AXIS, perm)
            return y

        return bare, length
    read, write = _windows(length)

    def rounds(i: Any, y: Any) -> Any:  # as exec.jax._program: slice, send, barrier, write
        for r, perm in enumerate(perms):
            payload = lax.ppermute(read(y, r % 2), AXIS, perm)
            payload, y = lax.optimization_barrier((payload, y))
            y = write(y, payload, 1 - r % 2)
        return y

    return rounds, 2 * length


def _reduction(length: int, as_executor: bool) -> tuple[Iteration, int]:
    """One iteration of the reduction of ``length`` elements, and the buffer's length."""
    if not as_executor:
        return (lambda i, yb: (yb[0] + yb[1], yb[1])), length
    read, write = _windows(length)
    return (lambda i, yb: (write(yb[0], read(yb[0], 1) + yb[1], 1), yb[1])), 2 * length


def _runner(call: Donated, sharding: Any) -> Callable[[int], float]:
    """``run(k)``: one timed call of ``call`` with trip count ``k`` (uploaded once per ``k``)."""
    trips: dict[int, Any] = {}

    def run(k: int) -> float:
        if k not in trips:
            trips[k] = jax.device_put(np.full(1, k, np.int32), sharding)
        return call(trips[k])

    return run


def transfer_program(
    perms: Sequence[Perm], nbytes: int, devs: Sequence[Any], as_executor: bool
) -> Callable[[int], float]:
    """``run(k)``: seconds of ``k`` iterations of ``perms`` of ``nbytes`` bytes on ``devs``."""
    iteration, width = _transfers(perms, nbytes, as_executor)
    mesh = Mesh(np.array(devs), (AXIS,))
    fn = jax.jit(
        shard_map(
            lambda x, k: lax.fori_loop(0, k[0], iteration, x),
            mesh=mesh,
            in_specs=(P(AXIS), P()),
            out_specs=P(AXIS),
        ),
        donate_argnums=0,
    )
    host = np.arange(len(devs) * width, dtype=np.uint8).reshape(len(devs), width)
    x = jax.device_put(host, NamedSharding(mesh, P(AXIS)))
    replicated = NamedSharding(mesh, P())
    one = jax.device_put(np.ones(1, np.int32), replicated)
    call = Donated(compile_ahead(fn, (x, one), devs[0].platform), x)
    return _runner(call, replicated)


def reduce_program(nbytes: int, devs: Sequence[Any], as_executor: bool) -> Callable[[int], float]:
    """``run(k)``: seconds of ``k`` reductions of ``nbytes`` bytes of ``float32`` (rounded up to
    whole elements), on every device of ``devs`` at once."""
    n = -(-nbytes // 4)
    iteration, width = _reduction(n, as_executor)
    mesh = Mesh(np.array(devs), (AXIS,))
    fn = jax.jit(
        shard_map(
            lambda y, b, k: lax.fori_loop(0, k[0], iteration, (y, b))[0],
            mesh=mesh,
            in_specs=(P(AXIS), P(AXIS), P()),
            out_specs=P(AXIS),
        ),
        donate_argnums=0,
    )
    sharded, replicated = NamedSharding(mesh, P(AXIS)), NamedSharding(mesh, P())
    y = jax.device_put(np.ones((len(devs), width), np.float32), sharded)
    b = jax.device_put(np.ones((len(devs), n), np.float32), sharded)
    one = jax.device_put(np.ones(1, np.int32), replicated)
    call = Donated(compile_ahead(fn, (y, b, one), devs[0].platform), y, b)
    return _runner(call, replicated)


def call_program(devs: Sequence[Any]) -> Donated:
    """One call of a donated ``shard_map`` over ``devs`` that moves nothing: each device adds 1
    to its one-element shard."""
    mesh = Mesh(np.array(devs), (AXIS,))
    fn = jax.jit(
        shard_map(lambda x: x + 1, mesh=mesh, in_specs=P(AXIS), out_specs=P(AXIS)),
        donate_argnums=0,
    )
    buf = jax.device_put(np.zeros((len(devs), 1), np.float32), NamedSharding(mesh, P(AXIS)))
    return Donated(compile_ahead(fn, (buf,), devs[0].platform), buf)
