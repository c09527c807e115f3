r"""Packing a group of arrays into one schedule call's buffer, and the results back out.

A drop-in collective (:mod:`commsim.exec._dropin`) runs one schedule on many arrays (the leaves
of a pytree, of one dtype) at once. A :class:`Packing`, made here with numpy alone from the
leaves' static shapes, says where every leaf sits in the rank's flat buffer of the schedule's
:class:`~commsim.exec.Layout`; :func:`pack` and :func:`unpack` move the data (JAX, inside the
caller's ``jit``).

**The packed vector is a matrix** ``[rows, w]`` flattened row by row. For the collectives whose
data is ``p`` rank blocks (``spec.block_multiple > 0``: reduce-scatter, allgather, alltoall) row
``q`` is block ``q`` of the schedule, and every leaf contributes the same columns to every row:

* an input that is the whole vector (reduce-scatter, alltoall: ``rows_in = p``) takes leaf ``i``
  as ``leaf.reshape(p, -1)`` (its leading dimension must divide by ``p``): block ``q`` holds the
  ``q``-th piece of **every** leaf, as ``lax.psum_scatter(tiled=True)`` and
  ``lax.all_to_all(tiled=True)`` cut each leaf;
* an input that is the rank's own block (allgather: ``rows_in = 1``) takes the whole leaf;
* the output is read the same way (``rows_out`` rows of the same columns), then reshaped to
  what JAX's collective returns: ``(s0 / p, ...)`` when ``p`` rows become one, ``(p, *shape)``
  (``tiled=False``) or ``(p · s0, ...)`` (``tiled=True``) when one row becomes ``p``.

For the others (allreduce, broadcast, reduce) there is one row: the leaves raveled end to end.
Which case applies is read from the collective's spec (its regions), never from its name.

**Units and padding.** A schedule moves whole slots: the collective's element count ``c`` must
be a multiple of ``schedule.nbytes_units`` (:func:`commsim.exec.layout`). The row width ``w`` is
the leaves' columns rounded **up** to the smallest width that makes ``c`` (``w``, or ``p · w``
for blocked collectives) such a multiple; the padding columns are zeros in and dropped out.
The rank's buffer is then the input region of ``c`` (or ``w``) elements at the spec's
``input_region`` start, zeros elsewhere (scratch slots, other ranks' blocks).

**Copies.** :func:`pack` is one ``concatenate`` of the leaves and the padding (none when a group
is one leaf that needs no padding: a reshape), then one ``pad`` or ``dynamic_update_slice``
into the buffer only where the buffer is larger than the input (scratch slots, allgather's
other blocks); XLA fuses the two into one write of the buffer. :func:`unpack` slices every
leaf's columns out of the output region: one copy of the output (none for a single unpadded
leaf of a one-row collective: a reshape).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from commsim._ir import Schedule
from commsim.errors import ParameterError
from commsim.exec._layout import Layout, layout

__all__ = ["Packing", "pack", "packing", "place", "take", "unpack"]

Shape = tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class Packing:
    """Where one group of same-dtype leaves sits in one schedule call (see the module docstring).

    Attributes:
        layout: the schedule's element layout for the packed count.
        rows_in, rows_out: rows of the packed input and output (1 or ``p``).
        width: ``w``, the padded row width (elements).
        columns: ``[nleaves + 1]`` column offsets of the leaves in a row.
        shapes, out_shapes: the leaves' shapes in and out.
    """

    layout: Layout
    rows_in: int
    rows_out: int
    width: int
    columns: tuple[int, ...]
    shapes: tuple[Shape, ...]
    out_shapes: tuple[Shape, ...]

    @property
    def used(self) -> int:
        """Columns that hold data (the rest of ``width`` is padding)."""
        return self.columns[-1]

    @property
    def input_starts(self) -> np.ndarray:
        """``[p]``: where each rank's packed input starts in its buffer."""
        return self.layout.spec.input_region(self.layout.nranks, self.layout.count)[0]

    @property
    def output_starts(self) -> np.ndarray:
        """``[p]``: where each rank's packed output starts in its buffer."""
        return self.layout.spec.output_region(self.layout.nranks, self.layout.count)[0]


def _blocks(schedule: Schedule, region: str) -> bool:
    """Whether a region (``"input_region"``, ``"output_region"``) is all ``p`` rank blocks, cut
    along the leaves' leading dimension; otherwise it is one row (probed at ``p = 2``, where
    the two differ even for a schedule of one rank)."""
    sp = schedule.spec
    return bool(sp.block_multiple) and int(getattr(sp, region)(2, 2)[1]) == 2


