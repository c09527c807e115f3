r"""Calibration microbenchmarks on JAX devices: what the mesh executor's steps cost, one by one.

The JAX executor (:mod:`commsim.exec.jax`) runs a schedule as one jitted ``shard_map`` with one
``lax.ppermute`` per round and an ``old + payload`` per reducing write. These benchmarks time the
same primitives, the same way, on the same kind of mesh, and return
:class:`~commsim.bench.calibrate.Samples` (seconds per repeat, per size):

=============  ======================================================================
``pingpong``   one ``lax.ppermute`` of ``size`` bytes (``uint8``) from device 0 to
               device 1 of a 2-device mesh: half of one round trip (0 → 1, then 1 → 0)
``exchange``   one ``lax.ppermute`` in which devices 0 and 1 send ``size`` bytes to each
               other at once (``[(0, 1), (1, 0)]``); with ``ranks=p``, a cyclic shift in
               which each of the first ``p`` devices sends ``size`` bytes to the next
``reduction``  one ``a + b`` of two ``float32`` arrays of ``size`` bytes (rounded up to
               whole elements), the result replacing ``a``, on device 0 alone; with
               ``ranks=p``, on each of the first ``p`` devices at once
``call``       one call of a jitted ``shard_map`` that moves nothing (each device adds 1 to
               its one-element shard; the input donated), with ``block_until_ready``,
               over all the devices (or the first ``ranks``): what the executor's ``run``
               costs before any step
=============  ======================================================================

**How** (``pingpong``, ``exchange``, ``reduction``): one jitted program runs a ``lax.fori_loop``
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
back the other way. ``reduction`` becomes the executor's reducing write, a read-modify-write of a
window: ``dynamic_update_slice(y, dynamic_slice(y, w) + b, w)``. These are the transport plus the
executor's copies (on CPU about 1.5 to 3 times the bare ``ppermute`` from 1 MiB; see
``docs/calibrate-jax-cuda.md``): the numbers to predict the executor with, where the default ones
are the transport's own.

On CPU the devices are ``XLA_FLAGS=--xla_force_host_platform_device_count`` fake devices, which
share the process's cores and memory: a number here is this machine's memory system, not a
network. By default a ``reduction`` runs on one device with the others idle and an ``exchange``
on two; when the executor runs a step on ``p`` devices, all of them send and reduce at once,
sharing the same cores. ``ranks=p`` measures that step (a cyclic shift, ``p`` reductions at once),
which on 8 CPU devices over 2 cores is several times slower per device than the pair.

The programs themselves are in :mod:`commsim.bench.calibrate._jax_programs`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from commsim._compat import ensure_cpu_devices
from commsim._progress import Progress
from commsim.bench.calibrate._micro import batch_times, check_counts, check_kinds, check_sizes
from commsim.bench.calibrate._samples import Samples
from commsim.errors import CommsimError, ParameterError
from commsim.units import format_size

__all__ = ["JAX_KINDS", "jax_samples"]

#: the kinds :func:`jax_samples` measures
JAX_KINDS = ("pingpong", "exchange", "reduction", "call")

_AS_EXECUTOR_NOTE = (
    "as the executor runs it: payload sliced from the buffer, sent, written back "
    "(dynamic_slice, ppermute, optimization_barrier, dynamic_update_slice)"
)


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
    ranks: int | None = None,
) -> list[Samples]:
    """Time ``kinds`` at each of ``sizes`` bytes on JAX devices (see the module for what each is).

    Args:
        sizes: message sizes in bytes (sorted, repeats dropped); ``call`` ignores them (size 0).
        repeats: timed repeats per size (each one a batch difference, or one call for ``call``).
        warmup: untimed batches per size before the repeats, after one that compiles.
        devices: the devices (default ``jax.devices()``): the ping-pong uses the first two.
        kinds: some of :data:`JAX_KINDS`, measured in this order.
        progress: a progress bar on stderr over the repeats (``None``: on a terminal, if slow).
        target_s: about how long one timed batch lasts.
        as_executor: time each operation as the executor runs it (see the module): the payload
            sliced out of a buffer and what arrives written back into it, the reduction as a
            read-modify-write of a window. Default: the bare primitive.
        ranks: run ``exchange``, ``reduction`` and ``call`` on the first ``ranks`` devices at
            once, as the executor's steps on that many ranks run. Default: the exchange on 2
            devices, the reduction on 1, the call on all.

    Returns:
        One :class:`Samples` per kind, in the order of ``kinds``; ``nranks`` is the number of
        devices that ran it.

    Raises:
        ParameterError: empty or non-positive sizes, an unknown kind, bad counts or ``ranks``.
        CommsimError: fewer devices than the kinds need.
    """
    sz = check_sizes(sizes)
    kinds = check_kinds(kinds, JAX_KINDS, "jax")
    check_counts(repeats, warmup)
    if ranks is not None and (isinstance(ranks, bool) or not isinstance(ranks, int) or ranks < 2):
        raise ParameterError(f"ranks must be a whole number >= 2, got {ranks!r}")
    devs = _devices(devices, kinds, ranks)
    total = repeats * sum(1 if k == "call" else len(sz) for k in kinds)
    with Progress(total, "calibrate jax", enabled=progress) as bar:
        return [
            _measure(
                kind, sz, repeats, warmup, _group(kind, devs, ranks), target_s, as_executor, bar
            )
            for kind in kinds
        ]


def _group(kind: str, devs: list[Any], ranks: int | None) -> list[Any]:
    """The devices that run ``kind``."""
    if kind == "call":
        return devs[:ranks] if ranks else devs
    if kind == "pingpong":
        return devs[:2]
    return devs[: ranks or (2 if kind == "exchange" else 1)]


def _devices(given: Sequence[Any] | None, kinds: tuple[str, ...], ranks: int | None) -> list[Any]:
    """The devices to use, or a one-line error when there are too few."""
    ensure_cpu_devices(max(2, ranks or 2))  # only has an effect when JAX has not started yet
    import jax

    devs = list(jax.devices() if given is None else given)
    pair = {"pingpong", "exchange"} & set(kinds)
    need = max(2 if pair else 1, ranks or 1)
    if len(devs) < need:
        hint = (
            f" (on CPU, set XLA_FLAGS=--xla_force_host_platform_device_count={need} "
            "before JAX starts)"
            if given is None
            else ""
        )
        what = (
            f"jax_samples(ranks={ranks}) needs" if ranks else "the jax ping-pong and exchange need"
        )
        where = "visible" if given is None else "given"
        raise CommsimError(f"{what} {need} devices, {len(devs)} {where}{hint}")
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
    from commsim.bench.calibrate import _jax_programs as prog

    platform = devs[0].platform
    notes = [f"JAX {platform} devices; host clock around each call, with block_until_ready"]
    if platform == "cpu":
        notes.append("CPU devices are threads of one process: ppermute is a shared-memory copy")
    if kind == "call":
        times = _call_times(prog.call_program(devs), repeats, warmup, bar)
        notes.append(f"one call over {len(devs)} devices that moves nothing (size 0)")
        return Samples(kind, np.zeros(1), times[None, :], "jax", len(devs), tuple(notes))
    q = len(devs)
    perms = {
        "pingpong": ([(0, 1)], [(1, 0)]),  # there, then back: 2 messages an iteration
        "exchange": ([(r, (r + 1) % q) for r in range(q)],),  # all at once: 1 an iteration
    }
    rows, ks = [], []
    for size in sizes:
        if kind in perms:
            run = prog.transfer_program(perms[kind], int(size), devs, as_executor)
        else:
            run = prog.reduce_program(int(size), devs, as_executor)
        label = f"{kind} {format_size(int(size))}"
        times, k = batch_times(
            run,
            repeats=repeats,
            warmup=warmup,
            per_iteration=len(perms[kind]) if kind in perms else 1,
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
    if kind not in perms:
        notes.append(f"float32 a + b on each of {q} devices at once")
    elif q > 2:
        notes.append(f"a cyclic shift: each of {q} devices sends to the next at once")
    if as_executor:
        notes.append(_AS_EXECUTOR_NOTE)
    return Samples(kind, sizes, np.array(rows), "jax", q, tuple(notes))


def _call_times(call: Any, repeats: int, warmup: int, bar: Progress) -> np.ndarray:
    """Seconds of each of ``repeats`` calls of ``call`` after ``warmup + 1`` untimed ones."""
    for _ in range(warmup + 1):
        call()
    out = np.empty(repeats)
    for j in range(repeats):
        out[j] = call()
        bar.update(note="call")
    return out
