"""Exit statuses and the command line's one error class.

Every error the command line reports is a :class:`commsim.CommsimError`: bad input found while
parsing is a :class:`UsageError`; a schedule that would not fit in memory a
:class:`commsim.ResourceError`; an unknown name a :class:`commsim.UnknownNameError`; a malformed
schedule file a :class:`commsim.ScheduleError`. :func:`commsim.cli.main` prints any of them as one
``commsim: error: ...`` line and exits with :data:`EXIT_USAGE`.
"""

from __future__ import annotations

from commsim.errors import CommsimError

__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "UsageError",
    "clip",
    "one_line",
    "quote",
]

EXIT_OK = 0  # success
EXIT_FAILED = 1  # a result, not a usage error: a schedule failed verification, a run its check
EXIT_USAGE = 2  # bad input, reported as one line on stderr
EXIT_INTERRUPTED = 130  # Ctrl-C


class UsageError(CommsimError):
    """Bad command-line input found after argparse (printed as one line, exit status 2)."""


_MAX_QUOTE = 60  # characters of a user's value quoted in a message
_MAX_LINE = 500  # characters of an error line


def one_line(error: BaseException) -> str:
    """The error's message on one line (white space folded, :func:`clip`-ped), as the command
    line prints it."""
    return clip(" ".join(str(error).split()))


def clip(line: str) -> str:
    """``line`` cut to 500 characters, saying so: a value pasted by mistake (a file's contents,
    a 5,000-digit number) must not become a screenful of error."""
    if len(line) <= _MAX_LINE:
        return line
    return f"{line[: _MAX_LINE - 40]}... ({len(line):,} characters in all)"


def quote(text: str) -> str:
    """``repr(text)`` for a message, cut after 60 characters with the length said."""
    if len(text) <= _MAX_QUOTE:
        return repr(text)
    return f"{text[:_MAX_QUOTE]!r}... ({len(text):,} characters)"
