"""The command table and :func:`main`: build the parser from :data:`COMMANDS`, dispatch, and turn
errors into one line and an exit status."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Protocol

import commsim
from commsim.cli import (
    algorithms,
    calibrate,
    compare,
    export,
    predict,
    run,
    sensitivity,
    show,
    sparse,
    topology,
    tune,
    validate,
    verify,
    whatif,
)
from commsim.cli.arguments import HelpFormatter, Parser
from commsim.cli.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, one_line
from commsim.errors import CommsimError

__all__ = ["COMMANDS", "Command", "main"]


class Command(Protocol):
    """What a command module provides (see :mod:`commsim.cli`)."""

    __name__: str
    HELP: str
    DESCRIPTION: str
    EXAMPLES: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    main: Callable[[argparse.Namespace], int]


#: the commands, in the order ``commsim --help`` lists them
COMMANDS: tuple[Command, ...] = (
    algorithms, show, verify, predict, compare, sensitivity, whatif, tune, topology,
    calibrate, validate, run, export, sparse,
)  # fmt: skip


def _name(command: Command) -> str:
    return command.__name__.rsplit(".", 1)[-1]


def _parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    top = Parser(
        prog="commsim",
        description="Collective-communication algorithms as schedules: list them, verify them, "
        "predict and compare their cost, run them for real.",
        epilog="commands:\n"
        + "\n".join(f"  {_name(c):<12}{c.HELP}" for c in COMMANDS)
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
    for c in COMMANDS:
        sp = sub.add_parser(  # no help=: the epilog lists the commands, aligned
            _name(c),
            description=c.DESCRIPTION,
            epilog="examples:\n" + c.EXAMPLES + "\n",
            formatter_class=HelpFormatter,
            allow_abbrev=False,
        )
        c.add_arguments(sp)  # argument groups append what they need explained to the epilog
        sp.set_defaults(_main=c.main)
        subparsers[_name(c)] = sp
    return top, subparsers


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``commsim`` command line; return the exit status (see :mod:`commsim.cli`)."""
    parser, subparsers = _parser()
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:  # report it against the subcommand, whose --help is the one to read
            sub = subparsers.get(getattr(args, "command", None) or "", parser)
            sub.error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as e:  # --help, --version, or a usage error already printed
        return int(e.code or 0) if not isinstance(e.code, str) else EXIT_USAGE
    if args.command is None:
        names = ", ".join(_name(c) for c in COMMANDS)
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
