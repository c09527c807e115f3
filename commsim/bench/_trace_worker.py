"""The program every rank runs under ``mpirun`` for a measured trace (:func:`commsim.bench.trace_mpi`).

``python -m commsim.bench._trace_worker CONFIG``, where ``CONFIG`` is a JSON object with
``schedule`` (an NPZ path, :func:`commsim.interop.write_npz`), ``request``
(:meth:`commsim.bench.BenchRequest.to_dict`; its last size is traced) and ``dir``. Every rank
runs :func:`commsim.bench._trace.trace_ranks`; rank 0 writes ``results.json`` (``start``,
``end``: ``[p, nsteps]`` seconds, ``null`` where a rank has no work in a step; ``nbytes``;
``clock``). Errors
go through :func:`commsim.bench._mpi_worker.rank_main`: one line, ``MPI_Abort``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from commsim.bench._mpi_worker import rank_main

__all__ = ["main"]


def _run(config: dict[str, Any], workdir: Path, world: Any) -> None:
    from commsim.bench._request import BenchRequest
    from commsim.bench._trace import results_json, trace_ranks
    from commsim.exec import get_backend
    from commsim.interop import read_npz

    backend = get_backend(config.get("backend", "mpi"))
    got = trace_ranks(
        read_npz(config["schedule"]), BenchRequest.from_dict(config["request"]), backend
    )
    if got is not None:
        out = workdir / "results.json"
        tmp = out.with_suffix(".tmp")
        tmp.write_text(results_json(got))
        tmp.replace(out)


def main(argv: list[str] | None = None) -> int:
    """Entry point of one rank."""
    return rank_main(sys.argv[1:] if argv is None else argv, _run)


if __name__ == "__main__":
    sys.exit(main())
