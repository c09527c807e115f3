r"""Wire formats: what a compressed collective puts on the wire, what it costs, how wrong it can be.

A **wire format** is the dtype a schedule's messages travel in while its buffers stay in their own
(float32) dtype: every sender converts its payload before the send, every receiver converts back
after the receive and adds (or stores) in the buffer's dtype (Horovod's ``Compression.fp16``,
bf16 gradients, int8 quantisation). This module is the one owner of the concept; the models
(:func:`commsim.models.compressed`), the executors (``wire=`` / ``compression=``) and the verifier
(``commsim.verify(schedule, wire=...)``) all read the :class:`Wire` rows of :data:`WIRES`.

===========  ==================  ==============================  ===================================
wire         bytes per element   error of one conversion of v    memory traffic per fp32 byte
===========  ==================  ==============================  ===================================
``fp16``     2                   :math:`2^{-11}|v|` (+ 2^-25)     3 (read 4, write 2; read 2, write 4)
``bf16``     2                   :math:`2^{-8}|v|` (+ 2^-134)     3
``int8``     :math:`1 + 4/256`   :math:`s/2`, :math:`s =         3.5 (a max pass, read 4 write 1;
                                 \max_\text{chunk}|v| / 127`     read 1 write 4)
===========  ==================  ==============================  ===================================

**Rounding.** fp16 and bf16 round to nearest even: a float of :math:`t` significand bits (11 and 8,
the implicit bit included) is within :math:`2^{-t}|v|` of ``v`` (the unit roundoff; Higham,
*Accuracy and Stability of Numerical Algorithms*, 2nd ed., 2002, §2.1), plus half the smallest
subnormal for values below the normal range. fp16 overflows to ``inf`` past 65504: the data must
stay in range. **int8** cuts each payload into chunks of :data:`CHUNK` elements; a chunk travels
as ``round(v / s)`` in [-127, 127] with its own float32 scale :math:`s = \max|v| / 127` (symmetric
per-block quantisation as in Dettmers et al., "8-bit optimizers via block-wise quantization",
ICLR 2022), so one conversion is off by at most :math:`s/2` (values must be finite).

**Cost.** A conversion is a memory-bound streaming kernel: its time is the bytes it moves over the
memory bandwidth (McCalpin's STREAM rule). The Hockney γ is the same kind of kernel (a reduction
reads two operands and writes one: 3 bytes moved per byte reduced), so a format's conversion
costs

.. math::

    \gamma_\text{conv} = \frac{m}{3}\,\gamma

per byte of float32 data, where :math:`m` is the format's memory traffic per fp32 byte (the
table's last column): :math:`\gamma` for fp16/bf16, :math:`\tfrac{7}{6}\gamma` for int8
(:meth:`Wire.conversion`).

Examples:
    >>> w = wire("fp16")
    >>> w.ratio(4), w.unit_roundoff
    (0.5, 0.00048828125)
    >>> import numpy as np
    >>> x = np.array([1.0, 1e-3, 3.0], np.float32)
    >>> bool(np.all(np.abs(w.transmit(x) - x) <= w.unit_roundoff * np.abs(x) + w.tiny))
    True
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from commsim._collectives import spec
from commsim.errors import ParameterError, UnknownNameError

__all__ = ["CHUNK", "REDUCING", "WIRES", "Wire", "check_data", "check_wire", "wire"]

#: elements per int8 chunk (one float32 scale each): 4/256 bytes of scale per element
CHUNK = 256
#: the collectives a wire format applies to, for messages (:func:`check_wire` asks the spec)
REDUCING = ("allreduce", "reduce", "reduce_scatter")


@dataclasses.dataclass(frozen=True)
class Wire:
    """One wire format (a row of :data:`WIRES`).

    Attributes:
        name: what ``--wire`` takes, e.g. ``"fp16"``.
        dtype: the payload's dtype on the wire (``"float16"``, ``"bfloat16"``, ``"int8"``).
        bytes_per_element: wire bytes per element, a chunk's scale included.
        unit_roundoff: relative error of one conversion (fp16, bf16); for int8, the error as a
            share of the chunk's largest magnitude (:math:`1/254`).
        tiny: absolute error of one conversion below the normal range (0 for int8).
        traffic: memory bytes a conversion there and back moves per byte of float32 data.
        scaled: per-chunk scales (int8).
    """

    name: str
    dtype: str
    bytes_per_element: float
    unit_roundoff: float
    tiny: float
    traffic: float
    scaled: bool = False

    def ratio(self, itemsize: int = 4) -> float:
        """Wire bytes per byte of data of ``itemsize`` bytes per element (fp16 on fp32: 0.5)."""
        return self.bytes_per_element / itemsize

    def conversion(self, gamma: float) -> float:
        r"""Conversion seconds per byte of float32 data, :math:`\gamma_\text{conv} = m\gamma/3`
        (module docstring: a streaming kernel like the reduction γ times)."""
        return self.traffic / 3.0 * gamma

    def hop_error(self, magnitude: np.ndarray, chunk_max: Any) -> np.ndarray:
        """Largest error one conversion adds to values bounded by ``magnitude`` (elementwise);
        ``chunk_max`` bounds the magnitude of everything in the value's chunk (int8's scale)."""
        if self.scaled:
            bound = np.asarray(chunk_max, np.float64) * self.unit_roundoff
            return np.broadcast_to(bound, np.shape(magnitude)).copy()
        return self.unit_roundoff * np.asarray(magnitude, np.float64) + self.tiny

    def payload_dtype(self, xp: Any = np) -> Any:
        """The dtype of the payload on the wire, as ``xp`` (numpy or jax.numpy) names it."""
        return _wire_dtype(self.dtype, xp)

    # -- the conversion itself, for numpy and jax.numpy alike (``xp``) --------------------------
    def encode(self, x: Any, xp: Any = np) -> tuple[Any, ...]:
        """``x`` (``[..., n]``) as it travels: ``(payload,)``, or ``(int8 payload, scales)``
        with one float32 scale per :data:`CHUNK` elements of the last axis."""
        if not self.scaled:
            return (x.astype(self.payload_dtype(xp)),)
        n = x.shape[-1]
        nchunks = -(-n // CHUNK)
        y = _blocks(x, nchunks, xp)
        amax = xp.max(xp.abs(y), axis=-1, keepdims=True)
        scale = xp.where(amax > 0, amax / 127.0, 1.0).astype(np.float32)
        q = xp.clip(xp.round(y / scale), -127, 127).astype(np.int8)
        return (q.reshape(*x.shape[:-1], nchunks * CHUNK)[..., :n], scale[..., 0])

    def decode(self, parts: tuple[Any, ...], dtype: Any, xp: Any = np) -> Any:
        """What :meth:`encode` sent, back in ``dtype``."""
        if not self.scaled:
            return parts[0].astype(dtype)
        q, scale = parts
        n = q.shape[-1]
        y = _blocks(q.astype(np.float32), scale.shape[-1], xp) * scale[..., None]
        return y.reshape(*q.shape[:-1], -1)[..., :n].astype(dtype)

    def transmit(self, x: Any, xp: Any = np) -> Any:
        """``x`` after one trip over the wire (encoded, then decoded to its own dtype)."""
        return self.decode(self.encode(x, xp), x.dtype, xp)


def _blocks(x: Any, nchunks: int, xp: Any) -> Any:
    """``x``'s last axis padded with zeros to ``nchunks`` chunks: ``[..., nchunks, CHUNK]``."""
    pad = nchunks * CHUNK - x.shape[-1]
    if pad:
        x = xp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, pad)])
    return x.reshape(*x.shape[:-1], nchunks, CHUNK)


