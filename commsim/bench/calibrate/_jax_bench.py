r"""Calibration microbenchmarks on JAX devices: what the mesh executor's steps cost, one by one.

The JAX executor (:mod:`commsim.exec.jax`) runs a schedule as one jitted ``shard_map`` with one
``lax.ppermute`` per round and an ``old + payload`` per reducing write. These benchmarks time the
same primitives, the same way, on the same kind of mesh, and return
:class:`~commsim.bench.calibrate.Samples` (seconds per repeat, per size):

=============  ======================================================================
``pingpong``   one ``lax.ppermute`` of ``size`` bytes (``uint8``) from device 0 to
               device 1 of a 2-device mesh: half of one round trip (0 → 1, then 1 → 0)
``exchange``   one ``lax.ppermute`` in which devices 0 and 1 send ``size`` bytes to each
               other at once (the permutation ``[(0, 1), (1, 0)]``)
``reduce``     one ``a + b`` of two ``float32`` arrays of ``size`` bytes on device 0
               alone (rounded up to whole elements), the result replacing ``a``
``call``       one call of a jitted ``shard_map`` over all the devices that moves nothing
               (each adds 1 to its one-element shard; the input donated), with
               ``block_until_ready``: what the executor's ``run`` costs before any step
=============  ======================================================================

**How** (``pingpong``, ``exchange``, ``reduce``): one jitted program runs a ``lax.fori_loop``
of ``k`` iterations, ``k`` a runtime argument (one compile per size), the loop carrying the
buffer, so each iteration's operation consumes the last one's result and XLA can neither drop
nor merge them. The buffer is donated, each call's result being the next call's input, as the
executor runs: without it each call allocates (and page-faults) fresh buffers, which at 16 MiB
costs milliseconds with as much jitter. The host clock (``perf_counter``) times one call including
``block_until_ready``; per repeat, :func:`~commsim.bench.calibrate._micro.batch_times` takes
:math:`(T(k) - T(1)) / ((k - 1)\,m)` with :math:`m = 2` operations per iteration for the ping-pong
and 1 otherwise, ``k`` set per size so that a batch lasts about ``target_s`` (at least 4).

**Each number includes** the operation as XLA runs it inside a compiled program: for a
``ppermute``, the devices' rendezvous and the copy (on CPU devices, host threads of one process
copying through shared memory), and one loop iteration's bookkeeping (a counter, a compare and a
branch; on the executor's unrolled program that is absent). **It excludes** the per-call cost:
Python dispatch, argument handling, the launch and ``block_until_ready`` (that is ``call``,
measured alone), compilation, and every host ↔ device transfer. By default it also excludes
the executor's own per-byte work around a ``ppermute``: slicing the payload out of the rank's
buffer and writing what arrives back into it.

**As the executor** (``as_executor=True``): each device holds two windows of ``size`` bytes and
every message is what :mod:`commsim.exec.jax._program` builds for a round: the payload sliced
from one window (``dynamic_slice``), sent (``ppermute``), an ``optimization_barrier``, then
written into the other window (``dynamic_update_slice``); the ping-pong's second message goes
back the other way. ``reduce`` becomes the executor's reducing write, a read-modify-write of a
window: ``dynamic_update_slice(y, dynamic_slice(y, w) + b, w)``. These are the transport plus the
executor's copies (on CPU about 1.5 to 3 times the bare ``ppermute`` from 1 MiB; see
``docs/calibrate-jax-cuda.md``): the numbers to predict the executor with, where the default ones
are the transport's own.

On CPU the devices are ``XLA_FLAGS=--xla_force_host_platform_device_count`` fake devices, which
share the process's cores and memory: a number here is this machine's memory system, not a
network. A ``reduce`` runs on one device with the others idle; when the executor runs, every
device reduces at once, sharing the same cores.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from commsim._compat import compiler_options, ensure_cpu_devices, shard_map
from commsim._progress import Progress
from commsim.bench.calibrate._micro import batch_times, check_counts, check_kinds, check_sizes
from commsim.bench.calibrate._samples import Samples
from commsim.errors import CommsimError
from commsim.units import format_size

__all__ = ["JAX_KINDS", "jax_samples"]

#: the kinds :func:`jax_samples` measures
JAX_KINDS = ("pingpong", "exchange", "reduce", "call")

_AXIS = "pair"
_AS_EXECUTOR_NOTE = (
    "as the executor runs it: payload sliced from the buffer, sent, written back "
    "(dynamic_slice, ppermute, optimization_barrier, dynamic_update_slice)"
)
# the kinds between two devices: the permutations of one iteration of their batch
_PERMS = {
    "pingpong": ([(0, 1)], [(1, 0)]),  # there, then back
    "exchange": ([(0, 1), (1, 0)],),  # both ways at once
}


def jax_samples(
    sizes: Sequence[int],
    *,
    repeats: int = 20,
    warmup: int = 3,
    devices: Sequence[Any] | None = None,
    kinds: Sequence[str] = JAX_KINDS,
    progress: bool | None = None,
    target_s: float = 4e-3,
    as_executor: bool = False,
) -> list[Samples]:
    """Time ``kinds`` at each of ``sizes`` bytes on JAX devices (see the module for what each is).

    Args:
        sizes: message sizes in bytes (sorted, repeats dropped); ``call`` ignores them (size 0).
        repeats: timed repeats per size (each one a batch difference, or one call for ``call``).
        warmup: untimed batches per size before the repeats, after one that compiles.
        devices: the devices (default ``jax.devices()``): ping-pong and exchange use the first
            two, ``reduce`` the first, ``call`` all of them.
        kinds: some of :data:`JAX_KINDS`, measured in this order.
        progress: a progress bar on stderr over the repeats (``None``: on a terminal, if slow).
        target_s: about how long one timed batch lasts.
        as_executor: time each operation as the executor runs it (see the module): the payload
            sliced out of a buffer and what arrives written back into it, the reduction as a
            read-modify-write of a window. Default: the bare primitive.

    Returns:
        One :class:`Samples` per kind, in the order of ``kinds``.

    Raises:
        ParameterError: empty or non-positive sizes, an unknown kind, bad counts.
        CommsimError: fewer than two devices for ``pingpong`` or ``exchange``.
    """
    sz = check_sizes(sizes)
    kinds = check_kinds(kinds, JAX_KINDS, "jax")
    check_counts(repeats, warmup)
    devs = _devices(devices, kinds)
    total = repeats * sum(1 if k == "call" else len(sz) for k in kinds)
    with Progress(total, "calibrate jax", enabled=progress) as bar:
        return [
            _measure(kind, sz, repeats, warmup, devs, target_s, as_executor, bar) for kind in kinds
        ]


def _devices(given: Sequence[Any] | None, kinds: tuple[str, ...]) -> list[Any]:
    """The devices to use, or a one-line error when a pair is needed and there is none."""
    ensure_cpu_devices(2)  # only has an effect when JAX has not started yet
    import jax

    devs = list(jax.devices() if given is None else given)
    need = 2 if set(_PERMS) & set(kinds) else 1
    if len(devs) < need:
        hint = (
            " (on CPU, set XLA_FLAGS=--xla_force_host_platform_device_count=2 before JAX starts)"
            if given is None
            else ""
        )
        where = "visible" if given is None else "given"
        raise CommsimError(
            f"the jax ping-pong and exchange need 2 devices, {len(devs)} {where}{hint}"
        )
    return devs


def _measure(
    kind: str,
    sizes: np.ndarray,
    repeats: int,
    warmup: int,
    devs: list[Any],
    target_s: float,
    as_executor: bool,
    bar: Progress,
) -> Samples:
    platform = devs[0].platform
    notes = [f"JAX {platform} devices; host clock around each call, with block_until_ready"]
    if platform == "cpu":
        notes.append("CPU devices are threads of one process: ppermute is a shared-memory copy")
    if kind == "call":
        times = _call_times(devs, repeats, warmup, bar)
        notes.append(f"one call over {len(devs)} devices that moves nothing (size 0)")
        return Samples(kind, np.zeros(1), times[None, :], "jax", len(devs), tuple(notes))
    rows, ks = [], []
    for size in sizes:
        run, per_iteration = _batch(kind, int(size), devs, as_executor)
        label = f"{kind} {format_size(int(size))}"
        times, k = batch_times(
            run,
            repeats=repeats,
            warmup=warmup,
            per_iteration=per_iteration,
            target_s=target_s,
            what=label,
            tick=lambda label=label: bar.update(note=label),
        )
        rows.append(times)
        ks.append(k)
    notes.append(
        f"per operation: (T(k) - T(1)) / (k - 1) over batches of k = {max(ks)} .. {min(ks)} "
        "in one jitted call (fori_loop); call overhead excluded"
    )
    pair = kind in _PERMS
    if not pair:
        notes.append("float32 a + b on one device, the other devices idle")
    if as_executor:
        notes.append(_AS_EXECUTOR_NOTE)
    nranks = 2 if pair else 1
    return Samples(kind, sizes, np.array(rows), "jax", nranks, tuple(notes))


class _Donated:
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


def _compile(jitted: Any, *args: Any, platform: str) -> Callable[..., Any]:
    """``jitted`` compiled for ``args`` with the executor's options (see ``_compat``)."""
    lowered = jitted.lower(*args)
    options = compiler_options(platform)
    try:
        return lowered.compile(compiler_options=options)
    except Exception:  # an XLA without the option: compile as is
        if not options:
            raise
        return lowered.compile()


