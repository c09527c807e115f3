"""What every executor benchmark shares: its request from the command line, and the closing
lines it prints (the target ratio, JSON out, exit status)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any


def bench_request(args: Any, sizes: Sequence[int]) -> Any:
    """The :class:`commsim.bench.BenchRequest` of ``--dtype --iters --warmup --no-check``
    (imported here, after the script has set the environment JAX reads)."""
    from commsim.bench import BenchRequest

    return BenchRequest(
        tuple(sizes),
        dtype=args.dtype,
        iters=args.iters,
        warmup=args.warmup,
        check=not args.no_check,
    )


def finish(out: list[dict[str, Any]], baseline: str, target: str, json_path: str | None) -> int:
    """Print each algorithm's busbw ratio to ``baseline`` at the largest size, write ``out`` as
    JSON to ``json_path`` if given; 0 if every check passed, else 1."""
    last = max(m["size"] for m in out)
    print(f"\n# ratio to {baseline} busbw at {last} bytes (target: {target})")
    for m in out:
        if m["size"] == last:
            print(f"{m['algorithm']:>14}: {m['ratio']:.2f}x")
    if json_path:
        with open(json_path, "w") as f:
            json.dump(out, f, indent=1)
    return 0 if all(m["check"] != "FAILED" for m in out) else 1
