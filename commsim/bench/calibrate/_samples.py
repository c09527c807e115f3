"""What one calibration microbenchmark measured: raw times per size, before any fit.

Every way of measuring a transport (MPI processes through mpi4py, JAX devices, CUDA devices)
returns :class:`Samples`, and only the fits (:mod:`commsim.bench.calibrate._fit`) turn them into
model parameters, so a new backend adds measurements and never touches the statistics.

Kinds (``Samples.kind``), each a time in seconds for one repeat at one size:

=============  ======================================================================
``pingpong``   one-way time of one message of ``size`` bytes: half a round trip
               (OSU ``osu_latency``); the α-β fit of the transport
``exchange``   both ends send ``size`` bytes to each other at once (a ``sendrecv``):
               what sharing one memory system costs
``reduction``  one local reduction ``a += b`` over ``size`` bytes: γ
``burst``      per-message time of ``k`` back-to-back sends of ``size`` bytes, the
               first one's latency excluded: LogGP's gap g (small sizes) and G (large)
``overhead``   sender's time to hand one message of ``size`` bytes to the transport
               (returns before delivery): LogGP's o
``call``       one executor call that moves nothing (``size`` 0): the per-call overhead
               of the executor (JAX dispatch, ``block_until_ready``), beside the transport
=============  ======================================================================
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from commsim.errors import CommsimError

__all__ = ["KINDS", "Samples"]

KINDS = ("pingpong", "exchange", "step", "reduction", "burst", "overhead", "call")


@dataclasses.dataclass(frozen=True)
class Samples:
    """``times[i, j]``: seconds of repeat ``j`` at ``sizes[i]`` bytes, for one ``kind``.

    ``blocks``: the repeats were taken in this many blocks (MPI: interleaved passes over every
    kind and size; JAX and CUDA: runs of consecutive repeats), block ``b`` the columns
    ``b * r .. (b + 1) * r - 1`` (``r = repeats / blocks``); 1 when each size's repeats ran
    back to back as one. :meth:`block_medians` gives each block's own medians."""

    kind: str
    sizes: np.ndarray  # bytes, [n], increasing
    times: np.ndarray  # seconds, [n, repeats]
    backend: str  # "mpi", "jax" or "cuda"
    nranks: int  # processes or devices that ran it (2 for a ping-pong)
    notes: tuple[str, ...] = ()  # why the numbers may not mean what they seem
    blocks: int = 1  # the blocks that took the repeats (the class docstring)

    def __post_init__(self) -> None:
        sizes = np.asarray(self.sizes, dtype=np.float64).reshape(-1)
        times = np.asarray(self.times, dtype=np.float64)
        if self.kind not in KINDS:
            raise CommsimError(f"unknown sample kind {self.kind!r}; one of {', '.join(KINDS)}")
        if times.ndim != 2 or times.shape[0] != len(sizes):
            raise CommsimError(
                f"{self.kind} samples need times [sizes, repeats], got {times.shape} for "
                f"{len(sizes)} sizes"
            )
        if isinstance(self.blocks, bool) or not isinstance(self.blocks, int) or self.blocks < 1:
            raise CommsimError(f"{self.kind} samples: blocks must be a whole number >= 1")
        if times.shape[1] % self.blocks:
            raise CommsimError(
                f"{self.kind} samples: {times.shape[1]} repeats do not split into "
                f"{self.blocks} blocks"
            )
        object.__setattr__(self, "sizes", sizes)
        object.__setattr__(self, "times", times)
        object.__setattr__(self, "notes", tuple(self.notes))

    @property
    def median(self) -> np.ndarray:
        """The median time per size (robust to a repeat that the machine interrupted)."""
        return np.median(self.times, axis=1)

    def block_medians(self) -> np.ndarray:
        """``[blocks, sizes]``: the median time per size within each block.

        Examples:
            >>> s = Samples("pingpong", [8, 16], [[1, 2, 3, 5], [2, 2, 4, 4]], "mpi", 2, blocks=2)
            >>> s.block_medians().tolist()
            [[1.5, 2.0], [4.0, 4.0]]
        """
        per = self.times.shape[1] // self.blocks
        return np.median(self.times.reshape(len(self.sizes), self.blocks, per), axis=2).T

    @property
    def spread(self) -> np.ndarray:
        """Interquartile range over the median, per size."""
        q1, q3 = np.percentile(self.times, [25, 75], axis=1)
        med = self.median
        return np.divide(q3 - q1, med, out=np.zeros_like(med), where=med > 0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "sizes": self.sizes.tolist(),
            "times": self.times.tolist(),
            "backend": self.backend,
            "nranks": self.nranks,
            "notes": list(self.notes),
            "blocks": self.blocks,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Samples:
        return cls(**data)
