"""``--trace FILE.json``, shared by ``commsim predict`` (a model's prediction) and ``commsim run``
(a measured MPI run): the option, its check, and writing the Chrome trace
(:mod:`commsim.models._trace` has the format)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from commsim import units
from commsim.cli.errors import UsageError, quote

__all__ = ["add_trace_argument", "parse_trace", "write_trace"]


def add_trace_argument(group: Any, help: str) -> None:
    group.add_argument("--trace", metavar="FILE.json", help=help)


def parse_trace(args: argparse.Namespace) -> Path | None:
    """The ``--trace`` file (``None`` when not given), or a one-line error."""
    value = getattr(args, "trace", None)
    if value is None:
        return None
    if not value.strip():
        raise UsageError("--trace is empty: give a .json file name")
    path = Path(value)
    if path.suffix.lower() != ".json" or not path.parent.is_dir():
        raise UsageError(f"--trace {quote(value)}: a .json file in an existing directory")
    return path


def write_trace(path: Path, doc: dict[str, Any], nbytes: float, what: str = "") -> str:
    """Write ``doc``; the note that says so (``what``: how it was made, appended)."""
    try:
        path.write_text(json.dumps(doc))
    except OSError as e:
        raise UsageError(f"--trace {path}: cannot write ({e.strerror or e})") from None
    size = units.format_size(int(nbytes))
    return f"trace of {size} written to {path} (open it in ui.perfetto.dev){what}"
