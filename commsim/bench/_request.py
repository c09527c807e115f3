"""What to measure: one typed, frozen request shared by every way of timing a schedule.

A :class:`BenchRequest` says *how* to time (message sizes, element type, runs, checks, seed), never
*what*: the schedules travel beside it as objects (:func:`commsim.bench.measure`) or as saved files
(the MPI worker). It is checked once, when it is made, so a bad value is a one-sentence
:class:`commsim.CommsimError` before any device or process starts, and it crosses the process
boundary to the MPI ranks as the plain dict of :meth:`BenchRequest.to_dict`.
"""

from __future__ import annotations

import dataclasses
import functools
import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np

from commsim._compat import as_dtype
from commsim._wire import wire as as_wire
from commsim.errors import CommsimError

__all__ = ["BenchRequest"]


def _whole(name: str, value: Any, lo: int, meaning: str) -> int:
    """``value`` as an ``int >= lo``, or an error naming the field and what it means."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < lo:
        raise CommsimError(f"need {name} >= {lo} ({meaning}), got {name}={value!r}")
    return int(value)


def _dtype(value: Any) -> str:
    """The numeric element type's name (``"float32"``), or a one-line error quoting the input."""
    dt = as_dtype(value)
    if dt.kind not in "iufc" and dt.name != "bfloat16":
        raise CommsimError(f"dtype must be numeric, got {value!r}")
    return str(dt)


def _sizes(value: Any) -> tuple[int, ...]:
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise CommsimError(f"sizes must be a sequence of byte counts, got {value!r}")
    sizes = tuple(value)
    if not sizes:
        raise CommsimError("give at least one message size (sizes is empty)")
    for s in sizes:
        if isinstance(s, bool) or not isinstance(s, numbers.Integral):
            raise CommsimError(f"sizes must be whole numbers of bytes, got {s!r}")
    if min(sizes) < 0:
        raise CommsimError(f"sizes must be >= 0 bytes, got {min(sizes)}")
    return tuple(int(s) for s in sizes)


@dataclasses.dataclass(frozen=True)
class BenchRequest:
    """How to time schedules, nccl-tests style; validated on construction.

    Args:
        sizes: message sizes in bytes, in the collective's ``nbytes`` convention (nccl-tests');
            each is rounded down to what a schedule's slots divide evenly.
        dtype: element type (normalized to its numpy name: ``"f4"`` becomes ``"float32"``).
        iters: timed runs per size (median, min, max and spread over them).
        warmup: untimed runs before them.
        check: compare one run per size (and the baseline's) with the reference interpreter; a
            mismatch is recorded in the :class:`Measurement`, not raised.
        baseline: also time the backend's own collective, when it has one.
        seed: of the random integer inputs (the same on every rank).
        wire: send the schedule's messages in this wire format (``"fp16"``, ``"bf16"``,
            ``"int8"``; :mod:`commsim._wire`): the backend is made with ``wire=`` and the check
            is within the format's error bound; ``None``: exact.

    Examples:
        >>> BenchRequest(sizes=[1024, 4096], dtype="f4").sizes
        (1024, 4096)
        >>> BenchRequest(sizes=(1024,), iters=0)
        Traceback (most recent call last):
        ...
        commsim.errors.CommsimError: need iters >= 1 (timed runs per size), got iters=0
    """

    sizes: tuple[int, ...]
    dtype: str = "float32"
    iters: int = 20
    warmup: int = 5
    check: bool = True
    baseline: bool = True
    seed: int = 0
    wire: str | None = None

    def __post_init__(self) -> None:
        set_ = functools.partial(object.__setattr__, self)  # frozen: normalize in place
        set_("sizes", _sizes(self.sizes))
        set_("dtype", _dtype(self.dtype))
        set_("iters", _whole("iters", self.iters, 1, "timed runs per size"))
        set_("warmup", _whole("warmup", self.warmup, 0, "untimed runs first"))
        set_("seed", _whole("seed", self.seed, 0, "of the random inputs"))
        w = as_wire(self.wire)
        set_("wire", None if w is None else w.name)
        for name in ("check", "baseline"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise CommsimError(f"{name} must be True or False, got {getattr(self, name)!r}")
            set_(name, bool(getattr(self, name)))

    def backend_options(self) -> dict[str, Any]:
        """What the backend is made with for this request (``get_backend(name, **options)``)."""
        return {"wire": self.wire} if self.wire is not None else {}

    def to_dict(self) -> dict[str, Any]:
        """The request as plain JSON-ready data (what the MPI worker reads back)."""
        return {**dataclasses.asdict(self), "sizes": list(self.sizes)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BenchRequest:
        """The inverse of :meth:`to_dict`; unknown keys are an error."""
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - fields)
        if unknown:
            raise CommsimError(f"unknown request field(s) {', '.join(unknown)}")
        return cls(**data)
