"""Calibrate: measure a transport on this machine, fit it, and return a :class:`Profile`.

:func:`calibrate` runs the backend's microbenchmarks (:class:`Samples` of each kind), then
:func:`profile_from_samples` fits them (:func:`commsim.bench.calibrate.fit_curve`, robust and
piecewise) and derives what the models read:

* Hockney's message time: the ``exchange`` curve (every rank sends and receives at once, as in a
  schedule's step), and the ``pingpong`` curve beside it;
* γ: the slope of the ``reduction`` curve's last piece (large reductions stream from memory);
* LogGP (Alexandrov et al. 1995; Hoefler et al., LogGOPSim 2010, for the measurement):
  :math:`o` = the median sender overhead of eager sends, :math:`g` = the burst gap at the
  smallest size, :math:`G` = the burst curve's last slope, and :math:`L = t_\\text{pingpong}(0) - 2o`
  (a one-way small message costs :math:`o + L + o`), floored at 0;
* the executor's per-call overhead: the median of the ``call`` samples.
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib
import platform
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from commsim.bench._launch import DEFAULT_TIMEOUT, run_module
from commsim.bench._machine import oversubscription, usable_cores
from commsim.bench.calibrate._cuda_bench import CUDA_KINDS
from commsim.bench.calibrate._jax_bench import JAX_KINDS
from commsim.bench.calibrate._mpi_bench import MPI_KINDS
from commsim.bench.calibrate._samples import KINDS, Samples
from commsim.bench.calibrate._stability import fit_stable
from commsim.errors import CommsimError
from commsim.exec import BACKENDS, backend_info
from commsim.profiles import LogGPParameters, Profile

__all__ = [
    "DEFAULT_BLOCKS",
    "DEFAULT_REPEATS",
    "DEFAULT_SIZES",
    "SUITES",
    "Suite",
    "calibrate",
    "cuda_device_samples",
    "default_blocks",
    "jax_device_samples",
    "machine",
    "mpi_samples",
    "profile_from_samples",
    "suite_of",
]

#: 8 B .. 64 MiB, powers of two (the issue's range; nccl-tests' default step)
DEFAULT_SIZES = tuple(2**k for k in range(3, 27))
#: timed repeats per size, and the interleaved measurement blocks (passes over the kinds and
#: sizes) they are taken in, which the stability check resamples: 30 repeats as 10 blocks of 3
#: (:mod:`commsim.bench.calibrate._stability`). Of six back-to-back calibrations, all 15 pairs
#: agreed on every curve with 10 blocks; re-fitted from their first 5 blocks, 7 to 15 pairs per
#: curve (docs/validation.md)
DEFAULT_REPEATS = 30
DEFAULT_BLOCKS = 10


def machine() -> str:
    """This machine in one line: host, cores, processor, OS."""
    cpu = platform.processor() or platform.machine()
    return f"{platform.node()}: {usable_cores()} cores, {cpu}, {platform.system()} {platform.release()}"


def _check_sizes(sizes: Sequence[int]) -> list[int]:
    out = sorted({int(s) for s in sizes})
    if len(out) < 2:
        raise CommsimError(
            f"calibration needs at least 2 distinct sizes to fit alpha and beta, got {len(out)}"
        )
    if out[0] < 1:
        raise CommsimError(f"calibration sizes must be >= 1 byte, got {out[0]}")
    return out


def default_blocks(repeats: int) -> int:
    """The most blocks up to :data:`DEFAULT_BLOCKS` that split ``repeats`` evenly.

    Examples:
        >>> default_blocks(30), default_blocks(15), default_blocks(8), default_blocks(7)
        (10, 5, 8, 7)
    """
    return next(b for b in range(min(DEFAULT_BLOCKS, repeats), 0, -1) if repeats % b == 0)


def _check_blocks(repeats: int, blocks: int) -> None:
    if blocks < 1 or repeats % blocks:
        raise CommsimError(
            f"--repeats {repeats} do not split into --blocks {blocks} equal blocks: give a "
            "multiple of the blocks (e.g. --repeats 15 --blocks 5)"
        )


def mpi_samples(
    nranks: int,
    sizes: Sequence[int] = DEFAULT_SIZES,
    *,
    repeats: int = DEFAULT_REPEATS,
    warmup: int = 2,
    blocks: int = 1,
    kinds: Sequence[str] = MPI_KINDS,
    timeout: float = DEFAULT_TIMEOUT,
    progress: bool | None = None,
) -> list[Samples]:
    """Run the MPI microbenchmarks (:mod:`commsim.bench.calibrate._mpi_bench`) on ``nranks``
    processes of one ``mpirun``; one :class:`Samples` per kind, the repeats of each size taken
    in ``blocks`` interleaved passes over every kind and size."""
    if nranks < 2:
        raise CommsimError(f"calibrating MPI needs at least 2 ranks (a ping-pong), got -p {nranks}")
    bad = [k for k in kinds if k not in KINDS]
    if bad:
        raise CommsimError(f"unknown measurement {bad[0]!r}; one of {', '.join(KINDS)}")
    sizes = _check_sizes(sizes)
    _check_blocks(repeats, blocks)
    config = {
        "kinds": list(kinds), "sizes": sizes, "repeats": repeats, "warmup": warmup,
        "blocks": blocks,
    }  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="commsim-calibrate-") as tmp:
        raw = run_module(
            "commsim.bench.calibrate._mpi_bench", config, nranks, Path(tmp), timeout, progress
        )
    note = oversubscription(nranks)
    return [
        Samples(
            r["kind"],
            r["sizes"],
            r["times"],
            r.get("executor", "mpi"),
            nranks,
            (*r.get("notes", ()), *((note,) if note else ())),
            int(r.get("blocks", 1)),
        )
        for r in raw
    ]


def _in_process(module: str, function: str, where: str) -> Callable[..., list[Samples]]:
    """A suite that runs in this process: ``module.function(sizes, repeats=, warmup=,
    progress=)`` (imported when it runs) under the suites' signature; ``nranks`` and ``timeout``
    do not apply to one process, which measures on ``where``. Its repeats of a size run back to
    back, so ``blocks`` splits them into consecutive blocks (not interleaved passes)."""

    def run(
        nranks: int,
        sizes: Sequence[int] = DEFAULT_SIZES,
        *,
        repeats: int = DEFAULT_REPEATS,
        warmup: int = 2,
        blocks: int = 1,
        timeout: float = DEFAULT_TIMEOUT,
        progress: bool | None = None,
    ) -> list[Samples]:
        measure = getattr(importlib.import_module(module), function)
        _check_blocks(repeats, blocks)
        out = measure(_check_sizes(sizes), repeats=repeats, warmup=warmup, progress=progress)
        return [
            dataclasses.replace(s, blocks=blocks) if s.times.shape[1] % blocks == 0 else s
            for s in out
        ]

    run.__name__ = run.__qualname__ = f"{function.partition('_')[0]}_device_samples"
    run.__doc__ = f"The microbenchmarks of :func:`{module}.{function}` on {where}."
    return run


jax_device_samples = _in_process(
    "commsim.bench.calibrate._jax_bench", "jax_samples", "the JAX devices there are"
)
cuda_device_samples = _in_process(
    "commsim.bench.calibrate._cuda_bench", "cuda_samples", "the current CUDA device"
)


@dataclasses.dataclass(frozen=True)
class Suite:
    """A suite of transport microbenchmarks: ``run(nranks, sizes, *, repeats, warmup, blocks,
    timeout, progress)`` returns one :class:`Samples` per kind; ``transport`` says what it measures (a
    profile's header), ``kinds`` which curves it measures."""

    run: Callable[..., list[Samples]]
    transport: str
    kinds: tuple[str, ...]


#: The suites by the kind of transport they measure: a backend's row names its suite
#: (:attr:`commsim.exec.BackendInfo.calibration`), so calibration never asks which backend it is.
SUITES: dict[str, Suite] = {
    "mpi-processes": Suite(
        mpi_samples,
        "MPI (mpi4py on numpy buffers, OSU-style); reductions numpy float32",
        MPI_KINDS,
    ),
    "jax-devices": Suite(
        jax_device_samples,
        "JAX devices as the executor runs a step (ppermute rounds with their slices and "
        "write-backs in one jitted shard_map, every device at once, batch differences)",
        JAX_KINDS,
    ),
    "cuda-device": Suite(
        cuda_device_samples,
        "CUDA devices (numba device copies, batch differences); a numba add kernel",
        CUDA_KINDS,
    ),
}


def suite_of(backend: str) -> Suite:
    """The suite backend ``backend``'s row names; a one-line error for one without."""
    kind = backend_info(backend).calibration
    if kind is None:
        able = [n for n, row in BACKENDS.items() if row.calibration in SUITES]
        listed = ", ".join(able[:-1]) + f" or {able[-1]}" if len(able) > 1 else "".join(able)
        raise CommsimError(f"calibrate runs on {listed}, not {backend!r}")
    return SUITES[kind]


def _transport(backend: str) -> str:
    """What ``backend``'s suite measures, or its name."""
    row = BACKENDS.get(backend)
    suite = SUITES.get(row.calibration or "") if row is not None else None
    return suite.transport if suite is not None else backend


def profile_from_samples(
    samples: Sequence[Samples], *, backend: str, nranks: int, transport: str = ""
) -> Profile:
    """Fit every curve of ``samples`` and derive γ, LogGP and the call overhead (module doc);
    samples taken in blocks get stable fits with intervals
    (:mod:`commsim.bench.calibrate._stability`)."""
    by_kind = {s.kind: s for s in samples}
    curves = {
        k: fit_stable(s)
        for k, s in by_kind.items()
        if k not in ("call", "overhead") and len(s.sizes) >= 2
    }
    overhead = {s.backend: float(np.median(s.times)) for s in samples if s.kind == "call"}
    loggp = None
    o_samples = by_kind.get("overhead")
    if "burst" in curves and "pingpong" in curves and o_samples is not None:
        o = float(np.median(o_samples.median))
        burst = curves["burst"]
        g = float(burst.median_s[0])
        G = burst.fit.pieces[-1].beta
        L = max(float(curves["pingpong"].fit(0.0)) - 2 * o, 0.0)
        loggp = LogGPParameters(L=L, o=o, g=g, G=G)
    notes = tuple(dict.fromkeys(n for s in samples for n in s.notes))
    notes += tuple(n for c in curves.values() if (n := c.hidden_transfer()) is not None)
    return Profile(
        backend=backend,
        nranks=nranks,
        transport=transport or _transport(backend),
        machine=machine(),
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        curves=curves,
        loggp=loggp,
        call_overhead=overhead,
        notes=notes,
    )


def calibrate(
    backend: str,
    nranks: int,
    sizes: Sequence[int] = DEFAULT_SIZES,
    *,
    repeats: int = DEFAULT_REPEATS,
    warmup: int = 2,
    blocks: int | None = None,
    until_stable: int = 0,
    timeout: float = DEFAULT_TIMEOUT,
    progress: bool | None = None,
) -> tuple[Profile, list[Samples]]:
    """Measure ``backend``'s transport on ``nranks`` ranks and fit it: ``(profile, samples)``.

    The microbenchmarks are the suite the backend's row names (:attr:`BackendInfo.calibration
    <commsim.exec.BackendInfo.calibration>`, a key of :data:`SUITES`); a backend without one is
    refused in one line. The repeats are taken in ``blocks`` blocks (1: each size's back to
    back, and no intervals; default :func:`default_blocks`), whose resamples check every
    breakpoint and give every parameter an interval (:mod:`commsim.bench.calibrate._stability`).
    While a curve has a breakpoint its resamples do not confirm, up to ``until_stable`` more
    rounds measure as many blocks again and refit on all of them; a profile still unstable
    after them says so in a note.
    """
    run = suite_of(backend).run
    blocks = default_blocks(repeats) if blocks is None else blocks
    _check_blocks(repeats, blocks)
    if until_stable < 0:
        raise CommsimError(f"--until-stable must be >= 0 rounds, got {until_stable}")

    def measure() -> list[Samples]:
        return run(
            nranks, sizes, repeats=repeats, warmup=warmup, blocks=blocks, timeout=timeout,
            progress=progress,
        )  # fmt: skip

    samples = measure()
    profile = profile_from_samples(samples, backend=backend, nranks=nranks)
    rounds = 0
    while _unstable(profile) and rounds < until_stable and blocks > 1:
        rounds += 1
        samples = _more_blocks(samples, measure())
        profile = profile_from_samples(samples, backend=backend, nranks=nranks)
    if until_stable and _unstable(profile):
        note = (
            f"still unstable after {rounds} more round{'s' * (rounds != 1)} of {blocks} blocks "
            f"({', '.join(_unstable(profile))}): the machine's noise moves the breakpoints"
        )
        profile = dataclasses.replace(profile, notes=(*profile.notes, note))
    curves = [s.blocks for s in samples if s.kind not in ("call", "overhead")]
    few = _few_blocks(repeats, min(curves, default=blocks))  # --until-stable adds blocks
    if few:
        profile = dataclasses.replace(profile, notes=(*profile.notes, few))
    return profile, samples


def _few_blocks(repeats: int, blocks: int) -> str | None:
    """Why a calibration of fewer than :data:`DEFAULT_BLOCKS` blocks is less reproducible, or
    ``None``: one block has no intervals and its pieces come from the BIC; with 5 blocks, six
    back-to-back calibrations moved a curve's piece count (docs/validation.md)."""
    if blocks >= DEFAULT_BLOCKS:
        return None
    advice = f"--repeats {DEFAULT_REPEATS} --blocks {DEFAULT_BLOCKS}, the default"
    if blocks == 1:
        return (
            f"one block of {repeats} repeats: no intervals, and pieces by the BIC, which follows "
            f"each run's noise ({advice}, reproduces better)"
        )
    return (
        f"{blocks} blocks: intervals and breakpoints reproduce less well than with "
        f"{DEFAULT_BLOCKS} ({advice})"
    )


def _unstable(profile: Profile) -> list[str]:
    """The curves whose breakpoints the resamples did not all confirm."""
    return [
        k for k, c in profile.curves.items() if c.intervals is not None and not c.intervals.stable
    ]


def _more_blocks(old: list[Samples], new: list[Samples]) -> list[Samples]:
    """Each kind's samples with a later round's blocks appended (the call samples: the new)."""
    by_kind = {(s.kind, s.backend): s for s in new}
    out = []
    for s in old:
        n = by_kind.get((s.kind, s.backend))
        if n is None or s.blocks == 1 or n.blocks == 1 or len(n.sizes) != len(s.sizes):
            out.append(n or s)
            continue
        times = np.hstack([s.times, n.times])
        out.append(dataclasses.replace(s, times=times, blocks=s.blocks + n.blocks))
    return out