def _iteration(kind: str, size: int, as_executor: bool) -> tuple[Callable[[Any, Any], Any], int]:
    """One iteration of ``kind``'s batch as a function ``(i, buffer) -> buffer`` on one device,
    and the buffer's length: ``size`` elements, or two windows of them (``[0, size)`` sent or
    added from, ``[size, 2 size)`` written) when ``as_executor``."""
    from jax import lax

    win = (np.int32(0), np.int32(size))  # the windows' starts: (0, first), (0, second)

    def window(y: Any, w: int) -> Any:
        return lax.dynamic_slice(y, (np.int32(0), win[w]), (1, size))

    def write(y: Any, v: Any, w: int) -> Any:
        return lax.dynamic_update_slice(y, v, (np.int32(0), win[w]))

    if kind not in _PERMS:  # the reduction: a += b, or the executor's read-modify-write
        if not as_executor:
            return (lambda i, ab: (ab[0] + ab[1], ab[1])), size
        return (lambda i, yb: (write(yb[0], window(yb[0], 1) + yb[1], 1), yb[1])), 2 * size
    perms = _PERMS[kind]
    if not as_executor:

        def bare(i: Any, y: Any) -> Any:
            for perm in perms:
                y = lax.ppermute(y, _AXIS, perm)
            return y

        return bare, size

    def rounds(i: Any, y: Any) -> Any:  # as exec.jax._program: slice, send, barrier, write
        for r, perm in enumerate(perms):
            payload = lax.ppermute(window(y, r % 2), _AXIS, perm)
            payload, y = lax.optimization_barrier((payload, y))
            y = write(y, payload, 1 - r % 2)
        return y

    return rounds, 2 * size