def _wire_dtype(name: str, xp: Any) -> Any:
    if name == "bfloat16":
        if xp is np:
            import ml_dtypes

            return ml_dtypes.bfloat16
        return xp.bfloat16
    return np.dtype(name)


#: every wire format by name
WIRES: dict[str, Wire] = {
    w.name: w
    for w in (
        Wire("fp16", "float16", 2.0, 2.0**-11, 2.0**-25, 3.0),
        Wire("bf16", "bfloat16", 2.0, 2.0**-8, 2.0**-134, 3.0),
        Wire("int8", "int8", 1.0 + 4.0 / CHUNK, 1.0 / 254, 0.0, 3.5, scaled=True),
    )
}


def wire(name: str | Wire | None) -> Wire | None:
    """The :class:`Wire` called ``name`` (a row passes through, ``None`` is no compression);
    a one-line :class:`~commsim.errors.UnknownNameError` naming the formats otherwise.

    Examples:
        >>> wire("int8").bytes_per_element
        1.015625
        >>> wire("fp8")
        Traceback (most recent call last):
        ...
        commsim.errors.UnknownNameError: unknown wire format 'fp8'; use fp16, bf16 or int8
    """
    if name is None or isinstance(name, Wire):
        return name
    found = WIRES.get(str(name).strip().lower())
    if found is None:
        raise UnknownNameError(f"unknown wire format {name!r}; use fp16, bf16 or int8")
    return found


def check_wire(w: Wire | None, collective: str, dtype: Any = None) -> None:
    """Refuse, in one line, a wire format on a collective or data it does not apply to.

    Only reductions carry one (:data:`REDUCING`): compression is for sums of gradients, where
    a bounded error in each partial sum is what the user accepts, and the model charges the
    conversion through γ, the reduction's term. A collective that only moves data (allgather,
    broadcast, alltoall) would deliver altered copies of its inputs: compress the data before
    the call instead. The data must be floating point (float32 or float64).
    """
    if w is None:
        return
    if not spec(collective).reduces:
        raise ParameterError(
            f"wire format {w.name} applies to reductions ({', '.join(REDUCING)}); "
            f"{collective} only moves data (compress it before the call instead)"
        )
    check_data(w, dtype)


def check_data(w: Wire | None, dtype: Any) -> None:
    """Refuse, in one line, a wire format on data that is not float32 or float64."""
    if w is not None and dtype is not None and np.dtype(dtype).name not in ("float32", "float64"):
        raise ParameterError(
            f"wire format {w.name} compresses float32 or float64 data, not {np.dtype(dtype).name}"
        )