def _out_shape(shape: Shape, cut_in: bool, cut_out: bool, p: int, tiled: bool) -> Shape:
    if cut_in == cut_out:
        return shape
    if cut_in:  # p blocks in, this rank's block out (psum_scatter, tiled)
        return (shape[0] // p, *shape[1:])
    return (p * shape[0], *shape[1:]) if tiled else (p, *shape)  # all_gather


def _check_shape(
    schedule: Schedule, name: str, shape: Shape, cut_in: bool, cut_out: bool, tiled: bool
) -> None:
    p, coll = schedule.nranks, schedule.collective
    if cut_in and (not shape or shape[0] % p):
        raise ParameterError(
            f"{coll} cuts every array into p={p} blocks along its leading dimension, which "
            f"must divide by {p}; leaf {name} has shape {shape}"
        )
    if cut_out and not cut_in and tiled and not shape:
        raise ParameterError(
            f"{coll} with tiled=True concatenates along the leading dimension; leaf {name} is "
            "a scalar (use tiled=False to stack scalars)"
        )


def packing(
    schedule: Schedule,
    shapes: list[Shape],
    names: list[str] | None = None,
    tiled: bool = False,
    align: int = 1,
) -> Packing:
    """The packing of leaves of ``shapes`` for one call of ``schedule`` (numpy only).

    ``names`` name the leaves in error messages (default: their indices); ``tiled`` is
    ``lax.all_gather``'s: the gathered blocks stacked on a new axis or concatenated. ``align``
    pads further, so that every slot unit holds a multiple of ``align`` elements: the
    buffer's cuts between slots then fall on multiples of ``align`` elements (the MPI drop-in
    asks for 8 bytes: :attr:`commsim.exec.mpi.MpiCollective.align_bytes`).

    Examples:
        >>> import commsim
        >>> s = commsim.build("reduce_scatter", "ring", nranks=4)
        >>> pk = packing(s, [(8, 3), (4,)])  # each block: 2 x 3 of the first, 1 of the second
        >>> pk.rows_in, pk.rows_out, pk.columns, pk.width, pk.out_shapes
        (4, 1, (0, 6, 7), 7, ((2, 3), (1,)))
        >>> packing(s, [(8, 3), (4,)], align=2).width  # 8 columns: 2 elements per slot unit
        8
    """
    p = schedule.nranks
    cut_in, cut_out = _blocks(schedule, "input_region"), _blocks(schedule, "output_region")
    rin, rout = (p if cut_in else 1), (p if cut_out else 1)
    names = names if names is not None else [str(i) for i in range(len(shapes))]
    for name, shape in zip(names, shapes, strict=True):
        _check_shape(schedule, name, tuple(shape), cut_in, cut_out, tiled)
    cols = np.cumsum([0] + [math.prod(s) // rin for s in shapes]).tolist()
    u = schedule.nbytes_units * align  # count multiple of u <=> per_unit multiple of align
    blocked = schedule.spec.block_multiple > 0
    step = u // math.gcd(u, p) if blocked else u  # w multiple of step <=> count multiple of u
    width = max(step, -(-cols[-1] // step) * step)
    lay = layout(schedule, p * width if blocked else width)
    return Packing(
        lay,
        rin,
        rout,
        width,
        tuple(int(c) for c in cols),
        tuple(tuple(s) for s in shapes),
        tuple(_out_shape(tuple(s), cut_in, cut_out, p, tiled) for s in shapes),
    )


# -- data movement (JAX, inside the caller's trace) ------------------------------------------------
def pack(leaves: list[Any], pk: Packing) -> Any:
    """The leaves as the packed input vector ``[rows_in · width]``: one ``concatenate`` (with the
    padding columns), or a reshape when one leaf fills the row."""
    import jax.numpy as jnp

    r, pad = pk.rows_in, pk.width - pk.used
    parts = [x.reshape(r, -1) for x in leaves]
    if pad:
        parts.append(jnp.zeros((r, pad), leaves[0].dtype))
    mat = parts[0] if len(parts) == 1 else jnp.concatenate(parts, axis=1)
    return mat.reshape(-1)


def unpack(out: Any, pk: Packing) -> list[Any]:
    """The output leaves from the packed output vector ``[rows_out · width]``."""
    mat = out.reshape(pk.rows_out, pk.width)
    c = pk.columns
    return [
        mat[:, c[i] : c[i + 1]].reshape(shape)  # whole rows when it is the only leaf: a reshape
        for i, shape in enumerate(pk.out_shapes)
    ]


def _start(starts: np.ndarray, rank: Any) -> Any:
    """``starts[rank]``: a Python int when static (every rank alike, or ``rank`` an int)."""
    if (starts == starts[0]).all():
        return int(starts[0])
    if isinstance(rank, (int, np.integer)):
        return int(starts[rank])
    import jax.numpy as jnp

    return jnp.asarray(starts, np.int32)[rank]


def place(vec: Any, pk: Packing, rank: Any) -> Any:
    """The rank's ``[nelems]`` buffer: ``vec`` at its input start, zeros elsewhere (``vec``
    itself when it fills the buffer). ``rank`` is an int, or a traced index (JAX's
    ``lax.axis_index``) when the start differs per rank."""
    import jax.numpy as jnp
    from jax import lax

    n, length = pk.layout.nelems, vec.shape[0]
    if length == n:
        return vec
    start = _start(pk.input_starts, rank)
    if isinstance(start, int):
        return jnp.pad(vec, (start, n - start - length))
    return lax.dynamic_update_slice(jnp.zeros(n, vec.dtype), vec, (start,))


def take(buf: Any, pk: Packing, rank: Any) -> Any:
    """The rank's packed output ``[rows_out · width]`` from its ``[nelems]`` buffer."""
    from jax import lax

    length = pk.rows_out * pk.width
    start = _start(pk.output_starts, rank)
    if isinstance(start, int):
        return buf if (start, length) == (0, buf.shape[0]) else buf[start : start + length]
    return lax.dynamic_slice(buf, (start,), (length,))
