r"""Calibration microbenchmarks on CUDA devices through numba: copies, a reduction, a launch.

Returns :class:`~commsim.bench.calibrate.Samples` (seconds per repeat, per size):

=============  ======================================================================
``pingpong``   one device-to-device copy of ``size`` bytes (numba's ``copy_to_device``,
               ``cuMemcpyDtoDAsync``): half of a round trip, a copy there then one back,
               on one stream. With two GPUs, the buffers sit one on each (a peer copy,
               peer access enabled where the GPUs allow it); with one GPU, both sit on it
               and the number is that GPU's own copy (the notes say which)
``exchange``   both copies at once, each on its own stream (with two GPUs, one each way
               between them; with one, two independent copies on the same GPU)
``reduction``  one launch of a numba kernel ``a[i] += b[i]`` over ``float32`` arrays of
               ``size`` bytes (rounded up to whole elements), on GPU 0
``call``       one launch of an empty kernel followed by ``cuda.synchronize()``, timed by
               the host clock: what the cuda executor's ``run`` costs besides its steps
=============  ======================================================================

**How** (all but ``call``): as for JAX (:mod:`commsim.bench.calibrate._micro`), per repeat
:math:`(T(k) - T(1)) / ((k - 1)\,m)`, where :math:`T(k)` is the time of ``k`` operations enqueued
back to back on the stream(s) and :math:`m = 2` for the ping-pong. On a GPU, :math:`T(k)` is
CUDA events recorded on the stream before and after the batch (``Event.synchronize``), so the
host's own time is excluded except where the GPU waits for it: the operations are enqueued from
Python (a few µs of host time each), so below the size at which one copy or one kernel outlasts
its enqueueing, the number is the host's enqueue rate, not the GPU's. **Excluded**: allocation,
host ↔ device transfers, kernel compilation (the first call), and the per-call synchronization.

**Under numba's CUDA simulator** (``NUMBA_ENABLE_CUDASIM=1``, as in CI) everything runs, in
Python, and events record no time, so the host clock times each batch instead: the numbers are
well formed but mean nothing about any GPU, and every Samples says so in its ``notes``.

``numba.cuda`` is imported only when :func:`cuda_samples` runs.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from commsim._progress import Progress
from commsim.bench.calibrate._micro import batch_times, check_counts, check_kinds, check_sizes
from commsim.bench.calibrate._samples import Samples
from commsim.errors import CommsimError
from commsim.exec.cuda import NO_GPU
from commsim.units import format_size

__all__ = ["CUDA_KINDS", "cuda_samples"]

#: the kinds :func:`cuda_samples` measures
CUDA_KINDS = ("pingpong", "exchange", "reduction", "call")

_PAIR = ("pingpong", "exchange")  # the kinds between two buffers (two GPUs when there are)
_THREADS = 256  # threads per block of the reduction on a GPU
_SIM_GRID = (2, 4)  # blocks, threads under the simulator (a Python thread per CUDA thread)
SIMULATED_NOTE = "numba CUDA simulator: the kernels ran in Python, these times mean nothing"


def cuda_samples(
    sizes: Sequence[int],
    *,
    repeats: int = 20,
    warmup: int = 3,
    kinds: Sequence[str] = CUDA_KINDS,
    progress: bool | None = None,
    target_s: float = 4e-3,
) -> list[Samples]:
    """Time ``kinds`` at each of ``sizes`` bytes on CUDA devices (see the module for what each is).

    Args:
        sizes: message sizes in bytes (sorted, repeats dropped); ``call`` ignores them (size 0).
        repeats: timed repeats per size.
        warmup: untimed batches per size before the repeats, after one that compiles.
        kinds: some of :data:`CUDA_KINDS`, measured in this order.
        progress: a progress bar on stderr over the repeats (``None``: on a terminal, if slow).
        target_s: about how long one timed batch lasts.

    Returns:
        One :class:`Samples` per kind, in the order of ``kinds``.

    Raises:
        ParameterError: empty or non-positive sizes, an unknown kind, bad counts.
        CommsimError: numba missing, or no GPU and no simulator.
    """
    sz = check_sizes(sizes)
    kinds = check_kinds(kinds, CUDA_KINDS, "cuda")
    check_counts(repeats, warmup)
    gpu = _Gpu.start()
    total = repeats * sum(1 if k == "call" else len(sz) for k in kinds)
    with Progress(total, "calibrate cuda", enabled=progress) as bar:
        return [gpu.measure(kind, sz, repeats, warmup, target_s, bar) for kind in kinds]


def _kernels() -> tuple[Any, Any]:
    """The reduction ``a += b`` and the empty kernel (:mod:`._cuda_kernels`, imported now)."""
    from commsim.bench.calibrate import _cuda_kernels as kernels

    return kernels.add, kernels.empty


class _Gpu:
    """The GPUs numba sees (or the simulator's one), and how to time a batch on them."""

    def __init__(self, cuda: Any, simulated: bool) -> None:
        self.cuda, self.simulated = cuda, simulated
        self.ngpus = 1 if simulated else len(cuda.gpus)
        self.notes: list[str] = [SIMULATED_NOTE] if simulated else []
        self.peers = False  # peer access asked for

    @classmethod
    def start(cls) -> _Gpu:
        """The device, or a one-line error saying why there is none."""
        try:
            from numba import cuda
            from numba.core import config
        except ImportError:
            raise CommsimError("the cuda microbenchmarks need numba (pip install numba)") from None
        if not cuda.is_available():
            raise CommsimError(f"the cuda microbenchmarks cannot run: {NO_GPU}")
        return cls(cuda, bool(config.ENABLE_CUDASIM))

    # -- timing ------------------------------------------------------------------------------------
    def timed(self, enqueue: Callable[[], None], streams: list[Any]) -> float:
        """Seconds from before to after what ``enqueue`` puts on ``streams`` (the first one's
        events, the others joined to it), or the host clock under the simulator."""
        cuda = self.cuda
        if self.simulated:  # the simulator's events record no time
            t0 = time.perf_counter()
            enqueue()
            cuda.synchronize()
            return time.perf_counter() - t0
        first, rest = streams[0], streams[1:]
        start, end = cuda.event(), cuda.event()
        start.record(first)
        for s in rest:  # the others start no earlier than the first
            start.wait(s)
        enqueue()
        for s in rest:  # the first ends no earlier than the others
            done = cuda.event(timing=False)
            done.record(s)
            done.wait(first)
        end.record(first)
        end.synchronize()
        return cuda.event_elapsed_time(start, end) / 1e3

    # -- kinds -------------------------------------------------------------------------------------
    def measure(
        self,
        kind: str,
        sizes: np.ndarray,
        repeats: int,
        warmup: int,
        target_s: float,
        bar: Progress,
    ) -> Samples:
        if kind == "call":
            times = self.call_times(repeats, warmup, bar)
            notes = (*self.notes, "one empty kernel launch and cuda.synchronize() (size 0)")
            return Samples(kind, np.zeros(1), times[None, :], "cuda", 1, notes)
        rows, ks = [], []
        for size in sizes:
            run, per_iteration = self.batch(kind, int(size))
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
        clock = "host clock" if self.simulated else "CUDA events"
        notes = [
            *self.notes,
            f"per operation: (T(k) - T(1)) / (k - 1) over batches of k = {max(ks)} .. "
            f"{min(ks)} enqueued back to back, timed by {clock}",
        ]
        pair = kind in _PAIR
        if pair:
            notes.append(self.pair_note())
        nranks = 2 if pair else 1
        return Samples(kind, sizes, np.array(rows), "cuda", nranks, tuple(notes))

    def pair_note(self) -> str:
        if self.ngpus >= 2:
            return "between GPUs 0 and 1 (peer copies)"
        return "one GPU: device-to-device copies within it, not between two GPUs"

    def batch(self, kind: str, size: int) -> tuple[Callable[[int], float], int]:
        """``run(k)``: seconds of ``k`` iterations of ``kind`` at ``size`` bytes; and the
        operations per iteration."""
        cuda = self.cuda
        if kind not in _PAIR:  # the reduction
            add, _ = _kernels()
            n = -(-size // 4)
            a, b = cuda.to_device(np.ones(n, np.float32)), cuda.to_device(np.ones(n, np.float32))
            stream = cuda.stream()
            grid = self.grid(n)

            def reduce(k: int) -> float:
                def enqueue() -> None:
                    for _ in range(k):
                        add[grid[0], grid[1], stream](a, b)

                return self.timed(enqueue, [stream])

            return reduce, 1
        two = self.ngpus >= 2
        if two:
            self.enable_peers()
        x0 = self.array(0, size)
        x1 = self.array(1 if two else 0, size)
        if kind == "pingpong":
            stream = self.stream(0)

            def pingpong(k: int) -> float:
                def enqueue() -> None:
                    for _ in range(k):
                        x1.copy_to_device(x0, stream=stream)
                        x0.copy_to_device(x1, stream=stream)

                return self.timed(enqueue, [stream])

            return pingpong, 2
        y0 = self.array(0, size)
        y1 = self.array(1 if two else 0, size)
        s0, s1 = self.stream(0), self.stream(1 if two else 0)

        def exchange(k: int) -> float:
            def enqueue() -> None:
                for _ in range(k):
                    y1.copy_to_device(x0, stream=s0)
                    y0.copy_to_device(x1, stream=s1)

            return self.timed(enqueue, [s0, s1])

        return exchange, 1

    def call_times(self, repeats: int, warmup: int, bar: Progress) -> np.ndarray:
        """Host seconds of each of ``repeats`` empty launches, each with ``cuda.synchronize()``."""
        cuda = self.cuda
        _, empty = _kernels()
        a = cuda.device_array(1, np.float32)

        def call() -> float:
            t0 = time.perf_counter()
            empty[1, 1](a)
            cuda.synchronize()
            return time.perf_counter() - t0

        for _ in range(warmup + 1):  # the first compiles
            call()
        out = np.empty(repeats)
        for j in range(repeats):
            out[j] = call()
            bar.update(note="call")
        return out

    # -- devices -----------------------------------------------------------------------------------
    def grid(self, n: int) -> tuple[int, int]:
        """(blocks, threads) of the reduction over ``n`` elements."""
        if self.simulated:
            return _SIM_GRID
        sms = self.cuda.get_current_device().MULTIPROCESSOR_COUNT
        return max(1, min(-(-n // _THREADS), 8 * sms)), _THREADS

    def array(self, gpu: int, size: int) -> Any:
        """``size`` bytes of device memory on ``gpu``, filled."""
        with self.cuda.gpus[gpu]:
            return self.cuda.to_device(np.ones(size, np.uint8))

    def stream(self, gpu: int) -> Any:
        with self.cuda.gpus[gpu]:
            return self.cuda.stream()

    def enable_peers(self) -> None:
        """Peer access between GPUs 0 and 1 both ways, where the hardware allows it (else the
        driver stages peer copies through the host, and the notes say so)."""
        from numba.cuda.cudadrv.driver import CudaAPIError

        if self.peers:
            return
        self.peers = True
        cuda = self.cuda
        contexts = []
        for gpu in (0, 1):
            with cuda.gpus[gpu]:
                contexts.append(cuda.current_context())
        for me, peer in ((0, 1), (1, 0)):
            ctx = contexts[me]
            if not ctx.can_access_peer(peer):
                note = f"GPU {me} cannot access GPU {peer} directly: the driver stages copies"
                if note not in self.notes:
                    self.notes.append(note)
                continue
            with cuda.gpus[me], contextlib.suppress(CudaAPIError):  # enabled already
                ctx.enable_peer_access(contexts[peer].handle)