def _batch(
    kind: str, size: int, devs: list[Any], as_executor: bool
) -> tuple[Callable[[int], float], int]:
    """``run(k)``: seconds of one call of ``k`` iterations of ``kind`` at ``size`` bytes; and the
    operations per iteration."""
    import jax
    from jax import lax
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    platform = devs[0].platform
    if kind not in _PERMS:  # the reduction, on one device
        n = -(-size // 4)  # float32 elements
        iteration, width = _iteration(kind, n, as_executor)
        fn = jax.jit(lambda y, b, k: lax.fori_loop(0, k, iteration, (y, b))[0], donate_argnums=0)
        y = jax.device_put(np.ones((1, width), np.float32), devs[0])
        b = jax.device_put(np.ones((1, n), np.float32), devs[0])
        call = _Donated(_compile(fn, y, b, np.int32(1), platform=platform), y, b)
        trips = {}

        def run_reduce(k: int) -> float:
            if k not in trips:
                trips[k] = jax.device_put(np.int32(k), devs[0])
            return call(trips[k])

        return run_reduce, 1

    iteration, width = _iteration(kind, size, as_executor)
    mesh = Mesh(np.array(devs[:2]), (_AXIS,))
    fn = jax.jit(
        shard_map(
            lambda x, k: lax.fori_loop(0, k[0], iteration, x),
            mesh=mesh,
            in_specs=(P(_AXIS), P()),
            out_specs=P(_AXIS),
        ),
        donate_argnums=0,
    )
    host = np.arange(2 * width, dtype=np.uint8).reshape(2, width)
    x = jax.device_put(host, NamedSharding(mesh, P(_AXIS)))
    replicated = NamedSharding(mesh, P())
    one = jax.device_put(np.ones(1, np.int32), replicated)
    call = _Donated(_compile(fn, x, one, platform=platform), x)
    trips = {}

    def run_permute(k: int) -> float:
        if k not in trips:
            trips[k] = jax.device_put(np.full(1, k, np.int32), replicated)
        return call(trips[k])

    return run_permute, len(_PERMS[kind])


def _call_times(devs: list[Any], repeats: int, warmup: int, bar: Progress) -> np.ndarray:
    """Seconds of each of ``repeats`` calls of a donated, do-nothing ``shard_map`` on ``devs``."""
    import jax
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = Mesh(np.array(devs), (_AXIS,))
    sharding = NamedSharding(mesh, P(_AXIS))
    fn = jax.jit(
        shard_map(lambda x: x + 1, mesh=mesh, in_specs=P(_AXIS), out_specs=P(_AXIS)),
        donate_argnums=0,
    )
    buf = jax.device_put(np.zeros((len(devs), 1), np.float32), sharding)
    call = _Donated(_compile(fn, buf, platform=devs[0].platform), buf)
    for _ in range(warmup + 1):
        call()
    out = np.empty(repeats)
    for j in range(repeats):
        out[j] = call()
        bar.update(note="call")
    return out
