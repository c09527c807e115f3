"""``--wire``: the schedule's messages in a wire format (``predict``, ``compare``, ``run``,
``validate``; ``docs/compression.md``).

One option, parsed once: the name becomes a :class:`commsim._wire.Wire` (an unknown one is a
one-line :class:`~commsim.cli.errors.UsageError`), and a collective that cannot carry it (one
that only moves data) is refused in one line before anything runs. The model commands predict
with :func:`commsim.models.compressed`; the execution commands run the backend with ``wire=``.
"""

from __future__ import annotations

import argparse
from typing import Any

from commsim._wire import Wire, check_data, check_wire, wire
from commsim.cli.errors import UsageError
from commsim.errors import ParameterError, UnknownNameError
from commsim.models import Model, compressed

__all__ = [
    "add_wire_argument",
    "check_backend",
    "check_collective",
    "check_dtype",
    "parse_wire",
    "wired_model",
]

WIRE_HELP = (
    "send every message in this wire format and reduce in float32 after it arrives: fp16 or "
    "bf16 (2 bytes per float32 element), int8 (1 byte plus a float32 scale per 256 elements); "
    "reductions only (allreduce, reduce, reduce_scatter); see docs/compression.md "
    "(default: none, the data's own dtype)"
)


def add_wire_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--wire`` in a group of its own."""
    group = parser.add_argument_group("compression (docs/compression.md)")
    group.add_argument("--wire", metavar="fp16|bf16|int8", default=None, help=WIRE_HELP)


def parse_wire(args: argparse.Namespace) -> Wire | None:
    """``--wire`` as a :class:`~commsim._wire.Wire` (``None`` when not given)."""
    try:
        return wire(getattr(args, "wire", None))
    except UnknownNameError as e:
        raise UsageError(f"--wire: {e}") from None


def check_collective(w: Wire | None, collective: str, dtype: Any = None) -> None:
    """Refuse, in one line, ``--wire`` on a collective (or dtype) that cannot carry it."""
    try:
        check_wire(w, collective, dtype)
    except ParameterError as e:
        raise UsageError(f"--wire: {e}") from None


def check_dtype(w: Wire | None, dtype: Any) -> None:
    """Refuse, in one line, ``--wire`` on data that is not float32 or float64 (``--dtype``)."""
    try:
        check_data(w, dtype)
    except ParameterError as e:
        raise UsageError(f"--wire: {e}") from None


def wired_model(model: Model, w: Wire | None) -> Model:
    """``model`` with its messages in ``w`` (:func:`commsim.models.compressed`), or itself."""
    try:
        return compressed(model, w)
    except ParameterError as e:
        raise UsageError(f"--wire: {e}") from None


def check_backend(w: Wire | None, backend: str) -> None:
    """Refuse, in one line, ``--wire`` on a backend whose row cannot send a wire format."""
    if w is None:
        return
    from commsim.exec import check_compression  # the backends: imported by commands that run

    try:
        check_compression(backend)
    except ParameterError as e:
        raise UsageError(f"--wire: {e}") from None
