"""The execution argument group of ``run`` and ``validate``: where and how schedules are timed
for real, parsed into a :class:`commsim.bench.BenchRequest`.

``--backend`` (one of :data:`commsim.exec.BACKENDS`), ``--dtype``, ``--iters``, ``--warmup``,
``--timeout`` (``mpirun``'s), and for ``run`` ``--no-check`` and ``--no-baseline``.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from typing import Any

from commsim.bench import DEFAULT_TIMEOUT, BenchRequest
from commsim.cli.arguments import add_sizes_argument, int_type
from commsim.exec import BACKENDS

__all__ = ["ExecutionGroup"]


@dataclasses.dataclass(frozen=True)
class ExecutionGroup:
    """The execution options of a command: its default ``backend``, ``iters`` and ``warmup``;
    ``optional_checks`` adds ``--no-check`` and ``--no-baseline``; ``sizes`` (the default) adds
    ``--sizes`` here, for a command without the model group."""

    backend: str
    iters: int
    warmup: int
    optional_checks: bool = False
    sizes: str | None = None

    def add(self, parser: argparse.ArgumentParser, title: str = "execution and timing") -> Any:
        """Add the group to ``parser``; returns it (a command adds its own options to it)."""
        g = parser.add_argument_group(title)
        g.add_argument(
            "--backend",
            choices=tuple(BACKENDS),
            default=self.backend,
            help=f"where to run (default: {self.backend}): "
            + "; ".join(f"{name} = {row.summary}" for name, row in BACKENDS.items()),
        )
        if self.sizes is not None:
            add_sizes_argument(g, self.sizes)
        g.add_argument("--dtype", default="float32", help="element type (default: float32)")
        g.add_argument(
            "--iters",
            type=int_type("iters", 1),
            default=self.iters,
            help=f"timed runs (default: {self.iters})",
        )
        g.add_argument(
            "--warmup",
            type=int_type("warmup", 0),
            default=self.warmup,
            help=f"untimed runs first (default: {self.warmup})",
        )
        if self.optional_checks:
            g.add_argument(
                "--no-check",
                action="store_true",
                help="skip comparing each size's output with the reference interpreter",
            )
            g.add_argument(
                "--no-baseline",
                action="store_true",
                help="do not time the backend's native collective",
            )
        g.add_argument(
            "--timeout",
            type=int_type("timeout", 1),
            default=int(DEFAULT_TIMEOUT),
            metavar="SECONDS",
            help="mpirun backends (mpi, mpi4py, shmem): end mpirun with an error after this "
            f"long, e.g. on a deadlock or a hung rank (default: {DEFAULT_TIMEOUT:g})",
        )
        return g

    def parse(self, args: argparse.Namespace, sizes: Sequence[int]) -> BenchRequest:
        """The timing request at ``sizes`` (bytes)."""
        checks = self.optional_checks
        return BenchRequest(
            sizes=tuple(sizes),
            dtype=args.dtype,
            iters=args.iters,
            warmup=args.warmup,
            check=not (checks and args.no_check),
            baseline=not (checks and args.no_baseline),
        )
