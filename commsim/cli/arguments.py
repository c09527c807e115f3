"""Argument plumbing shared by every command: the parser class, help layout, the integer and
``--sizes`` arguments, and the help epilogs that explain the units.

An argument group that needs an explanation appends it to its parser's epilog
(:func:`add_epilog`), so a command's ``--help`` explains exactly the options it has.
"""

from __future__ import annotations

import argparse
import re
import shutil
from collections.abc import Callable
from typing import Any, NoReturn

from commsim import units
from commsim.cli.errors import EXIT_USAGE, clip, quote

__all__ = [
    "DEFAULT_PREDICT_SIZES",
    "DEFAULT_RUN_SIZES",
    "DEFAULT_VALIDATE_SIZES",
    "UNITS_EPILOG",
    "HelpFormatter",
    "Parser",
    "add_epilog",
    "add_sizes_argument",
    "int_type",
    "parse_sizes",
]

#: sizes ``predict`` and ``compare`` sweep: a prediction is cheap, so every power of two
DEFAULT_PREDICT_SIZES = "1KiB..1GiB"
#: sizes ``run`` times for real: each is run ``warmup + iters`` times on every rank
DEFAULT_RUN_SIZES = "1KiB..64MiB"
#: sizes ``validate`` runs: a few, since every predicted winner runs at each of them
DEFAULT_VALIDATE_SIZES = "64KiB,1MiB,16MiB"

UNITS_EPILOG = """\
units:
  sizes   64MiB, 1GB, 4096 (bytes); 1Gb, 100Mb (bits: 1Gb = 125,000,000 B; a lower-case
          gb is refused as ambiguous); lists 1KiB,64MiB; ranges 1KiB..1GiB (doubling),
          1KB..1GB:x10, 0..4KiB:+1KiB. A size is nccl-tests' nbytes: the vector for
          allreduce/broadcast/reduce, the gathered output for allgather, the input for
          reduce_scatter, the per-rank send buffer for alltoall.
  ranks   8 | 8,64,1024 | 2..1024 (powers of two) | 2..16:+1 (every p)
"""


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line: ``PROG: error: MSG (see 'PROG --help')``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # `--sizes -1KiB`, `-p -3`: a value that looks negative is a value (no option looks so),
        # so the user hears "size must be >= 0" instead of "expected one argument"
        self._negative_number_matcher = re.compile(r"^-\.?\d")

    def error(self, message: str) -> NoReturn:
        line = clip(" ".join(f"{self.prog}: error: {message}".split()))  # argparse quotes values
        self.exit(EXIT_USAGE, f"{line} (see '{self.prog} --help')\n")


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions and epilogs as written; at most 100 columns."""

    def __init__(self, prog: str) -> None:
        width = min(shutil.get_terminal_size((100, 24)).columns, 100)
        super().__init__(prog, max_help_position=30, width=width)


def add_epilog(parser: argparse.ArgumentParser, text: str) -> None:
    """Append ``text`` (a help section) to ``parser``'s epilog, once."""
    epilog = parser.epilog or ""
    if text not in epilog:
        parser.epilog = f"{epilog}\n{text}" if epilog else text


def int_type(name: str, lo: int) -> Callable[[str], int]:
    """An argparse ``type``: an integer ``>= lo``, or a usage error naming ``name``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{name} must be an integer, got {quote(text)}"
            ) from None
        if value < lo:
            raise argparse.ArgumentTypeError(f"{name} must be >= {lo}, got {value}")
        return value

    return parse


def add_sizes_argument(group: Any, default: str) -> None:
    """``-s/--sizes`` (default ``default``) in ``group`` (the schedule group explains units)."""
    group.add_argument(
        "-s",
        "--sizes",
        "-n",
        "--nbytes",
        dest="sizes",
        default=default,
        metavar="SIZES",
        help="message sizes (nccl-tests nbytes): a list and/or ranges of sizes with units B, "
        "KB/MB/GB (x1000) or KiB/MiB/GiB (x1024), or bits Kb/Mb/Gb (1Gb = 125,000,000 B); "
        "A..B doubles from A to B, A..B:xF multiplies "
        f"by F, A..B:+S adds S (default: {default})",
    )


def parse_sizes(text: str) -> tuple[int, ...]:
    """``--sizes`` as bytes (a one-line :class:`commsim.units.UnitError` if it does not parse)."""
    return tuple(units.parse_sizes(text))
