r"""The ``commsim`` command line: list, verify, predict and compare collective algorithms.

Commands (``commsim COMMAND --help`` shows each one's options and examples)::

    commsim algorithms [-c COLLECTIVE] [-a ALGORITHM] [--json]
    commsim verify     -c COLLECTIVE [-a A1,A2,..] -p P[,P..] [--param k=v] [--root R] [--json]
    commsim verify     --file schedule.json
    commsim predict    -c COLLECTIVE -a ALGORITHM -p P [-s SIZES] [MODEL] [--json]
    commsim predict    --file schedule.json [-s SIZES] [MODEL] [--json]
    commsim compare    -c COLLECTIVE [-a A1,A2,..] -p P[,P..] [-s SIZES] [MODEL] [--json] [--plot F]

Units. Sizes are bytes with an optional unit: ``B``, decimal ``KB MB GB`` (powers of 1000) or
binary ``KiB MiB GiB`` (powers of 1024); ``--sizes`` takes lists and ranges (``1KiB,64MiB``,
``1KiB..1GiB`` doubling, ``1KB..1GB:x10``, ``0..4KiB:+1KiB``), as ``-p`` does for rank counts
(``8,64,1024``, ``2..1024``). A size is the collective's ``nbytes`` as nccl-tests counts it: the
vector for allreduce/broadcast/reduce, the gathered output for allgather, the input for
reduce-scatter, the per-rank send buffer for alltoall. Times take ``s, ms, us, ns`` (a bare number
is seconds); ``--beta``/``--gamma`` take a bandwidth (``25GB/s``, ``200Gb/s``) or seconds per byte
(``4e-11s/B``).

Model defaults (:data:`DEFAULT_MODEL`) describe a 200 Gb/s (HDR) InfiniBand cluster:
α = 2 µs per message (MPI latency through one switch), β = 1/(25 GB/s) (the link's byte rate),
γ = 1/(100 GB/s) (a reduction kernel streaming near memory bandwidth), single-port full duplex.

Output: aligned tables by default; ``--json`` prints one JSON document on stdout with sizes in
bytes (``nbytes``), times in seconds (``*_s``), bandwidths in bytes/s (``*_Bps``) and ``null`` for
a number that is not finite. A progress indicator goes to stderr for long runs (``--progress``).

Memory: before a schedule is iterated, its footprint is estimated (the verifier's state is about
``Schedule.estimate_bytes()`` (17 to 46 bytes per slot per rank); a prediction holds one
step's transfers, about 100 bytes each, plus
``O(p · sizes)`` clocks) against ``--memory-limit`` (default 75% of physical RAM). ``verify`` and
``predict`` refuse a ``p`` that would not fit; ``compare`` skips that algorithm with a note.

Exit status: 0 success; 1 a schedule failed verification (a result, not a usage error); 2 bad
input (unknown name, unparsable value, malformed schedule file, a ``p`` that would not fit in
memory), reported as one ``commsim[ COMMAND]: error: ...`` line on stderr; 130 interrupted.

This module is the command table and ``main``; the pieces live beside it:
:mod:`commsim._cli_common` (argument groups, parsing arguments into objects, the memory budget),
:mod:`commsim._cli_output` (progress, tables, JSON), :mod:`commsim._cli_commands` (``algorithms``,
``verify``, ``predict``, ``compare``), :mod:`commsim._cli_run` and :mod:`commsim._cli_validate`.
Adding a command (``calibrate``, ...) is one :class:`_Command` row in :data:`COMMANDS`: an
``add_arguments(parser)`` that reuses ``_cli_common``'s argument groups, and a
``run(args) -> int``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Callable, Sequence

import commsim
from commsim import _cli_run, _cli_validate
from commsim._cli_commands import (
    _algorithms_args,
    _cmd_algorithms,
    _cmd_compare,
    _cmd_predict,
    _cmd_verify,
    _compare_args,
    _one_line,
    _predict_args,
    _verify_args,
)
from commsim._cli_common import (
    _MODEL_EPILOG,
    _UNITS_EPILOG,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    _Formatter,
    _Parser,
)
from commsim.errors import CommsimError

# ---------------------------------------------------------------------------------------------
# the command table and main


@dataclasses.dataclass(frozen=True)
class _Command:
    name: str
    help: str
    description: str
    examples: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    show_units: bool = True


COMMANDS: tuple[_Command, ...] = (
    _Command(
        "algorithms",
        "list the registered algorithms with their parameters, constraints and cost",
        "List every registered (collective, algorithm) with its parameters and their defaults,\n"
        "the rank counts it handles, and its alpha-beta-gamma cost formula (n = message size,\n"
        "p = ranks). With -c and -a, print one algorithm's full documentation.",
        "  commsim algorithms\n"
        "  commsim algorithms -c allreduce\n"
        "  commsim algorithms -c allreduce -a ring\n"
        "  commsim algorithms --json",
        _algorithms_args,
        _cmd_algorithms,
        show_units=False,
    ),
    _Command(
        "verify",
        "prove that schedules compute their collective",
        "Build each schedule and run it on random integers with the reference interpreter,\n"
        "checking every rank's final buffer, write races and reads of empty slots. Prints steps,\n"
        "transfers and the time taken; exit status 1 if any schedule fails (the error names the\n"
        "step, rank and slot), 2 on bad input. Memory is about p x slots x 17-46 bytes; a p that\n"
        "would not fit is refused before anything runs.",
        "  commsim verify -c allreduce -a ring -p 8\n"
        "  commsim verify -c allreduce -p 2..64              # every allreduce algorithm\n"
        "  commsim verify -c allreduce -a ring,rabenseifner -p 3,5,8,1000\n"
        "  commsim verify -c broadcast -a binomial -p 7 --root 3\n"
        "  commsim verify --file my_schedule.json",
        _verify_args,
        _cmd_verify,
    ),
    _Command(
        "predict",
        "predict one algorithm's time, algbw and busbw over message sizes",
        "Time one schedule under the Hockney alpha-beta-gamma model (per-rank clocks) for each\n"
        "message size. Columns: time; algbw = size/time and busbw = algbw x nccl-tests' factor\n"
        "(decimal GB/s, as nccl-tests reports); the Chan et al. 2007 lower bound no algorithm can\n"
        "beat under the same model, and the ratio to it.",
        "  commsim predict -c allreduce -a ring -p 64 --sizes 1KiB..1GiB\n"
        "  commsim predict -c allreduce -a ring -p 64 -s 64MiB --beta 200Gb/s --alpha 1.5us\n"
        "  commsim predict -c allgather -a ring -p 1024 -s 1MiB,1GiB --ports multi --json\n"
        "  commsim predict --file my_schedule.json -s 1MiB",
        _predict_args,
        _cmd_predict,
    ),
    _Command(
        "compare",
        "compare algorithms' predicted times over rank counts and sizes; pick the fastest",
        "For each rank count, a table of predicted times (rows: sizes, columns: algorithms) with\n"
        "the fastest marked * and named in the 'winner' column, next to the lower bound. By\n"
        "default every algorithm of the collective takes part; one whose schedule would not fit\n"
        "in memory (or does not support a p) is skipped with a note. Long sweeps show a\n"
        "progress bar on stderr.",
        "  commsim compare -c allreduce -p 64\n"
        "  commsim compare -c allreduce -a ring,rabenseifner -p 8,64,1024 -s 1KiB..1GiB:x4\n"
        "  commsim compare -c allreduce -p 2..1024 -s 4KiB,64MiB --plot allreduce.png\n"
        "  commsim compare -c allgather -p 128 --alpha 5us --beta 400Gb/s --json",
        _compare_args,
        _cmd_compare,
    ),
    _Command(
        "validate",
        _cli_validate.HELP,
        _cli_validate.DESCRIPTION,
        _cli_validate.EXAMPLES,
        _cli_validate.add_arguments,
        _cli_validate.main,
    ),
    _Command(
        "run",
        _cli_run.HELP,
        _cli_run.DESCRIPTION,
        _cli_run.EXAMPLES,
        _cli_run.add_arguments,
        _cli_run.main,
    ),
)


def _parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    top = _Parser(
        prog="commsim",
        description="Collective-communication algorithms as schedules: list them, verify them, "
        "predict and compare their cost, run them for real.",
        epilog="commands:\n"
        + "\n".join(f"  {c.name:<12}{c.help}" for c in COMMANDS)
        + "\n\nRun 'commsim COMMAND --help' for a command's options and examples.\n"
        "Exit status: 0 ok, 1 verification failed, 2 bad input.",
        formatter_class=_Formatter,
        allow_abbrev=False,
    )
    top.add_argument("--version", action="version", version=f"commsim {commsim.__version__}")
    sub = top.add_subparsers(
        dest="command", metavar="COMMAND", parser_class=_Parser, help="one of the commands below"
    )
    subparsers = {}
    for c in COMMANDS:
        epilog = "examples:\n" + c.examples + "\n"
        if c.show_units:
            epilog += "\n" + _UNITS_EPILOG
        if c.name in ("predict", "compare"):
            epilog += "\n" + _MODEL_EPILOG
        sp = sub.add_parser(  # no help=: the epilog lists the commands, aligned
            c.name,
            description=c.description,
            epilog=epilog,
            formatter_class=_Formatter,
            allow_abbrev=False,
        )
        c.add_arguments(sp)
        sp.set_defaults(_run=c.run)
        subparsers[c.name] = sp
    return top, subparsers


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``commsim`` command line; return the exit status (see the module docstring)."""
    parser, subparsers = _parser()
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:  # report it against the subcommand, whose --help is the one to read
            sub = subparsers.get(getattr(args, "command", None) or "", parser)
            sub.error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as e:  # --help, --version, or a usage error already printed
        return int(e.code or 0) if not isinstance(e.code, str) else EXIT_USAGE
    if args.command is None:
        names = ", ".join(c.name for c in COMMANDS)
        print(f"commsim: error: choose a command: {names} (see 'commsim --help')", file=sys.stderr)
        return EXIT_USAGE
    try:
        return args._run(args)
    except CommsimError as e:
        print(f"commsim: error: {_one_line(e)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("commsim: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `commsim ... | head`: stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
