"""``commsim algorithms``: list the registered algorithms, or show one in full."""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import textwrap

from commsim._collectives import COLLECTIVES
from commsim.algorithms import REGISTRY, AlgorithmInfo, available, info
from commsim.cli.errors import EXIT_OK, UsageError
from commsim.cli.output import format_params, format_table, to_json
from commsim.cli.rst import to_text

__all__ = [
    "DESCRIPTION",
    "EXAMPLES",
    "HELP",
    "AlgorithmsRequest",
    "AlgorithmsResult",
    "add_arguments",
    "compute",
    "main",
    "parse",
    "render",
]

HELP = "list the registered algorithms with their parameters, constraints and cost"
DESCRIPTION = """\
List every registered (collective, algorithm) with its parameters and their defaults,
the rank counts it handles, and its alpha-beta-gamma cost formula (n = message size,
p = ranks). With -c and -a, print one algorithm's full documentation."""
EXAMPLES = """\
  commsim algorithms
  commsim algorithms -c allreduce
  commsim algorithms -c allreduce -a ring
  commsim algorithms --json"""

_MIN_WIDTH = 100  # the table wraps its text columns to the terminal, but no narrower than this


@dataclasses.dataclass(frozen=True)
class AlgorithmsRequest:
    """Every algorithm, one collective's (``collective``), or one in full (and ``algorithm``)."""

    collective: str | None = None
    algorithm: str | None = None
    as_json: bool = False


@dataclasses.dataclass(frozen=True)
class AlgorithmsResult:
    """The registry rows asked for; ``detail`` when one algorithm was asked for in full."""

    collective: str | None
    rows: tuple[AlgorithmInfo, ...]
    detail: bool


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-c", "--collective", metavar="C", help="only this collective's algorithms")
    parser.add_argument(
        "-a", "--algorithm", metavar="A", help="show one algorithm in full (needs -c)"
    )
    parser.add_argument(
        "--json", action="store_true", help="print one JSON document instead of a table"
    )


def parse(args: argparse.Namespace) -> AlgorithmsRequest:
    if args.collective:
        available(args.collective)  # UnknownNameError with the closest names
    if args.algorithm:
        if not args.collective:
            raise UsageError("-a needs -c (which collective's algorithm?)")
        info(args.collective, args.algorithm)
    return AlgorithmsRequest(args.collective or None, args.algorithm or None, args.json)


def compute(request: AlgorithmsRequest) -> AlgorithmsResult:
    if request.collective and request.algorithm:
        return AlgorithmsResult(
            request.collective, (info(request.collective, request.algorithm),), detail=True
        )
    rows = [r for r in REGISTRY.values() if request.collective in (None, r.collective)]
    rows.sort(key=lambda r: (COLLECTIVES.index(r.collective), r.algorithm))
    return AlgorithmsResult(request.collective, tuple(rows), detail=False)


def render(result: AlgorithmsResult, as_json: bool) -> str:
    if as_json:
        return to_json(
            [
                {
                    "collective": r.collective,
                    "algorithm": r.algorithm,
                    "params": r.params,
                    "constraints": r.constraints,
                    "cost": r.cost,
                    "reference": r.reference,
                }
                for r in result.rows
            ]
        )
    if not result.rows:
        return f"no {result.collective} algorithms are registered yet"
    if result.detail:
        (r,) = result.rows
        return (
            f"{r.collective}/{r.algorithm}\n\n"
            f"cost:        {r.cost}\nconstraints: {r.constraints}\n"
            f"parameters:  {format_params(r.params)}\nreference:   {r.reference or '-'}\n\n"
            f"{to_text(r.doc)}"
        )
    return _render_table(result.rows)


def _render_table(rows: tuple[AlgorithmInfo, ...]) -> str:
    width = max(shutil.get_terminal_size((120, 24)).columns, _MIN_WIDTH)
    fixed = max(len(r.collective) for r in rows) + max(len(r.algorithm) for r in rows) + 2 * 4
    param_w = min(max(len(format_params(r.params)) for r in rows), 20)
    free = max(width - fixed - param_w - 2, 40)
    cons_w, cost_w = free * 2 // 5, free - free * 2 // 5

    def wrap(text: str, w: int) -> str:
        return "\n".join(textwrap.wrap(text, w, break_on_hyphens=False)) or "-"

    table = [
        [
            r.collective,
            r.algorithm,
            wrap(format_params(r.params), param_w),
            wrap(r.constraints, cons_w),
            wrap(r.cost, cost_w),
        ]
        for r in rows
    ]
    headers = ["collective", "algorithm", "parameters", "constraints", "cost"]
    return (
        format_table(headers, table, "lllll")
        + "\n\nn = message size (bytes), p = ranks. "
        + "Details: commsim algorithms -c COLLECTIVE -a NAME"
    )


def main(args: argparse.Namespace) -> int:
    request = parse(args)
    print(render(compute(request), request.as_json))
    return EXIT_OK
