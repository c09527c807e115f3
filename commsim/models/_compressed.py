r"""Any model with its messages in a wire format: :func:`compressed`.

A compressed collective sends each message in a smaller dtype (:mod:`commsim._wire`) and
converts on both ends. Nothing in a model's rule changes, so the model is not touched: the
message sizes are scaled before they reach it, and the conversion joins γ.

* **Bytes on the wire.** A collective of :math:`n` bytes of elements of ``itemsize`` bytes (4:
  float32) travels as :math:`r n` bytes, :math:`r` = the format's bytes per element over
  ``itemsize`` (fp16, bf16: :math:`1/2`; int8: :math:`(1 + 4/256)/4`, a float32 scale per 256
  elements). The model predicts the schedule at :math:`r n`, so every α-β-type term sees the
  wire's messages (a protocol or piecewise transport curve too).
* **Conversion.** Reductions still run on the data's own dtype, after decoding; each reduced
  byte also pays the conversion :math:`\gamma_\text{conv}` (:meth:`commsim._wire.Wire.conversion`,
  :math:`m\gamma/3`: a memory-bound kernel moving :math:`m` bytes per byte, as γ moves 3). The
  inner model runs with

  .. math::

      \gamma' = \frac{\gamma + \gamma_\text{conv}}{r},

  so that its reduction term :math:`\gamma' \cdot r n_\text{red} = (\gamma + \gamma_\text{conv})
  n_\text{red}`. Under Hockney the ring allreduce then costs

  .. math::

      T = 2(p-1)\alpha + 2\frac{p-1}{p}\, r n \beta + \frac{p-1}{p}\, n (\gamma + \gamma_\text{conv}),

  the bandwidth term exactly :math:`r` times the uncompressed one (:math:`1/2` for fp16).

The conversion is charged where γ is, per reduced byte; a schedule's overwriting transfers
(ring allreduce's allgather phase) also decode on arrival, which this leaves out (at most one
more :math:`\gamma_\text{conv}` term of the same size; ``docs/compression.md``).

See Also:
    :mod:`commsim._wire`: the formats, their error bounds and the conversion rule.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import numpy as np

from commsim import units
from commsim._ir import Schedule
from commsim._wire import Wire, wire
from commsim.errors import ParameterError
from commsim.models._bounds import model_bound
from commsim.models._inputs import as_inverse_bandwidth, as_sizes
from commsim.models._model import Model
from commsim.models._prediction import Prediction
from commsim.models._usage import Timeline

__all__ = ["Compressed", "compressed"]


class Compressed:
    """``model`` with messages in wire format ``wire`` (implements :class:`Model`; see
    :func:`compressed`)."""

    def __init__(
        self, model: Model, wire_format: str | Wire, *, itemsize: int = 4, conversion: Any = None
    ) -> None:
        w = wire(wire_format)
        if w is None:
            raise ParameterError("compressed() needs a wire format: fp16, bf16 or int8")
        from commsim.models._protocol_choice import ProtocolChoice

        if isinstance(model, ProtocolChoice):
            raise ParameterError(
                "a wire format with --protocol auto is not supported: force one protocol "
                "(--protocol LL, LL128 or Simple)"
            )
        if getattr(model, "reduction", None) is not None:
            raise ParameterError(
                "a wire format with a profile's measured reduction in a step (its step curve) "
                "is not modelled: give --gamma to price reductions per byte"
            )
        gamma = getattr(model, "gamma", None)
        if gamma is None:
            raise ParameterError(
                f"a wire format needs a model with a reduction cost gamma; {model.name} has none"
            )
        if itemsize not in (4, 8):
            raise ParameterError(f"itemsize must be 4 (float32) or 8 (float64), got {itemsize!r}")
        self.inner, self.wire, self.itemsize = model, w, itemsize
        self.ratio = w.ratio(itemsize)
        self.conversion = (
            w.conversion(gamma)
            if conversion is None
            else as_inverse_bandwidth("conversion", conversion)
        )
        self._scaled = copy.copy(model)
        self._scaled.gamma = (gamma + self.conversion) / self.ratio  # type: ignore[attr-defined]
        self.name = model.name
        self.bound_name = model.bound_name

    def __repr__(self) -> str:
        return f"compressed({self.inner!r}, {self.wire.name!r})"

    def predict(self, schedule: Schedule, nbytes: Any) -> Prediction:
        """The inner model's prediction at the wire's bytes, labelled with the data's bytes."""
        sizes, scalar = as_sizes(nbytes)
        wire_sizes = sizes * self.ratio
        pred = self._scaled.predict(schedule, float(wire_sizes[0]) if scalar else wire_sizes)
        return dataclasses.replace(
            pred, nbytes=float(sizes[0]) if scalar else sizes, model=self.describe()
        )

    def lower_bound(self, collective: str, nranks: int, nbytes: Any, helpers: int = 0) -> Any:
        """The inner model's bound for the wire's bytes (and γ + conversion per reduced byte)."""
        scaled = np.asarray(nbytes) * self.ratio
        return model_bound(self._scaled, collective, nranks, scaled, helpers)

    def timeline(
        self, schedule: Schedule, nbytes: Any, *, max_messages: int | None = None
    ) -> Timeline:
        sizes, _ = as_sizes(nbytes)
        return self._scaled.timeline(schedule, sizes * self.ratio, max_messages=max_messages)

    def describe(self) -> str:
        conv = (
            "0s/B" if self.conversion == 0 else f"1/({units.format_bandwidth(1 / self.conversion)})"
        )
        return (
            f"{self.inner.describe()}, wire {self.wire.name} ({self.wire.bytes_per_element:g} B "
            f"per {self.itemsize}-byte element, conversion {conv})"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.inner.to_dict(),
            "wire": {
                "name": self.wire.name,
                "bytes_per_element": self.wire.bytes_per_element,
                "itemsize": self.itemsize,
                "conversion_s_per_byte": self.conversion,
            },
        }


def compressed(
    model: Model, wire: str | Wire | None, *, itemsize: int = 4, conversion: Any = None
) -> Model:
    """``model`` whose messages travel in wire format ``wire`` (``None``: ``model`` itself).

    Args:
        model: any model with a reduction cost ``gamma`` (Hockney, LogGP, two-level, topology).
        wire: ``"fp16"``, ``"bf16"``, ``"int8"`` (:data:`commsim._wire.WIRES`).
        itemsize: bytes per element of the data (4: float32; 8: float64).
        conversion: seconds per data byte of conversion (or a bandwidth string); default
            :meth:`~commsim._wire.Wire.conversion` of the model's γ.

    Examples:
        >>> import commsim
        >>> from commsim.models import Hockney
        >>> s = commsim.build("allreduce", "ring", nranks=4)
        >>> m = Hockney(alpha=0.0, beta=1e-9, gamma=0.0)
        >>> plain, half = m.predict(s, 4000).time, compressed(m, "fp16").predict(s, 4000).time
        >>> round(half / plain, 12)  # 2·(3/4)·2000 B·1ns against 2·(3/4)·4000 B·1ns
        0.5
    """
    if wire is None:
        return model
    return Compressed(model, wire, itemsize=itemsize, conversion=conversion)
