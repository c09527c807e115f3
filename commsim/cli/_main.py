"""The command table and :func:`main`: build the parser, dispatch, and turn errors into one line
and an exit status.

Only the chosen command's module is imported. ``commsim --help`` lists the commands from
:data:`COMMAND_HELP`, a static table of names and one-line helps (each equal to its module's
``HELP``, ``tests/cli/test_main.py`` checks it), so the top-level help imports no command, no
algorithm and no model; ``commsim predict ...`` imports :mod:`commsim.cli.predict` and what it
uses, never the thirteen other commands. The tuple of command modules, :data:`COMMANDS`, is built
on first use (``commsim.cli.COMMANDS``) for code that wants every command.

See Also:
    :mod:`commsim._lazy`: the same idea for the library's packages.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Protocol

import commsim
from commsim.cli.arguments import HelpFormatter, Parser
from commsim.cli.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, one_line
from commsim.errors import CommsimError

__all__ = ["COMMAND_HELP", "Command", "command_module", "commands", "main"]


class Command(Protocol):
    """What a command module provides (see :mod:`commsim.cli`)."""

    __name__: str
    HELP: str
    DESCRIPTION: str
    EXAMPLES: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    main: Callable[[argparse.Namespace], int]


#: every command (the module ``commsim.cli.NAME``) and its ``HELP``, in the order ``commsim
#: --help`` lists them
COMMAND_HELP: dict[str, str] = {
    "algorithms": "list the registered algorithms with their parameters, constraints and cost",
    "show": "draw a schedule step by step, or list its messages",
    "verify": "prove that schedules compute their collective",
    "predict": "predict one algorithm's time, algbw and busbw over message sizes",
    "compare": "compare algorithms' predicted times over rank counts and sizes; pick the fastest",
    "sensitivity": "which parameter one algorithm's time is most sensitive to, per message size",
    "whatif": "evaluate a grid of what-if clusters at once: times per algorithm and where the "
    "winner changes",
    "tune": "choose the fastest algorithm and parameters per size range (a tuner table)",
    "topology": "summarize a network (a generator, a graph file or a cluster) and draw it",
    "calibrate": "measure this machine's transport (or read an nccl-tests log) and fit the "
    "models to it",
    "validate": "run algorithms for real and print measured next to predicted, with the error",
    "run": "run an algorithm for real on a backend and time it against the native collective",
    "export": "write a schedule as MSCCL-IR XML or LogGOPSim GOAL",
    "sparse": "sparse allreduce vs dense ring per data density (SparCML split-allgather)",
}


def command_module(name: str) -> Command:
    """The module of the command ``name`` (a key of :data:`COMMAND_HELP`), imported now."""
    return importlib.import_module(f"commsim.cli.{name}")  # type: ignore[return-value]


def commands() -> tuple[ModuleType, ...]:
    """Every command's module, in :data:`COMMAND_HELP`'s order (imports all fourteen)."""
    return tuple(command_module(name) for name in COMMAND_HELP)  # type: ignore[misc]


def _chosen(argv: Sequence[str]) -> str | None:
    """The command named on the line: its first word that is not an option (the top level
    has no option that takes a value), or ``None``."""
    return next((word for word in argv if not word.startswith("-")), None)


def _parser(
    build: Sequence[str] | None = None,
) -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The top-level parser, and the subparsers of the commands in ``build`` (``None``: all)
    with their options; every other command is a name without options (enough for
    ``--help`` and for argparse's "invalid choice")."""
    build = list(COMMAND_HELP) if build is None else [n for n in build if n in COMMAND_HELP]
    top = Parser(
        prog="commsim",
        description="Collective-communication algorithms as schedules: list them, verify them, "
        "predict and compare their cost, run them for real.",
        epilog="commands:\n"
        + "\n".join(f"  {name:<12}{line}" for name, line in COMMAND_HELP.items())
        + "\n\nRun 'commsim COMMAND --help' for a command's options and examples.\n"
        "Exit status: 0 ok, 1 a verification or a run's check failed, 2 bad input.",
        formatter_class=HelpFormatter,
        allow_abbrev=False,
    )
    top.add_argument("--version", action="version", version=f"commsim {commsim.__version__}")
    sub = top.add_subparsers(
        dest="command", metavar="COMMAND", parser_class=Parser, help="one of the commands below"
    )
    subparsers = {}
    for name in COMMAND_HELP:
        if name not in build:
            sub.add_parser(name, add_help=False)
            continue
        c = command_module(name)
        sp = sub.add_parser(  # no help=: the epilog lists the commands, aligned
            name,
            description=c.DESCRIPTION,
            epilog="examples:\n" + c.EXAMPLES + "\n",
            formatter_class=HelpFormatter,
            allow_abbrev=False,
        )
        c.add_arguments(sp)  # argument groups append what they need explained to the epilog
        sp.set_defaults(_main=c.main)
        subparsers[name] = sp
    return top, subparsers


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``commsim`` command line; return the exit status (see :mod:`commsim.cli`)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    chosen = _chosen(argv)
    parser, subparsers = _parser([] if chosen is None else [chosen])
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:  # report it against the subcommand, whose --help is the one to read
            sub = subparsers.get(getattr(args, "command", None) or "", parser)
            sub.error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as e:  # --help, --version, or a usage error already printed
        return int(e.code or 0) if not isinstance(e.code, str) else EXIT_USAGE
    if args.command is None:
        names = ", ".join(COMMAND_HELP)
        print(f"commsim: error: choose a command: {names} (see 'commsim --help')", file=sys.stderr)
        return EXIT_USAGE
    try:
        return args._main(args)
    except CommsimError as e:
        print(f"commsim: error: {one_line(e)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("commsim: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `commsim ... | head`: stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
